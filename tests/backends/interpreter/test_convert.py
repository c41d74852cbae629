"""convert, bitcast-convert, reduce-precision, stochastic-convert."""
from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest

from hlo_opt.errors import UnsupportedError

from .interp_util import binary, unary

I32_MIN, I32_MAX = -2**31, 2**31 - 1
I64_MIN, I64_MAX = -2**63, 2**63 - 1


def test_float_to_int_saturates_truncates_and_maps_nan_to_zero():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, -0.5, 2147483520.0],
                 np.float32)
    r = unary("convert", x, out_et="s32")
    assert r.dtype == np.int32
    assert r.tolist() == [0, I32_MAX, I32_MIN, I32_MAX, I32_MIN, 2, -2, 0, 2147483520]
    u = unary("convert", np.array([-1.0, 300.0, 255.9, np.nan, 0.99], np.float32),
              out_et="u8")
    assert u.tolist() == [0, 255, 255, 0, 0]
    big = unary("convert", np.array([1e19, -1e19, 9.2e18], np.float64), out_et="s64")
    assert big.tolist() == [I64_MAX, I64_MIN, 9200000000000000000]
    u64 = unary("convert", np.array([2e19, -5.0], np.float32), out_et="u64")
    assert u64.tolist() == [2**64 - 1, 0]


def test_f32_to_bf16_rounds_to_nearest_even():
    x = np.array([1 + 2**-8, 1 + 2**-8 + 2**-10, 1 + 3 * 2**-8, 3.0e38, -0.0], np.float32)
    r = unary("convert", x, out_et="bf16")
    assert r.dtype == ml_dtypes.bfloat16
    bits = r.view(np.uint16).tolist()
    # 1+2^-8: tie -> even 0x3F80; just above the tie -> 0x3F81; 1+3*2^-8 tie -> 0x3F82
    assert bits[:3] == [0x3F80, 0x3F81, 0x3F82]
    assert bits[3] == 0x7F62  # 3e38 -> 2.99e38 (largest finite region, rounds, no inf)
    assert bits[4] == 0x8000
    back = unary("convert", r, out_et="f32")
    assert back.dtype == np.float32 and back[0] == 1.0 and back[2] == 1.015625


def test_narrowing_floats_overflow():
    h = unary("convert", np.array([70000.0, 1e-8, 65504.0], np.float32), out_et="f16")
    assert h[0] == np.inf and h[1] == 0.0 and h[2] == 65504.0
    f8 = unary("convert", np.array([448.0, 500.0, 0.1], np.float32), out_et="f8e4m3fn")
    assert f8.dtype == ml_dtypes.float8_e4m3fn
    assert float(f8[0]) == 448.0 and np.isnan(float(f8[1]))
    assert abs(float(f8[2]) - 0.1015625) < 1e-9


def test_int_conversions_wrap_and_round():
    assert unary("convert", np.array([300, -129, 127], np.int32), out_et="s8").tolist() == \
        [44, 127, 127]
    assert unary("convert", np.array([16777217, -16777217], np.int32),
                 out_et="f32").tolist() == [16777216.0, -16777216.0]
    s4 = unary("convert", np.array([9, -9, 7], np.int32), out_et="s4")
    assert s4.dtype == ml_dtypes.int4 and s4.astype(np.int8).tolist() == [-7, 7, 7]
    assert unary("convert", np.array([-1, 200], np.int32), out_et="u8").tolist() == [255, 200]


def test_pred_conversions():
    assert unary("convert", np.array([0, 2, -1], np.int32), out_et="pred").tolist() == \
        [False, True, True]
    assert unary("convert", np.array([0.0, -0.0, np.nan, 0.5], np.float32),
                 out_et="pred").tolist() == [False, False, True, True]
    assert unary("convert", np.array([True, False]), out_et="f32").tolist() == [1.0, 0.0]


def test_complex_conversions():
    c = unary("convert", np.array([1.5, -2.0], np.float32), out_et="c64")
    assert c.dtype == np.complex64 and c.tolist() == [1.5 + 0j, -2 + 0j]
    with pytest.raises(UnsupportedError, match="complex to real"):
        unary("convert", np.array([1 + 1j], np.complex64), out_et="f32")


def test_bitcast_convert_same_width():
    r = unary("bitcast-convert", np.array([1.0, -2.0], np.float32), out_et="s32")
    assert r.tolist() == [0x3F800000, struct.unpack("<i", struct.pack("<f", -2.0))[0]]
    assert unary("bitcast-convert", np.array([-1, 5], np.int8), out_et="u8").tolist() == [255, 5]
    b = unary("bitcast-convert", np.array([1.0], ml_dtypes.bfloat16), out_et="u16")
    assert b.tolist() == [0x3F80]


def test_bitcast_convert_to_narrower_adds_minor_dim_little_endian():
    x = np.array([1.0, -0.0], np.float32)
    text = """HloModule t
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = u8[2,4] bitcast-convert(p)
}"""
    from .interp_util import run
    r = run(text, x)
    assert r.tolist() == [list(struct.pack("<f", 1.0)), list(struct.pack("<f", -0.0))]
    back = run("""HloModule t
ENTRY e {
  p = u8[2,4] parameter(0)
  ROOT r = f32[2] bitcast-convert(p)
}""", r)
    assert back.tobytes() == x.tobytes()
    halves = run("""HloModule t
ENTRY e {
  p = f32[1] parameter(0)
  ROOT r = u16[1,2] bitcast-convert(p)
}""", np.array([1.0], np.float32))
    assert halves.tolist() == [[0x0000, 0x3F80]]


def _bf16_round(values: np.ndarray) -> np.ndarray:
    return values.astype(ml_dtypes.bfloat16).astype(np.float32)


def test_reduce_precision_to_bf16_matches_bf16_rounding():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=200).astype(np.float32),
                        np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8)], np.float32)])
    r = unary("reduce-precision", x, attrs=", exponent_bits=8, mantissa_bits=7")
    assert r.tobytes() == _bf16_round(x).tobytes()


def test_reduce_precision_to_f16_range():
    x = np.array([70000.0, 1e-6, 1.0, np.nan, -70000.0, 65504.0], np.float32)
    r = unary("reduce-precision", x, attrs=", exponent_bits=5, mantissa_bits=10")
    assert r[0] == np.inf and r[4] == -np.inf and r[1] == 0.0 and r[2] == 1.0
    assert np.isnan(r[3]) and r[5] == 65504.0
    z = unary("reduce-precision", np.array([np.nan], np.float32),
              attrs=", exponent_bits=8, mantissa_bits=0")
    assert z[0] == np.inf  # XLA: with no mantissa bits NaN becomes inf


def test_stochastic_convert_rounds_up_when_random_is_below_fraction():
    x = np.array([2.25, 2.25, -2.75, -2.75, 1e6, np.nan], np.float32)
    rnd = np.array([0x3FFFFFFF, 0x40000001, 0xBFFFFFFF, 0xC0000001, 0, 0], np.uint32)
    r = binary("stochastic-convert", x, rnd, out_et="s8", et="f32")
    assert r.tolist() == [3, 2, -3, -2, 127, 0]
