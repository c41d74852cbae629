"""Stronger comparisons for rewrites that claim to keep values *exactly*.

``special_args`` mixes IEEE special values (nan, +-inf, +-0, huge, subnormal) and integer
extremes into seeded random inputs; ``assert_bitwise`` compares results bit for bit (two
NaNs count as equal whatever their payload/sign; +0 and -0 do not).
"""
from __future__ import annotations

import numpy as np

from hlo_opt.ir.types import BIT_WIDTH, is_complex, is_float, is_integral, is_signed_int, \
    numpy_dtype

_SPECIAL_F = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e30, -1e30, 1e-40,
              65504.0, 2.0 ** -20]


def _value(shape, rng):
    if shape.is_tuple():
        return tuple(_value(s, rng) for s in shape.tuple_shapes)
    if not shape.is_array():
        return None
    et = shape.element_type
    dims = tuple(shape.dims)
    n = int(np.prod(dims)) if dims else 1
    if et == "pred":
        return rng.integers(0, 2, size=dims).astype(np.bool_)
    dt = numpy_dtype(et)
    if is_float(et) or is_complex(et):
        vals = rng.standard_normal(n) * 4
        mask = rng.random(n) < 0.35
        vals[mask] = rng.choice(_SPECIAL_F, size=int(mask.sum()))
        with np.errstate(all="ignore"):
            if is_complex(et):
                return (vals + 1j * rng.standard_normal(n)).astype(dt).reshape(dims)
            return vals.astype(np.float64).astype(np.float32).astype(dt).reshape(dims)
    if is_integral(et):
        bits = BIT_WIDTH[et]
        lo = -(1 << (bits - 1)) if is_signed_int(et) else 0
        hi = (1 << (bits - 1)) - 1 if is_signed_int(et) else (1 << bits) - 1
        small = rng.integers(max(lo, -9), min(hi, 9) + 1, size=n)
        extremes = np.array([lo, hi, 0, 1, lo + 1, hi - 1], dtype=np.int64 if et != "u64"
                            else np.uint64)
        mask = rng.random(n) < 0.25
        out = small.astype(np.int64 if et != "u64" else np.uint64)
        out[mask] = rng.choice(extremes, size=int(mask.sum()))
        return out.astype(dt).reshape(dims)
    return None


def special_args(module, seed: int):
    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        v = _value(p.shape, rng)
        if v is None:
            return None
        out.append(v)
    return out


def assert_bitwise(expected, actual, context=""):
    assert len(expected) == len(actual), context
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = np.asarray(e), np.asarray(a)
        assert e.shape == a.shape and e.dtype == a.dtype, f"{context}: result {i} type"
        if e.dtype.kind in "biu":
            assert np.array_equal(e, a), f"{context}: result {i}: {e} vs {a}"
            continue
        ef = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
        af = a.astype(ef.dtype)
        both_nan = np.isnan(ef) & np.isnan(af)
        e, a = np.ascontiguousarray(e), np.ascontiguousarray(a)
        same_bits = (e.view(np.uint8).reshape(e.size, -1) ==
                     a.view(np.uint8).reshape(a.size, -1)).all(axis=1).reshape(e.shape) \
            if e.size else np.ones(e.shape, bool)
        ok = both_nan | same_bits
        if not ok.all():
            bad = np.argwhere(~ok)[:5].tolist()
            raise AssertionError(f"{context}: result {i} differs bitwise at {bad}: "
                                 f"{e[~ok][:5]} vs {a[~ok][:5]}")
