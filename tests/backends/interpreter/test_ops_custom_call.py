"""custom-call targets: cuBLAS gemm epilogues and the three cuDNN convolutions."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hlo_opt.errors import UnsupportedError

from tests.support.heavy_helpers import run
from .test_ops_convolution import _labels, _w, _window_text, ref_conv


def _gemm_config(epilogue="DEFAULT", alpha=1.0, beta=0.0, lc=(1,), rc=(0,), lb=(), rb=()):
    return {"gemm_backend_config": {
        "alpha_real": alpha, "alpha_imag": 0, "beta": beta, "epilogue": epilogue,
        "dot_dimension_numbers": {
            "lhs_contracting_dimensions": [str(d) for d in lc],
            "rhs_contracting_dimensions": [str(d) for d in rc],
            "lhs_batch_dimensions": [str(d) for d in lb],
            "rhs_batch_dimensions": [str(d) for d in rb]},
        "precision_config": {"operand_precision": ["DEFAULT", "DEFAULT"]}}}


def _quoted(cfg):
    return '"' + json.dumps(cfg).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _gemm_text(out_shape, operand_shapes, cfg, quoted=True, tuple_result=True):
    params = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(operand_shapes))
    ops = ", ".join(f"p{i}" for i in range(len(operand_shapes)))
    result = f"({out_shape}, s8[1024])" if tuple_result else out_shape
    bc = _quoted(cfg) if quoted else json.dumps(cfg)
    return f"""
HloModule g
ENTRY e {{
{params}
  ROOT g = {result} custom-call({ops}), custom_call_target="__cublas$gemm",
      backend_config={bc}
}}
"""


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("epilogue", ["DEFAULT", "BIAS", "RELU", "BIAS_RELU", "GELU",
                                      "BIAS_GELU"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_cublas_gemm_epilogues(epilogue, beta):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    c = rng.standard_normal((4, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    shapes, args = ["f32[4,6]", "f32[6,5]"], [a, b]
    if beta:
        shapes.append("f32[4,5]")
        args.append(c)
    if "BIAS" in epilogue:
        shapes.append("f32[5]")
        args.append(bias)
    cfg = _gemm_config(epilogue, alpha=2.0, beta=beta)
    out, workspace = run(_gemm_text("f32[4,5]", shapes, cfg), "g", args)
    want = 2.0 * (a.astype(np.float64) @ b) + beta * c
    if "BIAS" in epilogue:
        want = want + bias[None, :]
    if "RELU" in epilogue:
        want = np.maximum(want, 0)
    if "GELU" in epilogue:
        want = _gelu(want)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert workspace.dtype == np.int8 and workspace.shape == (1024,)


def test_cublas_gemm_batched_transposed_operands_unquoted_config():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 7, 2)).astype(np.float32)    # batch, k, m
    b = rng.standard_normal((3, 4, 7)).astype(np.float32)    # batch, n, k
    cfg = _gemm_config(lc=(1,), rc=(2,), lb=(0,), rb=(0,))
    out = run(_gemm_text("f32[3,2,4]", ["f32[3,7,2]", "f32[3,4,7]"], cfg, quoted=False,
                         tuple_result=False), "g", [a, b])
    want = np.einsum("bkm,bnk->bmn", a.astype(np.float64), b)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_cublas_gemm_f16_and_operand_count_check():
    a = np.ones((2, 3), np.float16)
    b = np.full((3, 2), 0.5, np.float16)
    out = run(_gemm_text("f16[2,2]", ["f16[2,3]", "f16[3,2]"], _gemm_config()), "g", [a, b])
    assert out[0].dtype == np.float16 and np.all(out[0] == 1.5)
    with pytest.raises(UnsupportedError, match="need 3"):
        run(_gemm_text("f16[2,2]", ["f16[2,3]", "f16[3,2]"], _gemm_config(beta=1.0)), "g",
            [a, b])


def test_unknown_custom_call_target_is_named():
    text = """
HloModule u
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = f32[2] custom-call(p), custom_call_target="my_custom_call1"
}
"""
    with pytest.raises(UnsupportedError, match='"my_custom_call1"'):
        run(text, "c", [np.zeros(2, np.float32)])


# ---- cuDNN ------------------------------------------------------------------------------
CONV_CASES = [
    ("bf01_oi01->bf01", (2, 4, 7, 6), (6, 2, 3, 2),
     [_w(3, stride=2, lo=1, hi=1), _w(2, stride=1, lo=0, hi=1, rhs_d=2)], 2),
    ("b01f_01io->b01f", (1, 3, 9, 8), (2, 3, 3, 3),
     [_w(3, stride=3, lo=2, hi=-1), _w(3, stride=2, lo=1, hi=1, rhs_d=2)], 1),
]


def _to_labels(arr, part, kernel):
    chars = ("o", "i") if kernel else ("b", "f")
    order = [part.index(chars[0]), part.index(chars[1])] + \
        [part.index(str(i)) for i in range(len(part) - 2)]
    perm = [0] * len(order)
    for axis, dim in enumerate(order):
        perm[dim] = axis
    return np.transpose(arr, perm)


def _cudnn_text(target, out_shape, a_shape, b_shape, windows, labels, fgc):
    def st(s):
        return "f32[" + ",".join(map(str, s)) + "]"
    return f"""
HloModule c
ENTRY e {{
  a = {st(a_shape)} parameter(0)
  b = {st(b_shape)} parameter(1)
  ROOT c = ({st(out_shape)}, u8[0]) custom-call(a, b), custom_call_target="{target}",
      window={_window_text(windows)}, dim_labels={labels}, feature_group_count={fgc}
}}
"""


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_cudnn_convolutions_forward_and_adjoints(case):
    labels, xs, ws, windows, fgc = CONV_CASES[case]
    lhs_l, rest = labels.split("_")
    rhs_l = rest.split("->")[0]
    rng = np.random.default_rng(case)
    x = _to_labels(rng.standard_normal(xs), lhs_l, False).astype(np.float32)
    w = _to_labels(rng.standard_normal(ws), rhs_l, True).astype(np.float32)
    dn = _labels(labels)
    y = ref_conv(x, w, dn, windows, fgc)
    fwd, scratch = run(_cudnn_text("__cudnn$convForward", y.shape, x.shape, w.shape, windows,
                                   labels, fgc), "c", [x, w])
    assert scratch.shape == (0,) and scratch.dtype == np.uint8
    np.testing.assert_allclose(fwd, y, rtol=1e-4, atol=1e-4)

    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx, _ = run(_cudnn_text("__cudnn$convBackwardInput", x.shape, dy.shape, w.shape, windows,
                            labels, fgc), "c", [dy, w])
    dw, _ = run(_cudnn_text("__cudnn$convBackwardFilter", w.shape, x.shape, dy.shape,
                            windows, labels, fgc), "c", [x, dy])
    # conv is linear in x and in w: the gradients are the adjoints, for any probe
    for _ in range(3):
        px = rng.standard_normal(x.shape)
        pw = rng.standard_normal(w.shape)
        np.testing.assert_allclose(np.sum(ref_conv(px, w, dn, windows, fgc) * dy),
                                   np.sum(px * dx), rtol=1e-4)
        np.testing.assert_allclose(np.sum(ref_conv(x, pw, dn, windows, fgc) * dy),
                                   np.sum(pw * dw), rtol=1e-4)


def test_cudnn_backward_input_equals_the_gradient_by_basis_vectors():
    labels = "bf0_oi0->bf0"
    windows = [_w(3, stride=2, lo=1, hi=2, rhs_d=1)]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3)).astype(np.float32)
    dn = _labels(labels)
    y = ref_conv(x, w, dn, windows)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx, _ = run(_cudnn_text("__cudnn$convBackwardInput", x.shape, dy.shape, w.shape, windows,
                            labels, 1), "c", [dy, w])
    want = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[idx] = 1
        want[idx] = np.sum(ref_conv(e, w, dn, windows) * dy)
    np.testing.assert_allclose(dx, want, rtol=1e-5, atol=1e-5)


def test_cublas_gemm_older_unwrapped_backend_config():
    # XLA dumps before the gemm_backend_config wrapper (e.g. service/gpu/tests/prefetch.hlo)
    cfg = _gemm_config(alpha=0.5)["gemm_backend_config"]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 4), np.float32)
    out = run(_gemm_text("f32[2,4]", ["f32[2,3]", "f32[3,4]"], cfg, tuple_result=False), "g",
              [a, b])
    np.testing.assert_allclose(out, 0.5 * (a @ b))
