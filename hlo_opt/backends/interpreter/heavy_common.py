"""What the heavy interpreter opcodes share.

* recognising called computations that are one binary op (``add``, ``maximum`` ...) so a
  handler can take a vectorised numpy path instead of calling the computation per element;
* calling a scalar computation through ``ctx.call`` and getting its leaves back;
* XLA's comparison directions, including the TOTALORDER order on floats
  (-NaN < -inf < ... < -0 < +0 < ... < inf < +NaN);
* window arithmetic (output size of a windowed op, base-dilate + pad an array).
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError

# Binary opcodes a combiner/reducer may consist of, with their numpy ufuncs.
UFUNCS = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


def unsupported(inst, what: str) -> UnsupportedError:
    return UnsupportedError(f"interpreter: {inst.opcode} %{inst.name}: {what}")


# ---- called computations ----------------------------------------------------------------
def _param_number(inst) -> int | None:
    return inst.parameter_number if inst.opcode == "parameter" else None


def binary_combiners(comp, n: int) -> list[str] | None:
    """Per-output op names when ``comp(acc_0..acc_{n-1}, x_0..x_{n-1})`` computes, for every
    i, ``op(acc_i, x_i)`` with a commutative op in UFUNCS, or just ``x_i`` ("assign").

    Returns None when the computation is anything else (the caller then calls it per
    element)."""
    if comp is None or len(comp.parameters) != 2 * n:
        return None
    if any(p is None or not p.shape.is_scalar() for p in comp.parameters):
        return None
    root = comp.root
    outs = list(root.operands) if root.opcode == "tuple" else [root]
    if len(outs) != n or (n > 1 and root.opcode != "tuple"):
        return None
    names = []
    for i, out in enumerate(outs):
        if _param_number(out) == n + i:
            names.append("assign")
            continue
        if out.opcode not in UFUNCS or len(out.operands) != 2:
            return None
        pair = {_param_number(out.operands[0]), _param_number(out.operands[1])}
        if pair != {i, n + i}:
            return None
        names.append(out.opcode)
    return names


def single_binary_op(comp) -> str | None:
    """``add``/``maximum``/... when ``comp(a, b)`` is that one commutative op, else None."""
    names = binary_combiners(comp, 1)
    if names is None or names[0] == "assign":
        return None
    return names[0]


def identity_value(op: str, dtype: np.dtype):
    """The neutral element of ``op`` in ``dtype`` (used to fill padding in fast paths)."""
    dtype = np.dtype(dtype)
    if op in ("add", "or", "xor"):
        return np.zeros((), dtype)[()]
    if op == "multiply":
        return np.ones((), dtype)[()]
    if op == "and":
        return np.array(True if dtype == np.bool_ else -1).astype(dtype)[()]
    big = _extreme(dtype, high=True)
    small = _extreme(dtype, high=False)
    if op == "maximum":
        return small
    if op == "minimum":
        return big
    raise KeyError(op)


def _extreme(dtype: np.dtype, high: bool):
    if dtype == np.bool_:
        return np.bool_(high)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return dtype.type(info.max if high else info.min)
    value = np.array(np.inf if high else -np.inf).astype(dtype)[()]
    if np.isnan(np.float64(value)):  # f8 types without infinities: their largest finite
        import ml_dtypes
        info = ml_dtypes.finfo(dtype)
        value = info.max if high else info.min
    return value


def call_leaves(ctx, comp, values) -> tuple:
    """Run ``comp`` on scalar ``values``; its result leaves as 0-d arrays."""
    out = ctx.call(comp, [np.asarray(v) for v in values])
    if isinstance(out, (tuple, list)):
        return tuple(np.asarray(o) for o in out)
    return (np.asarray(out),)


def batched_call(ctx, comp, values) -> tuple | None:
    """Run scalar computation ``comp`` elementwise on same-shaped arrays in one go
    (``ctx.call_batched``); its result leaves broadcast to the arrays' shape, or None when
    the context cannot batch ``comp`` (the caller then calls it per element)."""
    fn = getattr(ctx, "call_batched", None)
    if fn is None:
        return None
    arrays = [np.asarray(v) for v in values]
    out = fn(comp, arrays)
    if out is None:
        return None
    shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
    leaves = out if isinstance(out, (tuple, list)) else (out,)
    return tuple(np.broadcast_to(np.asarray(o), shape) for o in leaves)


def compare_root(comp):
    """(lhs param, rhs param, direction, total_order) when ``comp`` is one compare of two
    parameters, else None."""
    root = comp.root
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    a, b = (_param_number(o) for o in root.operands)
    if a is None or b is None:
        return None
    direction = root.comparison_direction
    total = root.attrs.get("type") == "TOTALORDER"
    return a, b, direction, total


# ---- comparisons ------------------------------------------------------------------------
def is_float_dtype(dtype) -> bool:
    """True for numpy and ml_dtypes (bf16, f8 ...) floating types."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return True
    if dtype.kind != "V":
        return False
    import ml_dtypes
    try:
        ml_dtypes.finfo(dtype)
    except (ValueError, TypeError):
        return False
    return True


def total_order_key(a: np.ndarray) -> np.ndarray:
    """An unsigned-integer key whose natural order is XLA's total order on ``a``'s values
    (floats: -NaN < -inf < ... < -0 < +0 < ... < inf < +NaN); ints and preds as is."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a.astype(np.uint8)
    if np.issubdtype(a.dtype, np.integer):
        return a
    if np.issubdtype(a.dtype, np.complexfloating):
        raise TypeError("no total order on complex values")
    width = a.dtype.itemsize * 8
    udt = np.dtype(f"uint{width}")
    bits = np.ascontiguousarray(a).view(udt)
    sign = udt.type(1 << (width - 1))
    negative = (bits & sign) != 0
    return np.where(negative, ~bits, bits | sign).astype(udt)


_NUMPY_COMPARE = {"LT": np.less, "LE": np.less_equal, "GT": np.greater,
                  "GE": np.greater_equal, "EQ": np.equal, "NE": np.not_equal}


def compare(a, b, direction: str, total_order: bool = False) -> np.ndarray:
    """XLA ``compare`` on arrays (numpy semantics for NaN unless ``total_order``)."""
    fn = _NUMPY_COMPARE[direction]
    a, b = np.asarray(a), np.asarray(b)
    if total_order and is_float_dtype(a.dtype):
        return fn(total_order_key(a), total_order_key(b))
    return fn(a, b)


# ---- windows ----------------------------------------------------------------------------
def window_output_size(in_size: int, size: int, stride: int, lo: int, hi: int,
                       base_dilation: int = 1, window_dilation: int = 1) -> int:
    padded = (in_size - 1) * base_dilation + 1 + lo + hi if in_size > 0 else lo + hi
    effective = (size - 1) * window_dilation + 1
    if padded < effective or stride <= 0:
        return 0
    return (padded - effective) // stride + 1


def dilate_and_pad(x: np.ndarray, axes, base_dilations, paddings, fill) -> np.ndarray:
    """``x`` with (d-1) ``fill`` values between neighbours along each axis, then padded
    (low, high; negative values crop) with ``fill``."""
    for axis, d, (lo, hi) in zip(axes, base_dilations, paddings):
        n = x.shape[axis]
        if d > 1 and n > 1:
            shape = list(x.shape)
            shape[axis] = (n - 1) * d + 1
            out = np.full(shape, fill, dtype=x.dtype)
            idx = [slice(None)] * x.ndim
            idx[axis] = slice(None, None, d)
            out[tuple(idx)] = x
            x = out
        if lo > 0 or hi > 0:
            widths = [(0, 0)] * x.ndim
            widths[axis] = (max(lo, 0), max(hi, 0))
            x = np.pad(x, widths, mode="constant", constant_values=fill)
        if lo < 0 or hi < 0:
            idx = [slice(None)] * x.ndim
            stop = x.shape[axis] - max(-hi, 0)
            idx[axis] = slice(max(-lo, 0), max(stop, max(-lo, 0)))
            x = x[tuple(idx)]
    return x


def as_result(value, shape) -> np.ndarray:
    """``value`` as an array of exactly ``shape``'s dtype and dims."""
    arr = np.asarray(value)
    dtype = shape.dtype
    if arr.dtype != dtype:
        arr = arr.astype(dtype)
    if arr.shape != tuple(shape.dims):
        arr = arr.reshape(shape.dims)
    return arr


def cast_float_result(value, dtype) -> np.ndarray:
    """Cast a computed value to ``dtype``, clamping integers to the type's range (what the
    XLA evaluator does for integral convolution/dot accumulators)."""
    dtype = np.dtype(dtype)
    value = np.asarray(value)
    if np.issubdtype(dtype, np.integer) and not np.issubdtype(value.dtype, np.integer):
        value = np.nan_to_num(value)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        value = np.clip(value, info.min, info.max)
    return value.astype(dtype)


def compute_dtype(dtype) -> np.dtype:
    """The numpy dtype to accumulate ``dtype`` values in: f32 for f16/bf16/f8, f64 for f64,
    complex as is, int64 for integers (clamped on the way out)."""
    dtype = np.dtype(dtype)
    if dtype == np.float64 or dtype == np.complex128 or dtype == np.complex64:
        return dtype
    if dtype == np.bool_ or np.issubdtype(dtype, np.integer):
        return np.dtype(np.int64) if dtype != np.uint64 else np.dtype(np.uint64)
    return np.dtype(np.float32)
