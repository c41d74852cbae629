"""XLA's ``BufferComparator``: is a candidate's output close enough to the reference's?

Per element, after clamping f16 values to +-65505: both NaN, or equal infinities, match;
otherwise ``|a - b| / (max(|a|, |b|) + 1) < rtol`` (``xla_gpu_autotune_gemm_rtol``).
"""
from __future__ import annotations

import numpy as np

from hlo_opt.ir.types import numpy_dtype


def mismatches(shape, current: np.ndarray, expected: np.ndarray, rtol: float) -> int:
    """How many elements differ beyond ``rtol`` (0: the buffers compare equal)."""
    if shape.element_type == "pred":
        return int(np.count_nonzero(current != expected))
    a = np.asarray(current)
    b = np.asarray(expected)
    if np.iscomplexobj(a) or np.iscomplexobj(b):
        return (mismatches(shape, a.real, b.real, rtol)
                + mismatches(shape, a.imag, b.imag, rtol))
    differ = a != b                  # equal elements match; NaNs differ here
    if not differ.any():
        return 0
    a = a[differ].astype(np.float64)
    b = b[differ].astype(np.float64)
    if shape.element_type == "f16":
        a = np.where(np.isnan(a), a, np.clip(a, -65505, 65505))
        b = np.where(np.isnan(b), b, np.clip(b, -65505, 65505))
    with np.errstate(invalid="ignore", over="ignore"):
        both_nan = np.isnan(a) & np.isnan(b)
        same_inf = np.isinf(a) & np.isinf(b) & (a == b)
        rel = np.abs(a - b) / (np.maximum(np.abs(a), np.abs(b)) + 1)
        ok = (rel < rtol) | both_nan | same_inf
    return int(ok.size - np.count_nonzero(ok))


def mismatches_in_bytes(element_type: str, current: np.ndarray, expected: np.ndarray,
                        rtol: float) -> int:
    """:func:`mismatches` of two buffers' bytes (``uint8`` arrays) of ``element_type``:
    elementwise, so the layout does not matter."""
    from hlo_opt.ir.shape import Shape
    dtype = numpy_dtype(element_type)
    return mismatches(Shape.array(element_type, (current.size // dtype.itemsize,)),
                      current.view(dtype), expected.view(dtype), rtol)
