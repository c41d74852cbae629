"""cholesky and triangular-solve plans (cuSOLVER potrf / cuBLAS trsm calls) against the
interpreter, without a GPU: numpy models of the library calls (column-major matrices at
``i + j * ld``; geam's transpose, trttp/tpttr's triangle copy into a zeroed output,
potrf in place reading one triangle, trsm's side/fill/op/diag in place on B) run each plan
on the operands' bytes in memory order; the result must be the interpreter's."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.autotune.buffers import from_physical, to_physical
from hlo_opt.backends.cuda.solver_plan import cholesky_plan, trsm_plan
from hlo_opt.backends.interpreter.ops_linalg import (cholesky as interpret_cholesky,
                                                     cholesky_factor, nan_fill_failed,
                                                     triangular_solve)
from hlo_opt.backends.interpreter.ops_solver import (cublas_triangular_solve,
                                                     cusolver_cholesky)
from tests.conftest import CORPUS, corpus_files


def _view(flat, offset, rows, cols):
    """Indices of a column-major ``rows x cols`` matrix (ld = rows) at ``offset``."""
    return offset + np.arange(rows)[:, None] + np.arange(cols)[None, :] * rows


def potrf_model(plan, a_flat, out_size):
    """(output flat, info per batch element) of the plan's library calls."""
    n = plan.n
    out = np.zeros(out_size, dtype=a_flat.dtype)
    infos = []
    for ia, io in plan.offsets:
        src = a_flat[_view(a_flat, ia, n, n)]
        if plan.transpose_input:                     # geam(T, ...): C = A^T, no conjugate
            src = src.T
        lower = plan.uplo == "L"
        tri = np.tril(src) if lower else np.triu(src)  # trttp -> memset -> tpttr
        # potrf reads only its triangle of the output; the other stays zero
        factor, info = cholesky_factor(tri, lower)
        out[_view(out, io, n, n)] = factor
        infos.append(int(info))
    if plan.nan_fill:
        for (_, io), info in zip(plan.offsets, infos):
            if info:
                out[io:io + n * n] = np.nan
    return out, infos


def trsm_model(plan, a_flat, b_flat):
    x = np.array(b_flat)
    k = plan.lda
    for ia, ib in plan.offsets:
        a = a_flat[_view(a_flat, ia, k, k)]
        tri = np.tril(a) if plan.uplo == "L" else np.triu(a)
        if plan.unit_diagonal:
            np.fill_diagonal(tri, 1)
        op = {"N": tri, "T": tri.T, "C": np.conj(tri.T)}[plan.trans]
        b = x[_view(x, ib, plan.m, plan.n)]
        sol = np.linalg.solve(op, b) if plan.side == "L" else np.linalg.solve(op.T, b.T).T
        x[_view(x, ib, plan.m, plan.n)] = sol
    return x


def _rand(shape, rng):
    x = rng.standard_normal(shape.dims)
    if shape.element_type.startswith("c"):
        x = x + 1j * rng.standard_normal(shape.dims)
    return x


def _wide(dt):
    return dt in ("f64", "c128")


def _close(got, want, dt):
    scale = max(1.0, float(np.nanmax(np.abs(want))) if np.isfinite(want).any() else 1.0)
    tol = 1e-9 if _wide(dt) else 2e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, equal_nan=True)


def spd_input(shape, rng, garbage=True):
    """Hermitian positive definite matrices; with ``garbage`` the triangle the op must
    not read is replaced by noise (so reading the wrong one shows)."""
    n = shape.dims[-1]
    x = _rand(shape, rng)
    a = x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)
    if garbage:
        noise = _rand(shape, rng) * 10
        return a, noise
    return a, None


def run_cholesky(inst, a):
    plan = cholesky_plan(inst)
    assert plan is not None, inst.to_text()
    ash = inst.operands[0].shape
    out_shape = inst.shape.tuple_shapes[0] if inst.shape.is_tuple() else inst.shape
    flat = to_physical(ash, a.astype(ash.dtype)).reshape(-1)
    flat = flat.astype(np.complex128 if ash.element_type[0] == "c" else np.float64)
    out, infos = potrf_model(plan, flat, out_shape.num_elements())
    return plan, from_physical(out_shape, out.astype(out_shape.dtype)), infos


def cholesky_module(dt, dims, lower, in_l, out_l, custom):
    d = ",".join(map(str, dims))
    if not custom:
        return parse_hlo(f"""HloModule m
ENTRY e {{
  %a = {dt}[{d}]{in_l} parameter(0)
  ROOT %c = {dt}[{d}]{out_l} cholesky(%a), lower={str(lower).lower()}
}}""")
    bd = ",".join(map(str, dims[:-2]))
    info_l = "{" + ",".join(map(str, range(len(dims) - 3, -1, -1))) + "}"
    return parse_hlo(f"""HloModule m
ENTRY e {{
  %a = {dt}[{d}]{in_l} parameter(0)
  ROOT %c = ({dt}[{d}]{out_l}, {dt}[16]{{0}}, s32[{bd}]{info_l}) custom-call(%a), custom_call_target="__cusolver$cholesky", backend_config={{"lower":{str(lower).lower()}}}
}}""")


LAYOUTS_3 = ["{2,1,0}", "{1,2,0}"]


@pytest.mark.parametrize("dt", ["f32", "f64", "c64", "c128"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("in_l", LAYOUTS_3)
@pytest.mark.parametrize("out_l", LAYOUTS_3)
@pytest.mark.parametrize("custom", [False, True])
def test_cholesky_forms(dt, lower, in_l, out_l, custom):
    inst = cholesky_module(dt, [3, 5, 5], lower, in_l, out_l, custom).entry.root
    rng = np.random.default_rng(7)
    a, noise = spd_input(inst.operands[0].shape, rng)
    # the triangle the op does not read: noise (reading the wrong one gives a wrong result)
    a = np.where(np.tril(np.ones((5, 5), bool)) == lower, a, noise)
    plan, got, infos = run_cholesky(inst, a)
    assert plan.transpose_input == (in_l != out_l) and plan.nan_fill == (not custom)
    assert plan.uplo == ("L" if lower == (out_l == "{1,2,0}") else "U")
    ash = inst.operands[0].shape
    if custom:
        want = cusolver_cholesky(inst, [a.astype(ash.dtype)], None)
        _close(got, want[0], dt)
        assert infos == list(want[2].reshape(-1))
    else:
        _close(got, interpret_cholesky(inst, [a.astype(ash.dtype)], None), dt)


@pytest.mark.parametrize("custom", [False, True])
def test_cholesky_not_positive_definite(custom):
    inst = cholesky_module("f32", [4, 4, 4], True, "{2,1,0}", "{2,1,0}", custom).entry.root
    rng = np.random.default_rng(3)
    a, _ = spd_input(inst.operands[0].shape, rng, garbage=False)
    a[1] = -a[1]          # fails at the first pivot
    a[2, 2, 2] = -50.0    # fails at the third
    plan, got, infos = run_cholesky(inst, a)
    assert infos == [0, 1, 3, 0]
    if custom:
        want = cusolver_cholesky(inst, [a.astype(np.float32)], None)
        assert list(want[2]) == infos
        ok = [0, 3]
        _close(got[ok], want[0][ok], "f32")
    else:
        want = interpret_cholesky(inst, [a.astype(np.float32)], None)
        assert np.isnan(got[1]).all() and np.isnan(got[2]).all()
        _close(got, want, "f32")


def test_cholesky_unbatched_and_multi_batch():
    for dims, info in (([6, 6], "s32[]"), ([2, 3, 4, 4], "s32[2,3]{1,0}")):
        d = ",".join(map(str, dims))
        m = parse_hlo(f"""HloModule m
ENTRY e {{
  %a = f64[{d}] parameter(0)
  ROOT %c = (f64[{d}], f64[8]{{0}}, {info}) custom-call(%a), custom_call_target="__cusolver$cholesky", backend_config={{"lower":false}}
}}""")
        inst = m.entry.root
        a, _ = spd_input(inst.operands[0].shape, np.random.default_rng(1), garbage=False)
        plan, got, _ = run_cholesky(inst, a)
        assert plan.batch == int(np.prod(dims[:-2]))
        _close(got, cusolver_cholesky(inst, [a], None)[0], "f64")


def test_cholesky_other_layouts_stay_on_the_host():
    inst = cholesky_module("f32", [3, 5, 5], True, "{0,2,1}", "{2,1,0}", False).entry.root
    assert cholesky_plan(inst) is None
    m = parse_hlo("""HloModule m
ENTRY e {
  %a = s32[4,4] parameter(0)
  ROOT %c = s32[4,4] cholesky(%a), lower=true
}""")
    assert cholesky_plan(m.entry.root) is None


# ---- triangular-solve ------------------------------------------------------------------------
def trsm_module(dt, a_dims, b_dims, a_l, b_l, left, lower, unit, transpose, custom):
    d = lambda xs: ",".join(map(str, xs))  # noqa: E731
    if not custom:
        return parse_hlo(f"""HloModule m
ENTRY e {{
  %a = {dt}[{d(a_dims)}]{a_l} parameter(0)
  %b = {dt}[{d(b_dims)}]{b_l} parameter(1)
  ROOT %x = {dt}[{d(b_dims)}]{b_l} triangular-solve(%a, %b), left_side={str(left).lower()}, lower={str(lower).lower()}, unit_diagonal={str(unit).lower()}, transpose_a={transpose}
}}""")
    cfg = ('{"left_side":%s,"lower":%s,"unit_diagonal":%s,"transpose_a":"%s"}'
           % (str(left).lower(), str(lower).lower(), str(unit).lower(), transpose))
    return parse_hlo(f"""HloModule m
ENTRY e {{
  %a = {dt}[{d(a_dims)}]{a_l} parameter(0)
  %b = {dt}[{d(b_dims)}]{b_l} parameter(1)
  ROOT %x = ({dt}[{d(b_dims)}]{b_l}, s8[64]{{0}}) custom-call(%a, %b), custom_call_target="__cublas$triangularSolve", backend_config={cfg}
}}""")


def well_conditioned(shape, rng):
    n = shape.dims[-1]
    a = _rand(shape, rng)
    return a + (3 * n) * np.eye(n)


def run_trsm(inst, a, b):
    plan = trsm_plan(inst)
    if plan is None:
        return None, None
    ash, bsh = inst.operands[0].shape, inst.operands[1].shape
    wide = np.complex128 if ash.element_type[0] == "c" else np.float64
    fa = to_physical(ash, a.astype(ash.dtype)).reshape(-1).astype(wide)
    fb = to_physical(bsh, b.astype(bsh.dtype)).reshape(-1).astype(wide)
    x = trsm_model(plan, fa, fb)
    return plan, from_physical(bsh, x.astype(bsh.dtype))


@pytest.mark.parametrize("dt", ["f32", "c128"])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
@pytest.mark.parametrize("a_l, b_l", [("{2,1,0}", "{2,1,0}"), ("{1,2,0}", "{1,2,0}"),
                                      ("{1,2,0}", "{2,1,0}"), ("{2,1,0}", "{1,2,0}")])
def test_trsm_forms(dt, left, lower, transpose, a_l, b_l):
    b_dims = [2, 4, 3] if left else [2, 3, 4]
    unit = lower and transpose == "TRANSPOSE"
    for custom in (False, True):
        inst = trsm_module(dt, [2, 4, 4], b_dims, a_l, b_l, left, lower, unit, transpose,
                           custom).entry.root
        rng = np.random.default_rng(5)
        a = well_conditioned(inst.operands[0].shape, rng)
        b = _rand(inst.operands[1].shape, rng)
        plan, got = run_trsm(inst, a, b)
        mixed = a_l != b_l
        if plan is None:   # only a complex adjoint with mixed layouts has no cuBLAS op
            assert dt == "c128" and transpose == "ADJOINT" and mixed
            continue
        ash = inst.operands[0].shape
        args = [a.astype(ash.dtype), b.astype(ash.dtype)]
        want = cublas_triangular_solve(inst, args, None)[0] if custom else \
            triangular_solve(inst, args, None)
        _close(got, want, dt)
        assert plan.batch == 2 and plan.unit_diagonal == unit


def test_trsm_real_adjoint_mixed_layouts_is_a_transpose():
    inst = trsm_module("f64", [4, 4], [4, 2], "{0,1}", "{1,0}", True, True, False, "ADJOINT",
                       False).entry.root
    plan = trsm_plan(inst)
    assert plan is not None and plan.trans == "N" and plan.side == "R"


def test_trsm_output_layout_must_be_b_layout():
    m = parse_hlo("""HloModule m
ENTRY e {
  %a = f32[4,4]{1,0} parameter(0)
  %b = f32[4,3]{1,0} parameter(1)
  ROOT %x = f32[4,3]{0,1} triangular-solve(%a, %b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
}""")
    assert trsm_plan(m.entry.root) is None


def test_corpus_solvers():
    paths = [p for p in corpus_files()
             if any(k in p.read_text(errors="replace")
                    for k in ("cholesky(", "triangular-solve(", "__cusolver$cholesky",
                              "__cublas$triangularSolve"))]
    if not paths:
        pytest.skip(f"no corpus module with cholesky or triangular-solve under {CORPUS}")
    from hlo_opt.api import load
    rng = np.random.default_rng(0)
    checked = 0
    for p in paths:
        m = load(str(p))
        for comp in m.computations:
            for inst in comp.instructions:
                if cholesky_plan(inst) is not None:
                    a, _ = spd_input(inst.operands[0].shape, rng, garbage=False)
                    _, got, _ = run_cholesky(inst, a)
                    ash = inst.operands[0].shape
                    want = (cusolver_cholesky(inst, [a.astype(ash.dtype)], None)[0]
                            if inst.opcode == "custom-call"
                            else interpret_cholesky(inst, [a.astype(ash.dtype)], None))
                    _close(got, want, ash.element_type)
                    checked += 1
                elif trsm_plan(inst) is not None:
                    a = well_conditioned(inst.operands[0].shape, rng)
                    b = _rand(inst.operands[1].shape, rng)
                    _, got = run_trsm(inst, a, b)
                    ash = inst.operands[0].shape
                    args = [a.astype(ash.dtype), b.astype(ash.dtype)]
                    want = (cublas_triangular_solve(inst, args, None)[0]
                            if inst.opcode == "custom-call" else triangular_solve(inst, args, None))
                    _close(got, want, ash.element_type)
                    checked += 1
    print(f"{checked} corpus solver ops checked in {len(paths)} modules")


def test_nan_fill_helper_is_the_interpreters():
    f = np.ones((2, 2, 2))
    assert np.isnan(nan_fill_failed(f, np.array([0, 2]))[1]).all()
