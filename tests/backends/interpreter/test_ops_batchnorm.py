"""batch-norm-*: statistics via np.var, the gradient by finite differences."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.heavy_helpers import run

TRAIN = """
HloModule b
ENTRY e {
  x = f32[2,3,4,5] parameter(0)
  s = f32[{c}] parameter(1)
  o = f32[{c}] parameter(2)
  ROOT t = (f32[2,3,4,5], f32[{c}], f32[{c}]) batch-norm-training(x, s, o), epsilon=0.001,
      feature_index={fi}
}
"""


@pytest.mark.parametrize("fi", [1, 3])
def test_batch_norm_training(fi):
    rng = np.random.default_rng(fi)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 3 + 1
    c = x.shape[fi]
    s = rng.standard_normal(c).astype(np.float32)
    o = rng.standard_normal(c).astype(np.float32)
    text = TRAIN.replace("{c}", str(c)).replace("{fi}", str(fi))
    out, mean, var = run(text, "t", [x, s, o])
    xm = np.moveaxis(x.astype(np.float64), fi, -1).reshape(-1, c)
    np.testing.assert_allclose(mean, xm.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, xm.var(axis=0), rtol=1e-5)   # biased variance
    norm = (xm - xm.mean(0)) / np.sqrt(xm.var(0) + 0.001) * s + o
    expected = np.moveaxis(norm.reshape(np.moveaxis(x, fi, -1).shape), -1, fi)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_batch_norm_inference():
    text = """
HloModule b
ENTRY e {
  x = f32[4,3] parameter(0)
  s = f32[4] parameter(1)
  o = f32[4] parameter(2)
  m = f32[4] parameter(3)
  v = f32[4] parameter(4)
  ROOT y = f32[4,3] batch-norm-inference(x, s, o, m, v), epsilon=0.5, feature_index=0
}
"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    s = np.array([1, 2, 3, 4], np.float32)
    o = np.array([0, 1, 0, -1], np.float32)
    m = np.array([1, 4, 7, 10], np.float32)
    v = np.array([3.5, 1.5, 0.5, 8], np.float32)
    out = run(text, "y", [x, s, o, m, v])
    for f in range(4):
        for j in range(3):
            want = (x[f, j] - m[f]) / np.sqrt(v[f] + 0.5) * s[f] + o[f]
            assert abs(out[f, j] - want) < 1e-5


GRAD = """
HloModule b
ENTRY e {
  x = f64[3,2,4] parameter(0)
  s = f64[2] parameter(1)
  m = f64[2] parameter(2)
  v = f64[2] parameter(3)
  dy = f64[3,2,4] parameter(4)
  ROOT t = (f64[3,2,4], f64[2], f64[2]) batch-norm-grad(x, s, m, v, dy), epsilon=0.01,
      feature_index=1
}
"""


def _train_forward(x, s, o, eps=0.01):
    axes = (0, 2)
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * s.reshape(1, -1, 1) + o.reshape(1, -1, 1)


def test_batch_norm_grad_matches_finite_differences():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 4))
    s = rng.standard_normal(2)
    o = rng.standard_normal(2)
    dy = rng.standard_normal((3, 2, 4))
    mean = x.mean(axis=(0, 2))
    var = x.var(axis=(0, 2))
    gx, gs, go = run(GRAD, "t", [x, s, mean, var, dy])

    def loss(x_, s_, o_):
        return float(np.sum(_train_forward(x_, s_, o_) * dy))

    h = 1e-6
    num_gx = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[idx] = h
        num_gx[idx] = (loss(x + d, s, o) - loss(x - d, s, o)) / (2 * h)
    num_gs = np.array([(loss(x, s + h * e, o) - loss(x, s - h * e, o)) / (2 * h)
                       for e in np.eye(2)])
    num_go = np.array([(loss(x, s, o + h * e) - loss(x, s, o - h * e)) / (2 * h)
                       for e in np.eye(2)])
    np.testing.assert_allclose(gx, num_gx, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gs, num_gs, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(go, num_go, rtol=1e-5, atol=1e-7)


def test_batch_norm_bf16_computes_in_f32():
    text = """
HloModule b
ENTRY e {
  x = bf16[2,8] parameter(0)
  s = bf16[8] parameter(1)
  o = bf16[8] parameter(2)
  m = bf16[8] parameter(3)
  v = bf16[8] parameter(4)
  ROOT y = bf16[2,8] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
}
"""
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    x = np.linspace(-2, 2, 16).reshape(2, 8).astype(bf)
    ones, zeros = np.ones(8, bf), np.zeros(8, bf)
    out = run(text, "y", [x, ones, zeros, zeros, ones])
    assert out.dtype == bf
    want = x.astype(np.float32) / np.sqrt(np.float32(1.001))
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=1e-2)
