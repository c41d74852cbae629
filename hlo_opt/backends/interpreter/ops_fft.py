"""fft: FFT / IFFT / RFFT / IRFFT over the last ``len(fft_length)`` dimensions.

XLA semantics (docs/operation_semantics.md, HloEvaluator::HandleFft):
* FFT: complex -> complex forward transform; IFFT: inverse, scaled by 1/N;
* RFFT: real -> complex, the last dim shrinks to ``fft_length[-1] // 2 + 1``;
* IRFFT: complex -> real of length ``fft_length`` (the input's last dim is
  ``fft_length[-1] // 2 + 1``; the imaginary parts the transform cannot represent are
  ignored, as a Hermitian inverse does).
Computed in double precision and rounded to the result type (c64 / f32 results therefore
agree with XLA:CPU's single-precision transform to about 1e-6 relative).
"""
from __future__ import annotations

import numpy as np

from .heavy_common import as_result, unsupported
from .registry import register


@register("fft")
def fft(inst, args, ctx):
    x = np.asarray(args[0])
    fft_type = inst.attrs.get("fft_type", "FFT").strip().upper()
    lengths = [int(v) for v in inst.attr("fft_length", ())]
    rank = len(lengths)
    if rank == 0 or rank > x.ndim:
        raise unsupported(inst, f"fft_length={lengths} for an operand of rank {x.ndim}")
    axes = tuple(range(x.ndim - rank, x.ndim))
    if fft_type == "FFT":
        out = np.fft.fftn(x.astype(np.complex128), s=lengths, axes=axes)
    elif fft_type == "IFFT":
        out = np.fft.ifftn(x.astype(np.complex128), s=lengths, axes=axes)
    elif fft_type == "RFFT":
        out = np.fft.rfftn(x.astype(np.float64), s=lengths, axes=axes)
    elif fft_type == "IRFFT":
        out = np.fft.irfftn(x.astype(np.complex128), s=lengths, axes=axes)
    else:
        raise unsupported(inst, f"unknown fft_type {fft_type}")
    return as_result(out, inst.shape)
