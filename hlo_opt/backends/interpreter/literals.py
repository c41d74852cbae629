"""Arguments and results at the edges of a run: random inputs, npz inputs and outputs,
and the error-bound comparison of two runs (XLA's run_hlo_module conventions).

npz convention: inputs ``arg0..argN-1`` are the ENTRY parameters by number; outputs
``out0..outK-1`` are the leaves of the result in order (a non-tuple result is ``out0``).
bf16 / f8 / f4 / f6 values may come in as their ml_dtypes arrays, as any float array
(rounded to nearest even) or as unsigned bit patterns of the same width; they go out as
the exact float32 upcast, or as bit patterns with ``raw_bits``.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass

import numpy as np

from ...errors import HloError
from ...ir.shape import Shape
from ...ir.types import BIT_WIDTH, is_complex, is_float, is_signed_int
from .values import (SUB_BYTE_INTS, TOKEN, from_bits, int_bounds, is_low_precision_float,
                     to_bits)


# ---- random inputs ----------------------------------------------------------------------
def random_value(shape: Shape, rng: np.random.Generator):
    """A random value of ``shape``: floats uniform in [-1, 1), signed integers in
    [-10, 10], unsigned in [0, 20] (clamped to the type's range), random preds.  Index
    operands need no care: XLA clamps dynamic-slice and gather starts."""
    if shape.is_tuple():
        return tuple(random_value(s, rng) for s in shape.tuple_shapes)
    if not shape.is_array():
        return TOKEN
    et, dims, dt = shape.element_type, shape.dims, shape.dtype
    if et == "pred":
        return rng.integers(0, 2, size=dims).astype(bool)
    if is_complex(et):
        v = rng.uniform(-1, 1, size=dims) + 1j * rng.uniform(-1, 1, size=dims)
        return v.astype(dt)
    if is_float(et):
        return rng.uniform(-1, 1, size=dims).astype(dt)
    lo, hi = int_bounds(et)
    lo, hi = max(lo, -10), min(hi, 20 if lo == 0 else 10)
    v = rng.integers(lo, hi + 1, size=dims, dtype=np.int64)
    if et in SUB_BYTE_INTS:
        return v.astype(np.int8 if is_signed_int(et) else np.uint8).astype(dt)
    return v.astype(dt)


def random_arguments(module, seed: int = 42) -> list:
    rng = np.random.default_rng(seed)
    return [random_value(p.shape, rng) for p in module.entry.parameters]


# ---- npz inputs -------------------------------------------------------------------------
def load_npz(path: str) -> dict[str, np.ndarray]:
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise HloError(f"{path}: error: a .npy array, not an .npz archive (save the "
                           "inputs with numpy.savez(path, arg0=..., arg1=...))")
        with data:
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise HloError(f"{path}: error: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise HloError(f"{path}: error: not a readable .npz file ({e})") from None


def arguments_from_npz(module, arrays: dict[str, np.ndarray], source: str = "inputs") -> list:
    """The entry arguments from ``arg0..argN-1`` (converted per :func:`coerce_input`)."""
    params = module.entry.parameters
    names = sorted((k for k in arrays if k.startswith("arg") and k[3:].isdigit()),
                   key=lambda k: int(k[3:]))
    expected = [f"arg{i}" for i in range(len(params))]
    if names != expected:
        missing = [n for n in expected if n not in arrays]
        extra = [n for n in names if n not in expected]
        detail = []
        if missing:
            detail.append("missing " + ", ".join(missing))
        if extra:
            detail.append("unexpected " + ", ".join(extra))
        raise HloError(f"{source}: the entry computation takes {len(params)} parameter(s) "
                       f"(arg0..arg{len(params) - 1}); {'; '.join(detail)}")
    return [coerce_input(arrays[f"arg{i}"], p.shape, f"{source}: arg{i} (parameter %{p.name})")
            for i, p in enumerate(params)]


def coerce_input(value, shape: Shape, what: str = "input"):
    """``value`` as a value of ``shape``, or an HloError saying why it cannot be."""
    if shape.is_tuple():
        raise HloError(f"{what}: the parameter is a tuple {shape.to_text(False)}; npz inputs "
                       "can only feed array parameters")
    if not shape.is_array():
        return TOKEN
    a = np.asarray(value)
    if a.shape != shape.dims:
        raise HloError(f"{what}: shape {list(a.shape)} does not match the parameter "
                       f"{shape.to_text(False)}")
    et, dt = shape.element_type, shape.dtype
    if a.dtype == dt:
        return a
    kind = a.dtype.kind
    if kind == "V" and a.dtype.names is None and not _is_ml_float(a.dtype) \
            and a.dtype.itemsize == dt.itemsize:
        return a.view(dt)  # an ml_dtypes array saved to .npz comes back as raw bytes
    if is_float(et):
        storage = 8 * dt.itemsize
        if kind == "u" and et not in ("f32", "f64") and a.dtype.itemsize * 8 == storage:
            return from_bits(a.astype(np.uint64), et).reshape(shape.dims)  # bit patterns
        if kind in "iu":
            return a.astype(np.float64).astype(dt)
        if kind == "f" or _is_ml_float(a.dtype):
            return a.astype(dt)
    elif is_complex(et):
        if kind in "cfiu":
            return a.astype(dt)
    elif et == "pred":
        if kind in "iu" and np.all((a == 0) | (a == 1)):
            return a.astype(bool)
    elif kind in "iub":
        lo, hi = int_bounds(et)
        if a.size == 0 or (int(a.min()) >= lo and int(a.max()) <= hi):
            if et in SUB_BYTE_INTS:
                return a.astype(np.int8 if lo < 0 else np.uint8).astype(dt)
            return a.astype(dt)
        raise HloError(f"{what}: values outside the range of {et} [{lo}, {hi}]")
    raise HloError(f"{what}: dtype {a.dtype} cannot feed a parameter of type {et}")


def _is_ml_float(dtype) -> bool:
    """bfloat16, float8_* ... (ml_dtypes floats are numpy 'V' kind dtypes)."""
    return dtype.kind == "V" and "float" in dtype.name


# ---- outputs ----------------------------------------------------------------------------
def output_arrays(values: list, shapes: list[Shape], raw_bits: bool = False) -> dict:
    """``{"out0": ..., ...}`` for np.savez: low-precision floats as float32 (exact) or as
    bit patterns with ``raw_bits``; sub-byte integers as int8/uint8.  Token leaves are
    skipped (their index is not reused)."""
    out = {}
    for i, (v, s) in enumerate(zip(values, shapes)):
        if v is TOKEN or not s.is_array():
            continue
        out[f"out{i}"] = export_array(v, s.element_type, raw_bits)
    return out


def export_array(v, et: str, raw_bits: bool = False) -> np.ndarray:
    a = np.asarray(v)
    if is_low_precision_float(et) and et != "f16":
        if raw_bits:
            return to_bits(a, et).astype(np.uint16 if BIT_WIDTH[et] > 8 else np.uint8)
        return a.astype(np.float32)
    if et in SUB_BYTE_INTS:
        if raw_bits:
            return to_bits(a, et).astype(np.uint8)
        return a.astype(np.int8 if is_signed_int(et) else np.uint8)
    return a


def result_shapes(module) -> list[Shape]:
    return module.entry.root.shape.leaves()


# ---- comparison -------------------------------------------------------------------------
@dataclass
class LeafComparison:
    index: int
    shape: str
    max_abs: float
    max_rel: float
    mismatches: int
    ok: bool
    note: str = ""


def compare_leaf(index: int, actual, expected, shape: Shape, abs_bound: float,
                 rel_bound: float) -> LeafComparison:
    """XLA's ErrorSpec rule: an element mismatches when its absolute error exceeds
    ``abs_bound`` *and* its relative error exceeds ``rel_bound``; NaN must meet NaN and
    infinities must be equal.  Integers and preds must be equal bit for bit."""
    text = shape.to_text(False)
    if not shape.is_array():
        return LeafComparison(index, text, 0.0, 0.0, 0, True)
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape or a.dtype != e.dtype:
        return LeafComparison(index, text, float("inf"), float("inf"), max(a.size, e.size),
                              False, f"got {a.dtype}{list(a.shape)}, expected "
                                     f"{e.dtype}{list(e.shape)}")
    et = shape.element_type
    if not (is_float(et) or is_complex(et)):
        bad = to_bits(a, et) != to_bits(e, et) if et not in ("pred",) else a != e
        n = int(np.count_nonzero(bad))
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64)) if a.size else np.zeros(0)
        max_abs = float(diff.max()) if diff.size else 0.0
        denom = np.abs(e.astype(np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(diff == 0, 0.0, diff / denom)
        return LeafComparison(index, text, max_abs, float(rel.max()) if rel.size else 0.0,
                              n, n == 0)
    work = np.complex128 if is_complex(et) else np.float64
    a64, e64 = a.astype(work), e.astype(work)
    nan_a = np.isnan(a64)
    nan_e = np.isnan(e64)
    inf = np.isinf(a64) | np.isinf(e64)
    finite = ~(nan_a | nan_e | inf)
    with np.errstate(all="ignore"):
        diff = np.where(finite, np.abs(a64 - e64), 0.0)
        rel = np.where(finite & (diff > 0), diff / np.abs(e64), 0.0)
    bad = (nan_a != nan_e) | (inf & ~(nan_a | nan_e) & (a64 != e64)) | \
        (finite & (diff > abs_bound) & (rel > rel_bound))
    n = int(np.count_nonzero(bad))
    max_abs = float(diff.max()) if diff.size else 0.0
    # report the relative error where it is defined (expected != 0); the pass/fail rule
    # above treats an error against an expected 0 as infinitely relative
    rel_defined = rel[finite & (e64 != 0)]
    max_rel = float(rel_defined.max()) if rel_defined.size else 0.0
    note = ""
    if np.any(nan_a != nan_e):
        note = f"{int(np.count_nonzero(nan_a != nan_e))} NaN mismatch(es)"
    return LeafComparison(index, text, max_abs, max_rel, n, n == 0, note)


def compare_results(actual: list, expected: list, shapes: list[Shape], abs_bound: float,
                    rel_bound: float) -> list[LeafComparison]:
    if len(actual) != len(expected):
        raise HloError(f"the runs returned {len(actual)} and {len(expected)} outputs")
    return [compare_leaf(i, a, e, s, abs_bound, rel_bound)
            for i, (a, e, s) in enumerate(zip(actual, expected, shapes))]
