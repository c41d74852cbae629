"""Runtime values of the interpreter and the dtype rules shared by the handlers.

A value is a numpy array (or numpy scalar for rank 0) whose dtype is exactly
``shape.dtype`` (ml_dtypes for bf16 / f8 / s4 ...), a Python tuple of values for a tuple
shape, or :data:`TOKEN`.

Arithmetic follows XLA's HloEvaluator: floats narrower than f32 (bf16, f16, f8, f4, f6)
are computed in f32 and rounded back (``compute_dtype``); integers narrower than a byte are
computed in int8/uint8 and wrapped back to their width (``wrap``).
"""
from __future__ import annotations

import numpy as np

from ...ir.shape import Shape
from ...ir.types import BIT_WIDTH, is_complex, is_float, is_signed_int, numpy_dtype


class _Token:
    """The value of a token-shaped instruction (after-all, send/recv tokens)."""

    __slots__ = ()

    def __repr__(self):
        return "TOKEN"


TOKEN = _Token()

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

SUB_BYTE_INTS = frozenset({"s1", "s2", "s4", "u1", "u2", "u4"})
_LOW_PRECISION = {}


def is_low_precision_float(et: str) -> bool:
    """bf16, f16 and the f8/f6/f4 families: computed in f32 like XLA's evaluator."""
    r = _LOW_PRECISION.get(et)
    if r is None:
        r = _LOW_PRECISION[et] = is_float(et) and et not in ("f32", "f64")
    return r


def compute_dtype(et: str) -> np.dtype:
    """The numpy dtype arithmetic on element type ``et`` is done in."""
    if is_low_precision_float(et):
        return F32
    if et in SUB_BYTE_INTS:
        return np.dtype(np.int8 if et[0] == "s" else np.uint8)
    return numpy_dtype(et)


def wrap(arr, et: str):
    """Two's-complement wrap of an int8/uint8 compute result to a sub-byte width, as the
    storage dtype of ``et``."""
    w = BIT_WIDTH[et]
    a = np.asarray(arr)
    if et[0] == "s":
        a = a.astype(np.int8)
        shift = np.int8(8 - w)
        a = np.right_shift(np.left_shift(a, shift), shift)
    else:
        a = np.bitwise_and(a.astype(np.uint8), np.uint8((1 << w) - 1))
    return a.astype(numpy_dtype(et))


def to_compute(x, et: str):
    dt = compute_dtype(et)
    return x if x.dtype == dt else x.astype(dt)


def from_compute(x, et: str):
    """Round/wrap a compute-dtype result back to the storage dtype of ``et``."""
    if et in SUB_BYTE_INTS:
        return wrap(x, et)
    dt = numpy_dtype(et)
    return x if x.dtype == dt else x.astype(dt)


def int_bounds(et: str) -> tuple[int, int]:
    w = BIT_WIDTH[et]
    if et == "pred":
        return 0, 1
    if is_signed_int(et):
        return -(1 << (w - 1)), (1 << (w - 1)) - 1
    return 0, (1 << w) - 1


def unsigned_dtype(bits: int) -> np.dtype:
    return np.dtype({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits])


def signed_dtype(bits: int) -> np.dtype:
    return np.dtype({8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[bits])


# ---- raw bit patterns -------------------------------------------------------------------
def to_bits(x, et: str) -> np.ndarray:
    """The raw bit patterns of an array of element type ``et`` as uint64 (low bits)."""
    x = np.asarray(x)
    w = BIT_WIDTH[et]
    if et == "pred":
        return x.astype(np.uint64)
    if w >= 8 and w % 8 == 0 and x.dtype.itemsize * 8 == w:
        return x.view(unsigned_dtype(w)).astype(np.uint64)
    # sub-byte types live one per byte in ml_dtypes storage, value bits in the low bits
    return (x.view(np.uint8) & np.uint8((1 << w) - 1)).astype(np.uint64)


def from_bits(bits, et: str) -> np.ndarray:
    """Inverse of :func:`to_bits`: uint64 patterns (low ``width`` bits used) -> values."""
    bits = np.asarray(bits, dtype=np.uint64)
    w = BIT_WIDTH[et]
    mask = np.uint64((1 << w) - 1) if w < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    b = bits & mask
    if et == "pred":
        return b != 0
    dt = numpy_dtype(et)
    if w % 8 == 0 and dt.itemsize * 8 == w:
        return b.astype(unsigned_dtype(w)).view(dt)
    return b.astype(np.uint8).view(dt)


# ---- values and shapes ------------------------------------------------------------------
def leaves(value) -> list:
    """Array/token leaves of a (nested) tuple value, in order."""
    if isinstance(value, tuple):
        out = []
        for v in value:
            out.extend(leaves(v))
        return out
    return [value]


def zeros_for(shape: Shape):
    """A zero value of ``shape`` (tuples recursively, TOKEN for tokens)."""
    if shape.is_tuple():
        return tuple(zeros_for(s) for s in shape.tuple_shapes)
    if not shape.is_array():
        return TOKEN
    return np.zeros(shape.dims, dtype=shape.dtype)


def describe(value) -> str:
    """Short text of a value's shape for error messages: ``f32[2,3]`` / ``(s32[], f32[4])``."""
    if isinstance(value, tuple):
        return "(" + ", ".join(describe(v) for v in value) + ")"
    if value is TOKEN:
        return "token[]"
    dt = getattr(value, "dtype", None)
    if dt is None:
        return type(value).__name__
    try:
        from ...ir.types import element_type_of
        et = element_type_of(dt)
    except KeyError:
        et = str(dt)
    return f"{et}[{','.join(map(str, np.shape(value)))}]"


def shape_mismatch(value, shape: Shape) -> str | None:
    """Why ``value`` is not a value of ``shape`` (None when it is)."""
    if shape.is_tuple():
        if not isinstance(value, tuple) or len(value) != len(shape.tuple_shapes):
            return f"expected a tuple {shape.to_text(False)}, got {describe(value)}"
        for v, s in zip(value, shape.tuple_shapes):
            why = shape_mismatch(v, s)
            if why:
                return why
        return None
    if not shape.is_array():
        return None if value is TOKEN else f"expected a token, got {describe(value)}"
    dt = getattr(value, "dtype", None)
    if dt is None or not isinstance(value, (np.ndarray, np.generic)):
        return f"expected {shape.to_text(False)}, got {describe(value)}"
    if dt != shape.dtype or tuple(np.shape(value)) != shape.dims:
        return f"expected {shape.to_text(False)}, got {describe(value)}"
    return None


def scalar_int(x) -> int:
    """A Python int from a rank-0 integer value (any signedness)."""
    return int(np.asarray(x).reshape(()).item()) if not isinstance(x, int) else x


def is_float_type(et: str) -> bool:
    return is_float(et)


def is_complex_type(et: str) -> bool:
    return is_complex(et)
