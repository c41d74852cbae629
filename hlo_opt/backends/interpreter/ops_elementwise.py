"""Elementwise unary, binary and ternary opcodes (XLA HloEvaluator semantics).

Each opcode registers a kernel factory: ``make(inst) -> kernel(*operands)``, chosen once
per instruction for its element type.  Floats narrower than f32 are computed in f32 and
rounded back; sub-byte integers in int8/uint8 and wrapped back to their width.
Integer corners follow XLA: ``x / 0 = -1`` (signed) or all ones (unsigned), ``x % 0 = x``,
``INT_MIN / -1 = INT_MIN``, ``INT_MIN % -1 = 0``; shifts by >= the bit width give 0
(sign fill for arithmetic right shifts); max/min propagate NaN.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import UnsupportedError
from ...ir.types import BIT_WIDTH, is_complex, is_float, is_signed_int, numpy_dtype
from .registry import register_fast
from .values import (F32, SUB_BYTE_INTS, compute_dtype, from_bits, int_bounds,
                     is_low_precision_float, signed_dtype, to_bits, unsigned_dtype, wrap)


def _kind(et: str) -> str:
    if et == "pred":
        return "p"
    if is_complex(et):
        return "c"
    if is_float(et):
        return "f"
    return "i"


def _adapt(fn, et_in: str, et_out: str, nargs: int):
    """Wrap ``fn`` (which works on compute dtypes) with the casts ``et_in``/``et_out`` need."""
    dt_out = numpy_dtype(et_out)
    cin = compute_dtype(et_in) if et_in not in ("pred",) else None
    need_in = cin is not None and cin != numpy_dtype(et_in)
    sub_out = et_out in SUB_BYTE_INTS
    if not need_in and not sub_out:
        if et_in == et_out and isinstance(fn, np.ufunc):
            return fn  # same-typed ufunc: already returns the storage dtype
        if nargs == 1:
            return lambda x: _as(fn(x), dt_out)
        if nargs == 2:
            return lambda x, y: _as(fn(x, y), dt_out)
        return lambda *a: _as(fn(*a), dt_out)
    if sub_out:
        if nargs == 1:
            return lambda x: wrap(fn(x.astype(cin)), et_out)
        return lambda *a: wrap(fn(*[v.astype(cin) for v in a]), et_out)
    if nargs == 1:
        return lambda x: fn(x.astype(cin)).astype(dt_out)
    if nargs == 2:
        return lambda x, y: fn(x.astype(cin), y.astype(cin)).astype(dt_out)
    return lambda *a: fn(*[v.astype(cin) for v in a]).astype(dt_out)


def _as(x, dt):
    return x if x.dtype == dt else x.astype(dt)


def _unsupported(op: str, et: str):
    raise UnsupportedError(f"{op} is not defined for element type {et}")


# ---- unary ------------------------------------------------------------------------------
_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    return _erf_scalar(np.asarray(x, dtype=np.float64)).astype(np.float64).astype(x.dtype)


def _sign_float(x):
    x = np.asarray(x)
    return np.where(np.isnan(x), x, np.copysign((x != 0).astype(x.dtype), x))


def _sign_complex(x):
    a = np.abs(x)
    with np.errstate(all="ignore"):
        return np.where(a == 0, np.zeros_like(x), x / np.where(a == 0, 1, a))


def _round_afz(x):
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(x.dtype)


def _logistic(x):
    one = np.ones((), dtype=x.dtype)
    return one / (one + np.exp(-x))


def _rsqrt(x):
    return np.ones((), dtype=x.dtype) / np.sqrt(x)


def _bit_length(u):
    """Vectorised bit_length of a uint64 array."""
    u = np.asarray(u, dtype=np.uint64)
    n = np.zeros(u.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        m = u >= np.uint64(1 << shift)
        n += np.where(m, shift, 0)
        u = np.where(m, u >> np.uint64(shift), u)
    return n + (u > 0)


def _make_clz(et):
    w = BIT_WIDTH[et]
    dt = numpy_dtype(et)
    if et in SUB_BYTE_INTS:
        return lambda x: wrap(w - _bit_length(to_bits(x, et)), et)
    return lambda x: (w - _bit_length(to_bits(x, et))).astype(dt)


def _make_popcnt(et):
    dt = numpy_dtype(et)
    if et in SUB_BYTE_INTS:
        return lambda x: wrap(np.bitwise_count(to_bits(x, et)), et)
    return lambda x: np.bitwise_count(to_bits(x, et)).astype(dt)


def _identity(x):
    return x


# opcode -> {kind: fn on compute-dtype values}; kinds: f(loat) c(omplex) i(nt) p(red)
_UNARY = {
    "abs": {"f": np.abs, "c": np.abs, "i": np.abs},
    "negate": {"f": np.negative, "c": np.negative, "i": np.negative},
    "exponential": {"f": np.exp, "c": np.exp},
    "exponential-minus-one": {"f": np.expm1, "c": np.expm1},
    "log": {"f": np.log, "c": np.log},
    "log-plus-one": {"f": np.log1p, "c": np.log1p},
    "sqrt": {"f": np.sqrt, "c": np.sqrt},
    "rsqrt": {"f": _rsqrt, "c": _rsqrt},
    "cbrt": {"f": np.cbrt},
    "sine": {"f": np.sin, "c": np.sin},
    "cosine": {"f": np.cos, "c": np.cos},
    "tan": {"f": np.tan, "c": np.tan},
    "tanh": {"f": np.tanh, "c": np.tanh},
    "sinh": {"f": np.sinh, "c": np.sinh},
    "cosh": {"f": np.cosh, "c": np.cosh},
    "asin": {"f": np.arcsin, "c": np.arcsin},
    "acos": {"f": np.arccos, "c": np.arccos},
    "atan": {"f": np.arctan, "c": np.arctan},
    "asinh": {"f": np.arcsinh, "c": np.arcsinh},
    "acosh": {"f": np.arccosh, "c": np.arccosh},
    "atanh": {"f": np.arctanh, "c": np.arctanh},
    "erf": {"f": _erf},
    "logistic": {"f": _logistic, "c": _logistic},
    "floor": {"f": np.floor, "i": _identity},
    "ceil": {"f": np.ceil, "i": _identity},
    "round-nearest-even": {"f": np.rint, "i": _identity},
    "round-nearest-afz": {"f": _round_afz, "i": _identity},
    "sign": {"f": _sign_float, "c": _sign_complex, "i": np.sign},
    "is-finite": {"f": np.isfinite},
    "real": {"f": _identity, "c": np.real},
    "imag": {"f": np.zeros_like, "c": np.imag},
    "not": {"p": np.logical_not, "i": np.invert},
}


def _make_unary(inst):
    op = inst.opcode
    et_in = inst.operands[0].shape.element_type
    et_out = inst.shape.element_type
    if op == "count-leading-zeros":
        if _kind(et_in) != "i":
            _unsupported(op, et_in)
        return _make_clz(et_in)
    if op == "popcnt":
        if _kind(et_in) != "i":
            _unsupported(op, et_in)
        return _make_popcnt(et_in)
    fn = _UNARY[op].get(_kind(et_in))
    if fn is None:
        _unsupported(op, et_in)
    if op == "not" and et_in in SUB_BYTE_INTS:
        return lambda x: wrap(np.invert(x.astype(compute_dtype(et_in))), et_in)
    return _adapt(fn, et_in, et_out, 1)


register_fast(*_UNARY, "count-leading-zeros", "popcnt")(_make_unary)


# ---- binary -----------------------------------------------------------------------------
def _guarded_fmod(a, b, lo, signed):
    """fmod with the divisor forced to 1 where XLA defines the result itself (x/0 and, for
    signed types, INT_MIN/-1): (a, safe divisor, remainder, zero mask, overflow mask or None)."""
    a = np.asarray(a)
    b = np.asarray(b)
    zero = b == 0
    ovf = (a == lo) & (b == -1) if signed else None
    bad = zero | ovf if signed else zero
    safe = np.where(bad, np.ones((), b.dtype), b)
    return a, safe, np.fmod(a, safe), zero, ovf


def _int_divide(et):
    lo, hi = int_bounds(et)
    signed = is_signed_int(et)

    def div(a, b):
        a, safe, r, zero, ovf = _guarded_fmod(a, b, lo, signed)
        q = (a - r) // safe
        q = np.where(zero, np.array(-1 if signed else hi).astype(a.dtype), q)
        if signed:
            q = np.where(ovf, np.array(lo, dtype=a.dtype), q)
        return q
    return div


def _int_remainder(et):
    lo, _ = int_bounds(et)
    signed = is_signed_int(et)

    def rem(a, b):
        a, _, r, zero, ovf = _guarded_fmod(a, b, lo, signed)
        r = np.where(zero, a, r)
        if signed:
            r = np.where(ovf, np.zeros((), a.dtype), r)
        return r
    return rem


def _int_power(et):
    signed = is_signed_int(et)
    cdt = compute_dtype(et)
    udt = unsigned_dtype(cdt.itemsize * 8)

    def power(a, b):
        a = np.asarray(a)
        b = np.asarray(b)
        a, b = np.broadcast_arrays(a, b)
        neg = b < 0 if signed else np.zeros(b.shape, dtype=bool)
        e = np.where(neg, 0, b).astype(np.uint64)
        base = np.asarray(a.astype(cdt)).view(udt)
        result = np.ones(a.shape, dtype=udt)
        while np.any(e):
            odd = (e & np.uint64(1)).astype(bool)
            result = np.where(odd, result * base, result)
            base = base * base
            e = e >> np.uint64(1)
        result = result.view(cdt)
        one = np.ones((), cdt)
        result = np.where((a == 1) | (b == 0), one, result)
        if signed:
            result = np.where(neg, np.where(a == 1, one, np.zeros((), cdt)), result)
        return result
    return power


def _complex_power(a, b):
    r = np.power(a, b)
    return np.where((a == 1) | (b == 0), np.ones((), r.dtype), r)


def _make_complex(inst):
    dt = inst.shape.dtype

    def make(re, im):
        out = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), dtype=dt)
        out.real = re
        out.imag = im
        return out
    return make


def _shift(kind: str, et: str):
    w = BIT_WIDTH[et]
    if et in SUB_BYTE_INTS:
        mask = np.uint64((1 << w) - 1)
        sign = np.uint64(1 << (w - 1))

        def sub(a, b):
            u = to_bits(a, et)
            s = to_bits(b, et)
            oob = s >= np.uint64(w)
            s = np.where(oob, np.uint64(0), s)
            if kind == "shift-left":
                r = np.where(oob, np.uint64(0), (u << s) & mask)
            elif kind == "shift-right-logical":
                r = np.where(oob, np.uint64(0), u >> s)
            else:
                v = np.where(u & sign, u.astype(np.int64) - (1 << w), u.astype(np.int64))
                r = np.where(oob, np.where(v < 0, -1, 0), v >> s.astype(np.int64))
                r = r.astype(np.uint64) & mask
            return from_bits(r, et)
        return sub
    dt = numpy_dtype(et)
    udt = unsigned_dtype(w)
    sdt = signed_dtype(w)

    def shift(a, b):
        a = np.asarray(a)
        s = np.asarray(b).view(udt)
        oob = s >= w
        s = np.where(oob, np.zeros((), udt), s)
        if kind == "shift-left":
            r = np.left_shift(a.view(udt), s)
            r = np.where(oob, np.zeros((), udt), r)
        elif kind == "shift-right-logical":
            r = np.right_shift(a.view(udt), s)
            r = np.where(oob, np.zeros((), udt), r)
        else:
            sa = a.view(sdt)
            r = np.right_shift(sa, s.astype(sdt))
            r = np.where(oob, np.where(sa < 0, np.array(-1, sdt), np.array(0, sdt)), r)
        return np.asarray(r).view(dt)
    return shift


def _mulhi(et: str):
    w = BIT_WIDTH[et]
    dt = numpy_dtype(et)
    signed = is_signed_int(et)
    if w <= 32:
        wide = np.int64 if signed else np.uint64

        def hi(a, b):
            p = np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
            return (p >> w).astype(dt)
        return hi

    def hi64(a, b):  # 64-bit: schoolbook on 32-bit halves, unsigned, then sign fix-up
        ua = np.asarray(a).view(np.uint64)
        ub = np.asarray(b).view(np.uint64)
        m32 = np.uint64(0xFFFFFFFF)
        s32 = np.uint64(32)
        a_lo, a_hi = ua & m32, ua >> s32
        b_lo, b_hi = ub & m32, ub >> s32
        lo_lo = a_lo * b_lo
        hi_lo = a_hi * b_lo
        lo_hi = a_lo * b_hi
        hi_hi = a_hi * b_hi
        cross = (lo_lo >> s32) + (hi_lo & m32) + lo_hi
        high = hi_hi + (hi_lo >> s32) + (cross >> s32)
        if signed:
            high = high - np.where(np.asarray(a) < 0, ub, np.uint64(0)) \
                - np.where(np.asarray(b) < 0, ua, np.uint64(0))
        return high.view(dt)
    return hi64


_SIMPLE_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                  "maximum": np.maximum, "minimum": np.minimum}
_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _contiguous_power(a, b):
    """numpy's float power takes a SIMD path for contiguous inputs and libm otherwise, and
    the two differ in the last bit; contiguous inputs make the result independent of how
    the operands happen to be laid out in memory (a broadcast or reversed view)."""
    return np.power(np.asarray(a, order="C"), np.asarray(b, order="C"))


def _make_binary(inst):
    op = inst.opcode
    et = inst.operands[0].shape.element_type
    et_out = inst.shape.element_type
    k = _kind(et)
    if op in _SIMPLE_BINARY:
        if k == "c" and op in ("maximum", "minimum"):
            _unsupported(op, et)
        if k == "p" and op == "subtract":
            _unsupported(op, et)
        return _adapt(_SIMPLE_BINARY[op], et, et_out, 2)
    if op in _BITWISE:
        if k in ("f", "c"):
            _unsupported(op, et)
        return _adapt(_BITWISE[op], et, et_out, 2)
    if op == "divide":
        if k == "i":
            return _adapt(_int_divide(et), et, et_out, 2) if et in SUB_BYTE_INTS \
                else _int_divide(et)
        if k == "p":
            _unsupported(op, et)
        return _adapt(np.divide, et, et_out, 2)
    if op == "remainder":
        if k == "i":
            return _adapt(_int_remainder(et), et, et_out, 2) if et in SUB_BYTE_INTS \
                else _int_remainder(et)
        if k in ("p", "c"):
            _unsupported(op, et)
        return _adapt(np.fmod, et, et_out, 2)
    if op == "power":
        if k == "i":
            return _adapt(_int_power(et), et, et_out, 2)
        if k == "p":
            return lambda a, b: np.logical_or(a, np.logical_not(b))
        if k == "c":
            return _complex_power
        return _adapt(_contiguous_power, et, et_out, 2)
    if op == "atan2":
        if k not in ("f",):
            _unsupported(op, et)
        return _adapt(np.arctan2, et, et_out, 2)
    if op == "complex":
        return _make_complex(inst)
    if op in ("shift-left", "shift-right-logical", "shift-right-arithmetic"):
        if k != "i":
            _unsupported(op, et)
        return _shift(op, et)
    if op == "mulhi":
        if k != "i" or et in SUB_BYTE_INTS:
            _unsupported(op, et)
        return _mulhi(et)
    raise AssertionError(op)


register_fast(*_SIMPLE_BINARY, *_BITWISE, "divide", "remainder", "power", "atan2",
              "complex", "shift-left", "shift-right-logical", "shift-right-arithmetic",
              "mulhi")(_make_binary)


# ---- compare ----------------------------------------------------------------------------
_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
               "GT": np.greater, "GE": np.greater_equal}


def _total_order_key(et: str):
    w = BIT_WIDTH[et]
    sign = np.uint64(1 << (w - 1))
    mag_mask = np.uint64((1 << (w - 1)) - 1)

    def key(x):
        b = to_bits(x, et)
        mag = (b & mag_mask).astype(np.int64)
        return np.where((b & sign) != 0, -mag - 1, mag)
    return key


@register_fast("compare")
def _make_compare(inst):
    direction = inst.attrs.get("direction", "").strip()
    uf = _DIRECTIONS.get(direction)
    if uf is None:
        raise UnsupportedError(f"compare has a bad direction '{direction}'")
    et = inst.operands[0].shape.element_type
    ctype = inst.attrs.get("type", "").strip()
    k = _kind(et)
    if k == "c" and direction not in ("EQ", "NE"):
        _unsupported(f"compare direction {direction}", et)
    if k == "f" and ctype == "TOTALORDER":
        key = _total_order_key(et)
        return lambda a, b: uf(key(a), key(b))
    if is_low_precision_float(et):
        return lambda a, b: uf(a.astype(F32), b.astype(F32))
    if et in SUB_BYTE_INTS:
        cdt = compute_dtype(et)
        return lambda a, b: uf(a.astype(cdt), b.astype(cdt))
    return uf


# ---- ternary ----------------------------------------------------------------------------
@register_fast("select")
def _make_select(inst):
    return np.where


@register_fast("clamp")
def _make_clamp(inst):
    et = inst.shape.element_type
    k = _kind(et)
    if k in ("c", "p"):
        _unsupported("clamp", et)
    dt = inst.shape.dtype

    def clamp(lo, x, hi):
        return np.minimum(hi, np.maximum(x, lo))
    if is_low_precision_float(et) or et in SUB_BYTE_INTS:
        cdt = compute_dtype(et)
        return lambda lo, x, hi: clamp(lo.astype(cdt), x.astype(cdt),
                                       hi.astype(cdt)).astype(dt)
    return clamp
