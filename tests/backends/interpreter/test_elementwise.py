"""Elementwise opcodes: expectations computed per element in Python (or by hand)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from hlo_opt.errors import HloError

from .interp_util import binary, one_op, unary

I32_MIN, I32_MAX = -2**31, 2**31 - 1


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def xla_int_div(a: int, b: int, lo: int, hi: int, signed: bool) -> int:
    if b == 0:
        return -1 if signed else hi
    if signed and a == lo and b == -1:
        return lo
    return _trunc_div(a, b)


def xla_int_rem(a: int, b: int, lo: int, signed: bool) -> int:
    if b == 0:
        return a
    if signed and a == lo and b == -1:
        return 0
    return a - b * _trunc_div(a, b)


def wrap32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 2**32 if v >= 2**31 else v


# ---- integer arithmetic -----------------------------------------------------------------
S32_PAIRS = [(7, 2), (-7, 2), (7, -2), (-7, -2), (5, 0), (-5, 0), (0, 0), (I32_MIN, -1),
             (I32_MIN, 1), (I32_MAX, -1), (I32_MIN, 0), (-1, I32_MIN), (13, 13)]


def test_s32_divide_and_remainder_follow_xla_corners():
    a = np.array([p[0] for p in S32_PAIRS], np.int32)
    b = np.array([p[1] for p in S32_PAIRS], np.int32)
    div = binary("divide", a, b)
    rem = binary("remainder", a, b)
    assert div.dtype == np.int32 and rem.dtype == np.int32
    assert div.tolist() == [xla_int_div(x, y, I32_MIN, I32_MAX, True) for x, y in S32_PAIRS]
    assert rem.tolist() == [xla_int_rem(x, y, I32_MIN, True) for x, y in S32_PAIRS]
    # spot checks written out by hand
    assert div[4] == -1 and rem[4] == 5          # 5 / 0 = -1, 5 % 0 = 5
    assert div[7] == I32_MIN and rem[7] == 0     # INT_MIN / -1 = INT_MIN, % = 0
    assert div[1] == -3 and rem[1] == -1         # truncation toward zero


def test_unsigned_divide_by_zero_is_all_ones_and_remainder_is_dividend():
    a = np.array([7, 200, 0, 255], np.uint8)
    b = np.array([2, 0, 0, 16], np.uint8)
    assert binary("divide", a, b).tolist() == [3, 255, 255, 15]
    assert binary("remainder", a, b).tolist() == [1, 200, 0, 15]


def test_s8_overflow_wraps():
    a = np.array([127, -128, 100, -100], np.int8)
    b = np.array([1, -1, 100, -100], np.int8)
    assert binary("add", a, b).tolist() == [-128, 127, -56, 56]
    assert binary("multiply", a, b).tolist() == [127, -128, 16, 16]
    assert binary("subtract", a, -b).tolist() == [-128, 127, -56, 56]


def test_s4_add_wraps_to_four_bits():
    a = np.array([7, -8, 3, -1], ml_dtypes.int4)
    b = np.array([1, -1, 4, -8], ml_dtypes.int4)
    r = binary("add", a, b)
    assert r.dtype == ml_dtypes.int4
    assert r.astype(np.int8).tolist() == [-8, 7, 7, 7]


def test_negate_and_abs_of_int_min_stay_int_min():
    x = np.array([I32_MIN, -3, 0, 5], np.int32)
    assert unary("negate", x).tolist() == [I32_MIN, 3, 0, -5]
    assert unary("abs", x).tolist() == [I32_MIN, 3, 0, 5]


def test_integer_power():
    base = np.array([2, 3, 1, -1, 0, 2, 2, -2, 5], np.int32)
    exp = np.array([10, -1, -5, -1, 0, 31, 32, 3, 0], np.int32)
    expected = []
    for b, e in zip(base.tolist(), exp.tolist()):
        if b == 1 or e == 0:
            expected.append(1)
        elif e < 0:
            expected.append(0)  # XLA: x^negative = 0 unless x == 1
        else:
            expected.append(wrap32(b ** e))
    assert binary("power", base, exp).tolist() == expected
    assert expected[5] == I32_MIN and expected[6] == 0  # 2^31, 2^32 wrap


def test_shifts_out_of_range():
    x = np.array([1, -8, 0x40000000, -1, 5, -5], np.int32)
    s = np.array([31, 1, 1, 32, 33, -1], np.int32)
    left = binary("shift-left", x, s)
    logical = binary("shift-right-logical", x, s)
    arith = binary("shift-right-arithmetic", x, s)
    exp_left, exp_logical, exp_arith = [], [], []
    for v, n in zip(x.tolist(), s.tolist()):
        u = v & 0xFFFFFFFF
        if n < 0 or n >= 32:
            exp_left.append(0)
            exp_logical.append(0)
            exp_arith.append(-1 if v < 0 else 0)
        else:
            exp_left.append(wrap32(u << n))
            exp_logical.append(wrap32(u >> n))
            exp_arith.append(v >> n)
    assert left.tolist() == exp_left
    assert logical.tolist() == exp_logical
    assert arith.tolist() == exp_arith
    assert left[0] == I32_MIN and arith[1] == -4 and logical[1] == 0x7FFFFFFC


def test_unsigned_shifts():
    x = np.array([0x80, 0xFF, 1, 3], np.uint8)
    s = np.array([1, 8, 7, 200], np.uint8)
    assert binary("shift-right-logical", x, s).tolist() == [0x40, 0, 0, 0]
    assert binary("shift-right-arithmetic", x, s).tolist() == [0xC0, 0xFF, 0, 0]
    assert binary("shift-left", x, s).tolist() == [0, 0, 0x80, 0]


def test_bitwise_and_not():
    a = np.array([0b1100, -1, 0], np.int32)
    b = np.array([0b1010, 5, -1], np.int32)
    assert binary("and", a, b).tolist() == [0b1000, 5, 0]
    assert binary("or", a, b).tolist() == [0b1110, -1, -1]
    assert binary("xor", a, b).tolist() == [0b0110, -6, -1]
    assert unary("not", a).tolist() == [~0b1100, 0, -1]
    p = np.array([True, False])
    assert unary("not", p).tolist() == [False, True]
    assert binary("and", p, np.array([True, True])).tolist() == [True, False]


def test_clz_and_popcnt():
    x = np.array([0, 1, -1, I32_MAX, 256, I32_MIN], np.int32)
    assert unary("count-leading-zeros", x).tolist() == [32, 31, 0, 1, 23, 0]
    assert unary("popcnt", x).tolist() == [0, 1, 32, 31, 1, 1]
    u = np.array([0, 1, 128, 255], np.uint8)
    assert unary("count-leading-zeros", u).tolist() == [8, 7, 0, 0]
    assert unary("popcnt", u).tolist() == [0, 1, 1, 8]
    big = np.array([1 << 40, 0], np.int64)
    assert unary("count-leading-zeros", big).tolist() == [23, 64]


def test_mulhi():
    a = np.array([1 << 30, -1, I32_MIN, 123456789], np.int32)
    b = np.array([4, 1, I32_MIN, 987654321], np.int32)
    exp = [(x * y) >> 32 for x, y in zip(a.tolist(), b.tolist())]
    assert binary("mulhi", a, b).tolist() == exp
    ua = np.array([0xFFFFFFFF, 2], np.uint32)
    assert binary("mulhi", ua, ua).tolist() == [0xFFFFFFFE, 0]
    sa = np.array([-(2**62) - 7, 2**62 + 3, -1], np.int64)
    sb = np.array([3, -(2**61) + 5, -1], np.int64)
    exp64 = [(x * y) >> 64 for x, y in zip(sa.tolist(), sb.tolist())]
    assert binary("mulhi", sa, sb).tolist() == exp64


# ---- floats -----------------------------------------------------------------------------
def test_max_min_propagate_nan():
    a = np.array([np.nan, 1.0, 2.0, -0.0], np.float32)
    b = np.array([2.0, np.nan, 1.0, 3.0], np.float32)
    mx = binary("maximum", a, b)
    mn = binary("minimum", a, b)
    assert np.isnan(mx[0]) and np.isnan(mx[1]) and mx[2] == 2.0 and mx[3] == 3.0
    assert np.isnan(mn[0]) and np.isnan(mn[1]) and mn[2] == 1.0 and mn[3] == 0.0


def test_float_divide_and_remainder():
    a = np.array([1.0, -1.0, 0.0, -5.5, 7.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, 2.0, -2.5], np.float32)
    d = binary("divide", a, b)
    assert d[0] == np.inf and d[1] == -np.inf and np.isnan(d[2])
    r = binary("remainder", a, b)
    assert r[3] == -1.5 and r[4] == 2.0 and np.isnan(r[0])


def test_bf16_add_rounds_to_nearest_even():
    one = np.array([1.0, 1.0, 1.0], ml_dtypes.bfloat16)
    small = np.array([2.0**-8, 3 * 2.0**-8, 2.0**-9], ml_dtypes.bfloat16)
    r = binary("add", one, small)
    assert r.dtype == ml_dtypes.bfloat16
    # 1 + 2^-8 is a tie -> even (1.0); 1 + 3*2^-8 ties up to 1 + 2^-6; 1 + 2^-9 -> 1
    assert r.astype(np.float64).tolist() == [1.0, 1.015625, 1.0]


def test_round_nearest_afz_and_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.3, 3.7], np.float32)
    afz = unary("round-nearest-afz", x)
    even = unary("round-nearest-even", x)
    assert afz.tolist() == [1.0, 2.0, 3.0, -1.0, -3.0, 0.0, -0.0, 4.0]
    assert np.signbit(afz[6])
    assert even.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 0.0, -0.0, 4.0]


def test_sign():
    x = np.array([-2.0, -0.0, 0.0, 3.0, np.nan, -np.inf], np.float32)
    s = unary("sign", x)
    assert s[0] == -1 and s[3] == 1 and s[5] == -1
    assert s[1] == 0 and np.signbit(s[1]) and s[2] == 0 and not np.signbit(s[2])
    assert np.isnan(s[4])
    assert unary("sign", np.array([-5, 0, 9], np.int32)).tolist() == [-1, 0, 1]
    c = unary("sign", np.array([3 + 4j, 0j], np.complex64))
    assert np.allclose(c, [0.6 + 0.8j, 0])


@pytest.mark.parametrize("op,ref", [
    ("exponential", math.exp), ("log", math.log), ("sqrt", math.sqrt),
    ("tanh", math.tanh), ("sine", math.sin), ("cosine", math.cos), ("tan", math.tan),
    ("atan", math.atan), ("sinh", math.sinh), ("cosh", math.cosh), ("asinh", math.asinh),
    ("erf", math.erf), ("cbrt", lambda v: math.copysign(abs(v) ** (1 / 3), v)),
    ("exponential-minus-one", math.expm1), ("log-plus-one", math.log1p),
    ("logistic", lambda v: 1 / (1 + math.exp(-v))), ("rsqrt", lambda v: 1 / math.sqrt(v)),
    ("floor", math.floor), ("ceil", math.ceil),
])
def test_transcendental_f32_against_python_math(op, ref):
    x = np.array([0.1, 0.5, 1.0, 1.7, 2.5, 1e-6], np.float32)
    r = unary(op, x)
    assert r.dtype == np.float32
    exp = np.array([ref(float(v)) for v in x], np.float64)
    np.testing.assert_allclose(r.astype(np.float64), exp, rtol=3e-6, atol=0)


@pytest.mark.parametrize("op,ref", [("acos", math.acos), ("asin", math.asin),
                                    ("atanh", math.atanh)])
def test_inverse_trig_in_unit_interval(op, ref):
    x = np.array([-0.9, -0.5, 0.0, 0.3, 0.99], np.float32)
    exp = np.array([ref(float(v)) for v in x])
    np.testing.assert_allclose(unary(op, x).astype(np.float64), exp, rtol=3e-6, atol=1e-7)


def test_acosh_and_expm1_small_values():
    np.testing.assert_allclose(unary("acosh", np.array([1.0, 2.0, 10.0], np.float32)),
                               [math.acosh(v) for v in (1.0, 2.0, 10.0)], rtol=3e-6)
    r = unary("exponential-minus-one", np.array([1e-10], np.float64))
    assert abs(r[0] - 1.00000000005e-10) < 1e-24


def test_f16_and_bf16_unary_compute_in_f32():
    x = np.array([0.5, 2.0, 3.0], ml_dtypes.bfloat16)
    r = unary("exponential", x)
    assert r.dtype == ml_dtypes.bfloat16
    exp = np.exp(np.array([0.5, 2.0, 3.0], np.float32)).astype(ml_dtypes.bfloat16)
    assert r.tobytes() == exp.tobytes()
    h = unary("sqrt", np.array([2.0, 9.0], np.float16))
    assert h.dtype == np.float16 and h[1] == 3.0


def test_atan2_and_power():
    y = np.array([1.0, -1.0, 0.0, -0.0], np.float32)
    x = np.array([-1.0, -1.0, -1.0, -1.0], np.float32)
    r = binary("atan2", y, x)
    np.testing.assert_allclose(r, [math.atan2(a, b) for a, b in zip(y, x)], rtol=1e-6)
    p = binary("power", np.array([2.0, -8.0, 0.0], np.float32),
               np.array([0.5, 1 / 3, 0.0], np.float32))
    assert abs(p[0] - math.sqrt(2)) < 1e-6 and np.isnan(p[1]) and p[2] == 1.0


def test_is_finite_real_imag_complex():
    x = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    assert unary("is-finite", x, out_et="pred").tolist() == [True, False, False, False]
    c = np.array([1 + 2j, -3.5 - 0.25j], np.complex64)
    assert unary("real", c, out_et="f32").tolist() == [1.0, -3.5]
    assert unary("imag", c, out_et="f32").tolist() == [2.0, -0.25]
    z = binary("complex", np.array([1.0, -0.0], np.float32), np.array([-2.0, -0.0], np.float32),
               out_et="c64")
    assert z.dtype == np.complex64 and z[0] == 1 - 2j
    assert np.signbit(z[1].real) and np.signbit(z[1].imag)
    assert unary("abs", np.array([3 + 4j], np.complex64), out_et="f32").tolist() == [5.0]


# ---- compare ----------------------------------------------------------------------------
def _f32(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


def test_compare_totalorder_orders_signed_nans_and_zeros():
    # -NaN < -inf < -1 < -0 < +0 < 1 < inf < +NaN
    ordered = np.array([_f32(0xFFC00000), -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf,
                        _f32(0x7FC00000)], np.float32)
    n = len(ordered)
    a = np.repeat(ordered, n)
    b = np.tile(ordered, n)
    lt = binary("compare", a, b, out_et="pred", attrs=", direction=LT, type=TOTALORDER")
    eq = binary("compare", a, b, out_et="pred", attrs=", direction=EQ, type=TOTALORDER")
    ia, ib = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    assert lt.tolist() == (ia < ib).tolist()
    assert eq.tolist() == (ia == ib).tolist()


def test_compare_float_partial_order_and_ints():
    a = np.array([np.nan, 1.0, 2.0, -0.0], np.float32)
    b = np.array([np.nan, 1.0, 3.0, 0.0], np.float32)
    assert binary("compare", a, b, "pred", ", direction=EQ").tolist() == [False, True, False, True]
    assert binary("compare", a, b, "pred", ", direction=NE").tolist() == [True, False, True, False]
    assert binary("compare", a, b, "pred", ", direction=LT").tolist() == [False, False, True, False]
    u = np.array([0, 255], np.uint8)
    v = np.array([1, 1], np.uint8)
    assert binary("compare", u, v, "pred", ", direction=GT, type=UNSIGNED").tolist() == \
        [False, True]
    bf = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    assert binary("compare", bf, bf[::-1].copy(), "pred", ", direction=GE").tolist() == \
        [False, True]


# ---- ternary ----------------------------------------------------------------------------
def test_select_array_and_scalar_pred():
    on_t = np.array([1, 2, 3], np.int32)
    on_f = np.array([10, 20, 30], np.int32)
    p = np.array([True, False, True])
    assert one_op("s32[3]", "select", [p, on_t, on_f]).tolist() == [1, 20, 3]
    assert one_op("s32[3]", "select", [np.array(False), on_t, on_f]).tolist() == [10, 20, 30]


def test_clamp_scalar_bounds_and_nan():
    x = np.array([-5.0, 0.5, 7.0, np.nan], np.float32)
    r = one_op("f32[4]", "clamp", [np.float32(0.0), x, np.float32(1.0)])
    assert r[:3].tolist() == [0.0, 0.5, 1.0] and np.isnan(r[3])
    lo = np.array([0, 0, 5], np.int32)
    hi = np.array([1, 10, 6], np.int32)
    assert one_op("s32[3]", "clamp", [lo, np.array([3, -3, 9], np.int32), hi]).tolist() == \
        [1, 0, 6]


def test_unsupported_type_is_a_clean_error():
    with pytest.raises(HloError, match="not defined for element type f32"):
        binary("shift-left", np.array([1.0], np.float32), np.array([1.0], np.float32))
