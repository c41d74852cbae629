"""The interpreter's cuBLAS custom-calls (hlo_opt/backends/interpreter/ops_gemm.py) on
the forms the GPU passes emit: auxiliary outputs (GELU_AUX, BIAS_GELU_AUX), bias vectors
along the output's most minor physical dims (and shorter than a padded output), batch
dimensions on one side only (after gemm-broadcast-folding-rewriter), against numpy."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends import execute
from hlo_opt.errors import UnsupportedError


def _cfg(epilogue="DEFAULT", beta=0, lc=(1,), rc=(0,), lb=(), rb=(), alpha=1):
    return json.dumps({"gemm_backend_config": {
        "alpha_real": alpha, "alpha_imag": 0, "beta": beta, "epilogue": epilogue,
        "dot_dimension_numbers": {
            "lhs_contracting_dimensions": [str(d) for d in lc],
            "rhs_contracting_dimensions": [str(d) for d in rc],
            "lhs_batch_dimensions": [str(d) for d in lb],
            "rhs_batch_dimensions": [str(d) for d in rb]}}})


def _run(params, result, cfg, args, target="__cublas$lt$matmul"):
    lines = [f"  p{i} = {s} parameter({i})" for i, s in enumerate(params)]
    ops = ", ".join(f"p{i}" for i in range(len(params)))
    text = ("HloModule g\nENTRY e {\n" + "\n".join(lines) +
            f"\n  ROOT g = {result} custom-call({ops}), custom_call_target=\"{target}\", "
            f"backend_config={cfg}\n}}\n")
    out = execute(parse_hlo(text), args)
    return [np.asarray(x) for x in out] if isinstance(out, (list, tuple)) else [out]


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 6)).astype(np.float32)
B = RNG.standard_normal((6, 5)).astype(np.float32)
C = RNG.standard_normal((4, 5)).astype(np.float32)
V = RNG.standard_normal(5).astype(np.float32)


@pytest.mark.parametrize("bias", [False, True])
def test_gelu_aux_returns_the_pre_activation(bias):
    params = ["f32[4,6]", "f32[6,5]", "f32[4,5]"] + (["f32[5]"] if bias else [])
    args = [A, B, C] + ([V] if bias else [])
    epilogue = "BIAS_GELU_AUX" if bias else "GELU_AUX"
    out, aux, ws = _run(params, "(f32[4,5], f32[4,5], s8[64])", _cfg(epilogue, beta=1),
                        args)
    pre = A.astype(np.float64) @ B + C + (V[None, :] if bias else 0)
    np.testing.assert_allclose(aux, pre, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, _gelu(pre), rtol=1e-5, atol=1e-5)
    assert ws.dtype == np.int8 and ws.shape == (64,) and not ws.any()


def test_aux_epilogue_needs_a_tuple_result():
    with pytest.raises(UnsupportedError, match="GELU_AUX"):
        _run(["f32[4,6]", "f32[6,5]"], "f32[4,5]", _cfg("GELU_AUX"), [A, B])


def test_epilogues_xla_does_not_emit_on_cuda_are_named():
    with pytest.raises(UnsupportedError, match="SILU"):
        _run(["f32[4,6]", "f32[6,5]"], "(f32[4,5], s8[8])", _cfg("SILU"), [A, B])


def test_bias_runs_along_the_minor_physical_dim():
    # a column-major result: the vector runs along dim 0 (4 elements)
    v = RNG.standard_normal(4).astype(np.float32)
    (out, _) = _run(["f32[4,6]", "f32[6,5]", "f32[4]"], "(f32[4,5]{0,1}, s8[8])",
                    _cfg("BIAS"), [A, B, v])
    np.testing.assert_allclose(out, A.astype(np.float64) @ B + v[:, None], rtol=1e-5,
                               atol=1e-5)


def test_bias_shorter_than_a_padded_output():
    v = RNG.standard_normal(3).astype(np.float32)
    (out, _) = _run(["f32[4,6]", "f32[6,5]", "f32[3]"], "(f32[4,5], s8[8])", _cfg("BIAS_RELU"),
                    [A, B, v])
    want = A.astype(np.float64) @ B
    want[:, :3] += v
    np.testing.assert_allclose(out, np.maximum(want, 0), rtol=1e-5, atol=1e-5)


def test_bias_longer_than_the_output_is_refused():
    v = np.zeros(7, np.float32)
    with pytest.raises(UnsupportedError, match="larger than the output"):
        _run(["f32[4,6]", "f32[6,5]", "f32[7]"], "(f32[4,5], s8[8])", _cfg("BIAS"), [A, B, v])


@pytest.mark.parametrize("side", ["lhs", "rhs"])
def test_batch_dimensions_on_one_side(side):
    x = RNG.standard_normal((3, 4, 6)).astype(np.float32)
    if side == "rhs":  # lhs [4,6] for every batch of rhs [3,6,5]
        y = RNG.standard_normal((3, 6, 5)).astype(np.float32)
        (out, _) = _run(["f32[4,6]", "f32[3,6,5]"], "(f32[3,4,5], s8[8])",
                        _cfg(lc=(1,), rc=(1,), lb=(), rb=(0,)), [A, y],
                        target="__cublas$gemm")
        want = np.einsum("ik,bkj->bij", A.astype(np.float64), y)
    else:  # rhs [6,5] for every batch of lhs [3,4,6]
        (out, _) = _run(["f32[3,4,6]", "f32[6,5]"], "(f32[3,4,5], s8[8])",
                        _cfg(lc=(2,), rc=(0,), lb=(0,), rb=()), [x, B],
                        target="__cublas$gemm")
        want = np.einsum("bik,kj->bij", x.astype(np.float64), B)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
