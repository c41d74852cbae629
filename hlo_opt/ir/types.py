"""Primitive element types: XLA's spellings, bit widths and numpy dtypes."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - numpy loads lazily (printing never needs it)
    import numpy as np

# name -> bit width (XLA's PrimitiveType in text form).
BIT_WIDTH: dict[str, int] = {
    "pred": 8,
    "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8, "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4, "f6e2m3fn": 6,
    "f6e3m2fn": 6,
}
NON_ARRAY_TYPES = frozenset({"token", "opaque", "tuple"})
ELEMENT_TYPES = frozenset(BIT_WIDTH) | NON_ARRAY_TYPES

_NUMPY_NAMES = {
    "pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64", "c64": "complex64",
    "c128": "complex128",
}
_ML_DTYPES_NAMES = {
    "bf16": "bfloat16", "f8e5m2": "float8_e5m2", "f8e4m3": "float8_e4m3",
    "f8e4m3fn": "float8_e4m3fn", "f8e4m3b11fnuz": "float8_e4m3b11fnuz",
    "f8e5m2fnuz": "float8_e5m2fnuz", "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e3m4": "float8_e3m4", "f8e8m0fnu": "float8_e8m0fnu", "f4e2m1fn": "float4_e2m1fn",
    "f6e2m3fn": "float6_e2m3fn", "f6e3m2fn": "float6_e3m2fn",
    "s2": "int2", "s4": "int4", "u2": "uint2", "u4": "uint4",
}
_dtype_cache: dict[str, np.dtype] = {}


def numpy_dtype(element_type: str):
    """The numpy dtype that holds values of an XLA element type (ml_dtypes for bf16/f8)."""
    dt = _dtype_cache.get(element_type)
    if dt is not None:
        return dt
    import numpy as np
    if element_type in _NUMPY_NAMES:
        dt = np.dtype(_NUMPY_NAMES[element_type])
    elif element_type in _ML_DTYPES_NAMES:
        import ml_dtypes
        dt = np.dtype(getattr(ml_dtypes, _ML_DTYPES_NAMES[element_type]))
    elif element_type in ("s1", "u1"):
        dt = np.dtype("int8" if element_type == "s1" else "uint8")
    else:
        raise KeyError(f"element type {element_type} has no numpy dtype")
    _dtype_cache[element_type] = dt
    return dt


def element_type_of(dtype) -> str:
    """Inverse of numpy_dtype for the common types."""
    import numpy as np
    dt = np.dtype(dtype)
    for name in list(_NUMPY_NAMES) + list(_ML_DTYPES_NAMES):
        try:
            if numpy_dtype(name) == dt:
                return name
        except (KeyError, AttributeError):
            continue
    raise KeyError(f"no XLA element type for numpy dtype {dt}")


def is_float(t: str) -> bool:
    return t in ("f16", "bf16", "f32", "f64") or t.startswith(("f8", "f4", "f6"))


def is_complex(t: str) -> bool:
    return t in ("c64", "c128")


def is_signed_int(t: str) -> bool:
    return t[0] == "s" and t[1:].isdigit()


def is_unsigned_int(t: str) -> bool:
    return t[0] == "u" and t[1:].isdigit()


def is_integral(t: str) -> bool:
    return is_signed_int(t) or is_unsigned_int(t)
