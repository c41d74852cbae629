"""fft against DFTs written as explicit sums (no np.fft in the expectations)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.heavy_helpers import run


def dft_matrix(n, inverse=False):
    k = np.arange(n)
    sign = 1 if inverse else -1
    m = np.exp(sign * 2j * np.pi * np.outer(k, k) / n)
    return m / n if inverse else m


def dft_last_dims(x, rank, inverse=False):
    """Apply the DFT matrix along each of the last ``rank`` axes."""
    out = x.astype(np.complex128)
    for axis in range(x.ndim - rank, x.ndim):
        m = dft_matrix(x.shape[axis], inverse)
        out = np.moveaxis(np.tensordot(out, m, axes=([axis], [1])), -1, axis)
    return out


def _text(in_shape, out_shape, fft_type, lengths):
    return f"""
HloModule f
ENTRY e {{
  x = {in_shape} parameter(0)
  ROOT f = {out_shape} fft(x), fft_type={fft_type}, fft_length={{{','.join(map(str, lengths))}}}
}}
"""


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_fft_and_ifft(rank):
    rng = np.random.default_rng(rank)
    shape = (2, 3, 4, 5)[-(rank + 1):]
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    dims = ",".join(map(str, shape))
    lengths = shape[-rank:]
    out = run(_text(f"c64[{dims}]", f"c64[{dims}]", "FFT", lengths), "f", [x])
    np.testing.assert_allclose(out, dft_last_dims(x, rank), rtol=1e-5, atol=1e-5)
    inv = run(_text(f"c64[{dims}]", f"c64[{dims}]", "IFFT", lengths), "f", [x])
    np.testing.assert_allclose(inv, dft_last_dims(x, rank, inverse=True), rtol=1e-5,
                               atol=1e-6)


def test_rfft_and_irfft_roundtrip():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 4, 6)).astype(np.float32)
    spec = run(_text("f32[3,4,6]", "c64[3,4,4]", "RFFT", (4, 6)), "f", [x])
    full = dft_last_dims(x, 2)
    np.testing.assert_allclose(spec, full[..., :4], rtol=1e-5, atol=1e-5)
    back = run(_text("c64[3,4,4]", "f32[3,4,6]", "IRFFT", (4, 6)), "f", [spec])
    np.testing.assert_allclose(back, x, rtol=1e-5, atol=1e-5)


def test_irfft_odd_length_and_f64():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 7))
    spec = run(_text("f64[2,7]", "c128[2,4]", "RFFT", (7,)), "f", [x])
    np.testing.assert_allclose(spec, dft_last_dims(x, 1)[:, :4], rtol=1e-12, atol=1e-12)
    back = run(_text("c128[2,4]", "f64[2,7]", "IRFFT", (7,)), "f", [spec])
    assert back.dtype == np.float64
    np.testing.assert_allclose(back, x, rtol=1e-12, atol=1e-12)
