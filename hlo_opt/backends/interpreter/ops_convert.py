"""convert, bitcast-convert, reduce-precision, stochastic-convert.

convert follows XLA's literal conversion: float -> int truncates toward zero, saturates
at the integer range and maps NaN to 0; -> pred is ``x != 0``; narrowing floats round to
nearest even (bf16 / f8 through ml_dtypes, which is what XLA's Eigen types do).
bitcast-convert reinterprets bits; between different widths the narrower side has an
extra minor dimension (little-endian order, element 0 is the least significant part).
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.types import BIT_WIDTH, is_complex, is_float, is_signed_int, numpy_dtype
from .registry import register_fast
from .values import (F32, F64, SUB_BYTE_INTS, from_bits, int_bounds,
                     is_low_precision_float, to_bits, unsigned_dtype, wrap)


def _float_to_int(src: str, dst: str):
    lo, hi = int_bounds(dst)
    dt = numpy_dtype(dst)
    work = np.int64 if lo < 0 or hi < (1 << 63) else np.uint64
    lo_f, hi_f = float(lo), float(hi)
    sub = dst in SUB_BYTE_INTS

    def conv(x):
        f = np.asarray(x).astype(F64) if np.asarray(x).dtype != F64 else np.asarray(x)
        nan = np.isnan(f)
        t = np.trunc(np.where(nan, 0.0, f))
        big = t >= hi_f
        small = t <= lo_f
        mid = np.where(big | small, 0.0, t).astype(work)
        r = np.where(big, np.array(hi, dtype=work), np.where(small, np.array(lo, dtype=work),
                                                              mid))
        if sub:
            return r.astype(np.int8 if lo < 0 else np.uint8).astype(dt)
        return r.astype(dt)
    return conv


def _make_convert_fn(src: str, dst: str):
    """A function converting arrays of element type ``src`` to ``dst`` (XLA rules)."""
    dt = numpy_dtype(dst)
    if src == dst:
        return lambda x: x
    if dst == "pred":
        return lambda x: np.not_equal(x, 0) if not is_low_precision_float(src) \
            else np.not_equal(x.astype(F32), 0)
    if src == "pred":
        if dst in SUB_BYTE_INTS:
            return lambda x: x.astype(np.int8).astype(dt)
        return lambda x: x.astype(dt)
    if is_complex(src):
        if not is_complex(dst):
            raise UnsupportedError(f"convert from {src} to {dst} (complex to real) is not "
                                   "defined; use real/imag")
        return lambda x: x.astype(dt)
    if is_float(src) and not is_float(dst) and not is_complex(dst):
        return _float_to_int(src, dst)
    if src in SUB_BYTE_INTS:
        mid = np.int8 if is_signed_int(src) else np.uint8
        if dst in SUB_BYTE_INTS:
            return lambda x: wrap(x.astype(mid), dst)
        if is_float(dst) or is_complex(dst):
            return lambda x: x.astype(mid).astype(F64).astype(dt)
        return lambda x: x.astype(mid).astype(dt)
    if dst in SUB_BYTE_INTS:  # int -> narrower int: wrap (two's complement truncation)
        return lambda x: wrap(x.astype(np.int64).astype(np.uint64).astype(np.uint8)
                              .astype(np.int8 if is_signed_int(dst) else np.uint8), dst)
    if is_float(dst) and not is_float(src) and is_low_precision_float(dst):
        # ints -> bf16/f8 through f64 (exact up to 2^53); ml_dtypes then rounds through
        # f32 like XLA's Eigen types do
        return lambda x: x.astype(F64).astype(dt)
    return lambda x: x.astype(dt)


@register_fast("convert")
def _make_convert(inst):
    src = inst.operands[0].shape.element_type
    dst = inst.shape.element_type
    return _make_convert_fn(src, dst)


def convert_array(x, src: str, dst: str):
    """Convert a numpy array of XLA element type ``src`` to ``dst`` with XLA's rules."""
    return _make_convert_fn(src, dst)(x)


@register_fast("bitcast-convert")
def _make_bitcast_convert(inst):
    src = inst.operands[0].shape.element_type
    dst = inst.shape.element_type
    ws, wd = BIT_WIDTH[src], BIT_WIDTH[dst]
    out_dims = inst.shape.dims
    if ws == wd:
        dt = numpy_dtype(dst)
        if ws % 8 == 0 and src != "pred" and dst != "pred" \
                and numpy_dtype(src).itemsize * 8 == ws and dt.itemsize * 8 == wd:
            return lambda x: np.asarray(x).view(dt)
        return lambda x: from_bits(to_bits(x, src), dst)
    if ws > wd:
        if ws % wd:
            raise UnsupportedError(f"bitcast-convert {src} -> {dst}: widths do not divide")
        n = ws // wd
        mask = np.uint64((1 << wd) - 1)
        shifts = (np.arange(n, dtype=np.uint64) * np.uint64(wd))

        def split(x):
            b = to_bits(x, src)[..., None]
            return from_bits((b >> shifts) & mask, dst).reshape(out_dims)
        return split
    if wd % ws:
        raise UnsupportedError(f"bitcast-convert {src} -> {dst}: widths do not divide")
    n = wd // ws
    shifts = (np.arange(n, dtype=np.uint64) * np.uint64(ws))

    def join(x):
        b = to_bits(x, src)
        if b.shape[-1] != n:
            raise UnsupportedError(f"bitcast-convert {src} -> {dst} needs a minor "
                                   f"dimension of {n}, got {b.shape[-1]}")
        word = np.bitwise_or.reduce(b << shifts, axis=-1)
        return from_bits(word, dst).reshape(out_dims)
    return join


@register_fast("reduce-precision")
def _make_reduce_precision(inst):
    et = inst.shape.element_type
    if not is_float(et):
        raise UnsupportedError(f"reduce-precision is not defined for {et}")
    exp_bits = inst.attr("exponent_bits")
    man_bits = inst.attr("mantissa_bits")
    if exp_bits is None or man_bits is None:
        raise UnsupportedError("reduce-precision needs exponent_bits and mantissa_bits")
    work = F64 if et == "f64" else F32
    fn = reduce_precision_fn(work, exp_bits, man_bits)
    dt = inst.shape.dtype
    if work == dt:
        return fn
    return lambda x: fn(x.astype(work)).astype(dt)


def reduce_precision_fn(work: np.dtype, exponent_bits: int, mantissa_bits: int):
    """XLA's bit-exact reduce-precision on f32/f64 (round to nearest even, overflow to
    inf, underflow (incl. denormals) to signed zero, NaN kept)."""
    bits = work.itemsize * 8
    src_man = 23 if bits == 32 else 52
    src_exp = bits - src_man - 1
    udt = unsigned_dtype(bits)

    def u(v):
        return udt.type(v)

    def fn(x):
        x = np.asarray(x)
        v = x.view(udt).copy() if x.ndim else np.asarray(x).reshape(1).view(udt).copy()
        if mantissa_bits < src_man:
            last = u(1 << (src_man - mantissa_bits))
            base_bias = u((int(last) >> 1) - 1)
            x_last = (v & last) >> u(src_man - mantissa_bits)
            v = (v + x_last + base_bias) & u(~(int(last) - 1) & ((1 << bits) - 1))
        if exponent_bits < src_exp:
            sign_mask = u(1 << (bits - 1))
            exp_mask = u(((1 << src_exp) - 1) << src_man)
            bias = (1 << (src_exp - 1)) - 1
            red_bias = (1 << (exponent_bits - 1)) - 1
            max_e = u((bias + red_bias) << src_man)
            min_e = u((bias - red_bias) << src_man)
            x_exp = v & exp_mask
            signed_zero = v & sign_mask
            signed_inf = signed_zero | exp_mask
            v = np.where(x_exp > max_e, signed_inf, v)
            v = np.where(x_exp <= min_e, signed_zero, v)
        r = v.view(work).reshape(x.shape)
        nan = np.isnan(x)
        if np.any(nan):
            r = np.where(nan, x if mantissa_bits > 0 else np.array(np.inf, work), r)
        return r
    return fn


@register_fast("stochastic-convert")
def _make_stochastic_convert(inst):
    src = inst.operands[0].shape.element_type
    dst = inst.shape.element_type
    rnd = inst.operands[1].shape.element_type
    if not is_float(src) or not is_signed_int(dst):
        raise UnsupportedError(f"stochastic-convert {src} -> {dst} is not supported "
                               "(XLA defines float -> signed integer only)")
    lo, hi = int_bounds(dst)
    rbits = BIT_WIDTH[rnd]
    dt = numpy_dtype(dst)

    def conv(x, random):
        f = np.asarray(x).astype(F64)
        neg = f < 0
        a = np.abs(f)
        t = np.floor(a)
        frac = a - t
        fixed = np.floor(frac * float(2 ** rbits))
        r_u = to_bits(random, rnd).astype(np.float64)
        up = r_u < fixed
        mag = np.where(np.isfinite(t), t, 0.0) + up
        v = np.where(neg, -mag, mag)
        v = np.where(f <= lo, lo, np.where(f >= hi, hi, v))
        v = np.where(np.isnan(f), 0, v)
        return v.astype(np.int64).astype(dt)
    return conv
