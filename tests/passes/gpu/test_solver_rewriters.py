"""gpusolver-rewriter and triangular-solve-rewriter: XLA's library-call forms, run by the
interpreter with the semantics of the instructions they replace."""
from __future__ import annotations

import itertools
import json
import zlib

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends import execute
from passes.gpu.gpusolver_rewriter import CUSOLVER_CHOLESKY, potrf_workspace_elements
from passes.gpu.triangular_solve_rewriter import CUBLAS_TRIANGULAR_SOLVE

from tests.support.harness import assert_close, check_pass
from .util import run

CHOL = """HloModule c
ENTRY %main (a: {t}[{d}]) -> {t}[{d}] {{
  %a = {t}[{d}] parameter(0)
  ROOT %c = {t}[{d}] cholesky(%a){lower}, metadata={{op_name="chol"}}
}}
"""

DTYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}


def _spd(rng, dims, dtype):
    *batch, n, _ = dims
    a = rng.standard_normal(tuple(batch) + (n, n))
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(tuple(batch) + (n, n))
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _chol(t="f32", dims=(4, 4), lower=True):
    text = CHOL.format(t=t, d=",".join(map(str, dims)),
                       lower="" if lower is None else f", lower={str(lower).lower()}")
    return parse_hlo(text)


def _calls(m, target):
    return [i for i in m.entry.instructions
            if i.opcode == "custom-call" and i.custom_call_target == target]


# ---- gpusolver-rewriter ------------------------------------------------------------------

@pytest.mark.parametrize("lower", [True, False, None])
def test_cholesky_becomes_the_cusolver_call_with_xla_form(lower):
    m = run(_chol(dims=(4, 4), lower=lower), "gpusolver-rewriter")
    (call,) = _calls(m, CUSOLVER_CHOLESKY)
    # (result in Fortran layout, workspace, info) and the operand layout constraint
    assert call.shape.to_text() == "(f32[4,4]{0,1}, f32[2]{0}, s32[])"
    assert call.attrs["operand_layout_constraints"] == "{f32[4,4]{0,1}}"
    assert json.loads(call.attrs["backend_config"]) == {"lower": bool(lower)}
    assert call.attrs["metadata"] == '{op_name="chol"}'
    root = m.entry.root
    assert root.opcode == "select" and root.shape.to_text() == "f32[4,4]{1,0}"
    ok, out, nans = root.operands
    assert out.opcode == "get-tuple-element" and out.attr("index") == 0
    assert out.operands[0] is call
    assert ok.opcode == "broadcast" and ok.operands[0].opcode == "compare"
    cmp = ok.operands[0]
    assert cmp.attrs["direction"] == "EQ"
    info, zeros = cmp.operands
    assert info.opcode == "get-tuple-element" and info.attr("index") == 2
    assert zeros.opcode == "broadcast" and zeros.operands[0].payload == "0"
    assert nans.opcode == "broadcast" and nans.operands[0].payload == "nan"
    assert not [i for i in m.entry.instructions if i.opcode == "cholesky"]


def test_batched_cholesky_shapes():
    m = run(_chol(t="c64", dims=(3, 2, 5, 5)), "gpusolver-rewriter")
    (call,) = _calls(m, CUSOLVER_CHOLESKY)
    # batch 6 pointers of 8 bytes in c64 (8-byte) elements: 6
    assert call.shape.to_text() == "(c64[3,2,5,5]{2,3,1,0}, c64[6]{0}, s32[3,2]{1,0})"
    ok = m.entry.root.operands[0]
    assert ok.attrs["dimensions"] == "{0,1}"
    assert m.entry.root.operands[2].operands[0].payload == "(nan, 0)"


def test_workspace_is_the_batched_pointer_array():
    assert potrf_workspace_elements("f32", 4, 1) == 2
    assert potrf_workspace_elements("f64", 4, 1) == 1
    assert potrf_workspace_elements("f32", 4, 7) == 14
    assert potrf_workspace_elements("c128", 4, 3) == 2


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_types_cusolver_cannot_factor_are_left_alone(t):
    m = run(_chol(t=t), "gpusolver-rewriter")
    assert [i.opcode for i in m.entry.instructions] == ["parameter", "cholesky"]


def test_cholesky_in_a_fused_computation_is_left_alone():
    text = """HloModule f
%fused (p: f32[4,4]) -> f32[4,4] {
  %p = f32[4,4] parameter(0)
  ROOT %c = f32[4,4] cholesky(%p), lower=true
}
ENTRY %main (a: f32[4,4]) -> f32[4,4] {
  %a = f32[4,4] parameter(0)
  ROOT %f = f32[4,4] fusion(%a), kind=kLoop, calls=%fused
}
"""
    m = run(text, "gpusolver-rewriter")
    assert m.computation("fused").root.opcode == "cholesky"


@pytest.mark.parametrize("t,dims,lower", [
    ("f32", (4, 4), True), ("f32", (2, 3, 6, 6), False), ("f64", (5, 5), None),
    ("c64", (2, 4, 4), True), ("c128", (3, 3), False)])
def test_cholesky_rewrite_computes_the_same_on_spd_inputs(t, dims, lower):
    rng = np.random.default_rng(zlib.crc32(repr((t, dims, lower)).encode()))
    spd = _spd(rng, dims, DTYPES[t])
    r = check_pass(_chol(t, dims, lower), "gpusolver-rewriter", seeds=(), extra_args=[[spd]])
    assert r.changed and r.compared_runs == 1
    # and it is a factorization of the input
    out = execute(r.module, [spd])[0]
    tol = 1e-3 if t in ("f32", "c64") else 1e-9
    if lower in (None, False):
        recon = np.conj(np.swapaxes(out, -1, -2)) @ out
    else:
        recon = out @ np.conj(np.swapaxes(out, -1, -2))
    np.testing.assert_allclose(recon, spd, rtol=tol, atol=tol * 10)


def test_cholesky_rewrite_matches_on_failed_factorizations_too():
    """Random inputs are not positive definite: both sides return all-NaN batch
    elements (cuSOLVER's info drives the select), the rest identical."""
    rng = np.random.default_rng(3)
    a = _spd(rng, (4, 5, 5), np.float32)
    a[1] = rng.standard_normal((5, 5)).astype(np.float32)  # not PD
    a[3, 2, 2] = -50.0
    m = _chol("f32", (4, 5, 5), True)
    before = execute(m, [a])[0]
    after = execute(run(m, "gpusolver-rewriter"), [a])[0]
    assert_close([before], [after], 0, 0, "failed factorizations")
    assert np.isnan(before[1]).all() and np.isnan(before[3]).all()
    assert np.isfinite(before[0]).all() and np.isfinite(before[2]).all()


def test_cusolver_call_reports_potrf_info():
    text = """HloModule c
ENTRY %main (a: f32[2,3,3]) -> (f32[2,3,3]{1,2,0}, f32[4]{0}, s32[2]) {
  %a = f32[2,3,3] parameter(0)
  ROOT %call = (f32[2,3,3]{1,2,0}, f32[4]{0}, s32[2]) custom-call(%a), custom_call_target="__cusolver$cholesky", backend_config={"lower":true}
}
"""
    good = np.array([[4, 0, 0], [2, 5, 0], [0, 1, 6]], np.float32)
    bad = good.copy()
    bad[1, 1] = -1.0  # the order-2 leading minor is not positive definite
    factor, ws, info = execute(parse_hlo(text), [np.stack([good + np.tril(good, -1).T, bad])])
    assert info.tolist() == [0, 2] and ws.tolist() == [0, 0, 0, 0]
    assert np.allclose(np.triu(factor[0], 1), 0)


# ---- triangular-solve-rewriter -------------------------------------------------------------

SOLVE = """HloModule t
ENTRY %main (a: f32[{ad}], b: f32[{bd}]) -> f32[{bd}] {{
  %a = f32[{ad}] parameter(0)
  %b = f32[{bd}] parameter(1)
  ROOT %triangular-solve = f32[{bd}] triangular-solve(%a, %b){attrs}
}}
"""


def _solve(ad, bd, attrs):
    return parse_hlo(SOLVE.format(ad=",".join(map(str, ad)), bd=",".join(map(str, bd)),
                                  attrs=attrs))


def test_xla_triangular_solve_with_transpose():
    # TriangularSolveRewriterTest.TriangularSolveWithTranspose
    m = run(_solve((4, 4), (3, 4), ", lower=true, transpose_a=TRANSPOSE"),
            "triangular-solve-rewriter")
    root = m.entry.root
    assert root.opcode == "get-tuple-element" and root.attr("index") == 0
    call = root.operands[0]
    assert call.opcode == "custom-call" and call.custom_call_target == CUBLAS_TRIANGULAR_SOLVE


def test_xla_right_lower_no_transpose():
    # TriangularSolveRewriterTest.RightLowerNoTranspose
    m = run(_solve((4, 4), (3, 4), ", lower=true, transpose_a=NO_TRANSPOSE"),
            "triangular-solve-rewriter")
    assert m.entry.root.operands[0].custom_call_target == CUBLAS_TRIANGULAR_SOLVE


def test_backend_config_and_temp_buffer():
    m = run(_solve((2, 3, 4, 4), (2, 3, 4, 5),
                   ", left_side=true, lower=false, unit_diagonal=true, transpose_a=ADJOINT, "
                   'frontend_attributes={k="v"}, metadata={op_name="solve"}'),
            "triangular-solve-rewriter")
    (call,) = _calls(m, CUBLAS_TRIANGULAR_SOLVE)
    # batch 6: two arrays of 6 pointers
    assert call.shape.to_text() == "(f32[2,3,4,5]{3,2,1,0}, s8[96]{0})"
    assert call.attrs["backend_config"] == \
        '{"left_side":true,"lower":false,"unit_diagonal":true,"transpose_a":"ADJOINT"}'
    assert call.attrs["frontend_attributes"] == '{k="v"}'
    assert call.attrs["metadata"] == '{op_name="solve"}'
    assert call.name.startswith("triangular-solve")
    # one matrix: plain trsm needs no temp memory
    m = run(_solve((4, 4), (4, 2), ", left_side=true"), "triangular-solve-rewriter")
    (call,) = _calls(m, CUBLAS_TRIANGULAR_SOLVE)
    assert call.shape.to_text() == "(f32[4,2]{1,0}, s8[0]{0})"
    cfg = json.loads(call.attrs["backend_config"])
    # fields the instruction leaves unset are the proto defaults
    assert cfg == {"left_side": True, "lower": False, "unit_diagonal": False,
                   "transpose_a": "TRANSPOSE_INVALID"}


@pytest.mark.parametrize("left,lower,unit,tr", list(itertools.product(
    [True, False], [True, False], [True, False],
    ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT", None])))
def test_triangular_solve_rewrite_computes_the_same(left, lower, unit, tr):
    rng = np.random.default_rng(zlib.crc32(repr((left, lower, unit, tr)).encode()))
    m_, n_ = 4, 3
    a = (rng.standard_normal((2, m_, m_)) + 4 * np.eye(m_)).astype(np.float32)
    bd = (2, m_, n_) if left else (2, n_, m_)
    b = rng.standard_normal(bd).astype(np.float32)
    attrs = f", left_side={str(left).lower()}, lower={str(lower).lower()}, " \
        f"unit_diagonal={str(unit).lower()}" + (f", transpose_a={tr}" if tr else "")
    r = check_pass(_solve((2, m_, m_), bd, attrs), "triangular-solve-rewriter",
                   seeds=(0,), extra_args=[[a, b]])
    assert r.changed and r.compared_runs == 2
    assert CUBLAS_TRIANGULAR_SOLVE in r.after_text


def test_cholesky_solve_through_the_gpu_pipeline():
    """cholesky then two triangular solves (a linear solve) through the whole gpu
    pipeline: both library calls are there, and the result solves the system."""
    from passes.pipelines import build_pipeline
    text = """HloModule s
ENTRY %main (a: f32[6,6], b: f32[6,2]) -> f32[6,2] {
  %a = f32[6,6] parameter(0)
  %b = f32[6,2] parameter(1)
  %l = f32[6,6] cholesky(%a), lower=true
  %y = f32[6,2] triangular-solve(%l, %b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  ROOT %x = f32[6,2] triangular-solve(%l, %y), left_side=true, lower=true, transpose_a=ADJOINT
}
"""
    rng = np.random.default_rng(7)
    a = _spd(rng, (6, 6), np.float32)
    b = rng.standard_normal((6, 2)).astype(np.float32)
    r = check_pass(parse_hlo(text), build_pipeline("gpu"), seeds=(), extra_args=[[a, b]],
                   rtol=1e-4, atol=1e-5)
    assert r.after_text.count(CUSOLVER_CHOLESKY) == 1
    assert r.after_text.count(CUBLAS_TRIANGULAR_SOLVE) == 2
    x = execute(r.module, [a, b])[0]
    np.testing.assert_allclose(a @ x, b, rtol=1e-3, atol=1e-3)
