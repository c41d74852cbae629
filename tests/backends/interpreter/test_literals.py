"""Run-edge helpers: random inputs, npz coercion, output export, error-bound comparison."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends.interpreter.literals import (coerce_input, compare_leaf, export_array,
                                                   random_arguments)
from hlo_opt.errors import HloError
from hlo_opt.ir.shape import Shape

F32_4 = Shape.parse("f32[4]")


def test_random_arguments_have_parameter_types_and_sensible_ranges():
    m = parse_hlo("""HloModule r
ENTRY e {
  a = f32[100] parameter(0)
  b = s32[100] parameter(1)
  c = u8[100] parameter(2)
  d = pred[100] parameter(3)
  e = bf16[100] parameter(4)
  f = s4[100] parameter(5)
  g = c64[3] parameter(6)
  ROOT t = (f32[100], s32[100], u8[100], pred[100], bf16[100], s4[100], c64[3]) tuple(a, b, c, d, e, f, g)
}""")
    args = random_arguments(m, seed=7)
    assert [a.dtype for a in args] == [p.shape.dtype for p in m.entry.parameters]
    a, b, c, d, e, f, g = args
    assert -1 <= a.min() and a.max() < 1
    assert -10 <= b.min() and b.max() <= 10 and len(set(b.tolist())) > 5
    assert c.max() <= 20 and d.any() and not d.all()
    assert -8 <= f.astype(np.int8).min() and f.astype(np.int8).max() <= 7
    again = random_arguments(m, seed=7)
    assert all(np.array_equal(x, y) for x, y in zip(args[:4], again[:4]))


def test_coerce_input_rules():
    assert coerce_input(np.arange(4, dtype=np.float64), F32_4).dtype == np.float32
    s32 = Shape.parse("s32[2]")
    assert coerce_input(np.array([1, 2], np.int64), s32).dtype == np.int32
    with pytest.raises(HloError, match="outside the range of s32"):
        coerce_input(np.array([2**40, 0], np.int64), s32)
    with pytest.raises(HloError, match="cannot feed a parameter of type s32"):
        coerce_input(np.array([1.5, 2.0]), s32)
    pred = Shape.parse("pred[2]")
    assert coerce_input(np.array([0, 1], np.int8), pred).tolist() == [False, True]
    with pytest.raises(HloError):
        coerce_input(np.array([0, 2], np.int8), pred)
    bf = Shape.parse("bf16[2]")
    bits = coerce_input(np.array([0x3F80, 0xC000], np.uint16), bf)
    assert bits.dtype == ml_dtypes.bfloat16 and bits.astype(np.float32).tolist() == [1.0, -2.0]
    f8 = Shape.parse("f8e4m3fn[1]")
    assert float(coerce_input(np.array([0x38], np.uint8), f8)[0]) == 1.0
    with pytest.raises(HloError, match="tuple"):
        coerce_input(np.zeros(2), Shape.parse("(f32[2])"))


def test_export_array():
    x = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    assert export_array(x, "bf16").dtype == np.float32
    assert export_array(x, "bf16", raw_bits=True).tolist() == [0x3FC0, 0xC000]
    s4 = np.array([-1, 7], ml_dtypes.int4)
    assert export_array(s4, "s4").tolist() == [-1, 7]
    assert export_array(s4, "s4", raw_bits=True).tolist() == [0xF, 0x7]


def test_compare_leaf_error_spec():
    e = np.array([1.0, 100.0, 0.0, np.nan], np.float32)
    a = np.array([1.0005, 100.05, 0.0009, np.nan], np.float32)
    r = compare_leaf(0, a, e, F32_4, 1e-3, 1e-3)
    # element 0: abs 5e-4 ok; element 1: abs 0.05 > 1e-3 but rel 5e-4 ok; element 2 abs ok
    assert r.ok and r.mismatches == 0
    assert abs(r.max_abs - 0.05) < 1e-4 and abs(r.max_rel - 0.0005) < 1e-5
    bad = compare_leaf(0, np.array([1.1, 100, 0, 1], np.float32), e, F32_4, 1e-3, 1e-3)
    assert not bad.ok and bad.mismatches == 2 and "NaN" in bad.note
    inf = compare_leaf(0, np.array([np.inf, 1, 1, 1], np.float32),
                       np.array([-np.inf, 1, 1, 1], np.float32), F32_4, 1, 1)
    assert not inf.ok and inf.mismatches == 1


def test_compare_leaf_integers_are_exact_and_shapes_must_match():
    s = Shape.parse("s32[3]")
    assert compare_leaf(0, np.array([1, 2, 3], np.int32), np.array([1, 2, 3], np.int32), s,
                        1e9, 1e9).ok
    r = compare_leaf(0, np.array([1, 2, 4], np.int32), np.array([1, 2, 3], np.int32), s,
                     1e9, 1e9)
    assert not r.ok and r.mismatches == 1 and r.max_abs == 1
    wrong = compare_leaf(0, np.zeros(2, np.int32), np.zeros(3, np.int32), s, 1, 1)
    assert not wrong.ok and "expected" in wrong.note
