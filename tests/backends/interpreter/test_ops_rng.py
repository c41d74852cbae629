"""RNG: known-answer vectors for rng-bit-generator, and sanity of rng / counter state.

Known answers: Random123's published Threefry-2x32-20 and Philox-4x32-10 vectors, as used
by tensorflow/compiler/tests/stateful_random_ops_test.py, which runs them through XLA's
ThreeFryBitGenerator / PhiloxBitGenerator (TF's state is [counter..., key]; HLO's is
[key, counter...]).  The state-update cases come from the same test, and the [3,2] output
from a rng_bit_generator run on XLA:CPU printed in r-xla/anvil's documentation.
"""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.backends.interpreter.ops_rng import philox4x32, threefry2x32

from tests.support.heavy_helpers import StandInCtx, run

THREEFRY_KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
    ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
    ((0x243f6a88, 0x85a308d3), (0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0)),
]
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


def _u64(lo, hi):
    return (hi << 32) | lo


def _rbg(state, out_type, algorithm):
    text = f"""
HloModule r
ENTRY e {{
  s = u64[{len(state)}] parameter(0)
  ROOT r = (u64[{len(state)}], {out_type}) rng-bit-generator(s), algorithm={algorithm}
}}
"""
    return run(text, "r", [np.array(state, dtype=np.uint64)])


@pytest.mark.parametrize("ctr,key,want", THREEFRY_KAT)
def test_threefry_block_known_answers(ctr, key, want):
    x0, x1 = threefry2x32(ctr[0], ctr[1], key[0], key[1])
    assert (int(x0[0]), int(x1[0])) == want


@pytest.mark.parametrize("ctr,key,want", PHILOX_KAT)
def test_philox_block_known_answers(ctr, key, want):
    out = philox4x32(*ctr, *key)
    assert tuple(int(w[0]) for w in out) == want


@pytest.mark.parametrize("ctr,key,want", THREEFRY_KAT)
def test_rng_bit_generator_three_fry_known_answers(ctr, key, want):
    state = [_u64(*key), _u64(*ctr)]
    new_state, bits = _rbg(state, "u32[2]", "rng_three_fry")
    np.testing.assert_array_equal(bits, np.array(want, np.uint32))
    np.testing.assert_array_equal(new_state, [state[0], state[1] + 1 if state[1] < 2**64 - 1
                                              else 0])
    _, bits64 = _rbg(state, "u64[1]", "rng_three_fry")
    assert int(bits64[0]) == _u64(*want)


@pytest.mark.parametrize("ctr,key,want", PHILOX_KAT)
def test_rng_bit_generator_philox_known_answers(ctr, key, want):
    state = [_u64(*key), _u64(ctr[0], ctr[1]), _u64(ctr[2], ctr[3])]
    _, bits = _rbg(state, "u32[4]", "rng_philox")
    np.testing.assert_array_equal(bits, np.array(want, np.uint32))
    _, bits64 = _rbg(state, "u64[2]", "rng_philox")
    np.testing.assert_array_equal(bits64, [_u64(want[0], want[1]), _u64(want[2], want[3])])


def test_three_fry_state_update():
    key, counter = 0x1234, 57
    new_state, _ = _rbg([key, counter], "u32[46]", "rng_three_fry")
    np.testing.assert_array_equal(new_state, [key, counter + 23])   # (46 + 1) // 2
    new_state, _ = _rbg([key, counter], "u64[46]", "rng_three_fry")
    np.testing.assert_array_equal(new_state, [key, counter + 46])


def test_philox_state_update_and_carry():
    key, low, high = 0x1234, 57, 283
    new_state, _ = _rbg([key, low, high], "u32[47]", "rng_philox")
    np.testing.assert_array_equal(new_state, [key, low + 12, high])   # (47 + 3) // 4
    new_state, _ = _rbg([key, low, high], "u64[47]", "rng_philox")
    np.testing.assert_array_equal(new_state, [key, low + 24, high])   # (47 + 1) // 2
    low = 2**64 - 1
    new_state, _ = _rbg([key, low, high], "u32[47]", "rng_philox")
    np.testing.assert_array_equal(new_state, [key, 11, high + 1])
    new_state, _ = _rbg([key, low, high], "u64[47]", "rng_philox")
    np.testing.assert_array_equal(new_state, [key, 23, high + 1])


def test_three_fry_matrix_output_from_xla_cpu():
    new_state, bits = _rbg([0, 0], "u32[3,2]", "rng_three_fry")
    np.testing.assert_array_equal(new_state, [0, 3])
    printed = np.array([[1.7973e9, 2.5791e9], [1.3515e9, 3.2358e9], [1.6886e9, 4.2293e9]])
    np.testing.assert_allclose(bits.astype(np.float64), printed, rtol=0, atol=5e4)
    # the split dim is dim 1 (even): counter j gives row j, its two words the columns
    assert (int(bits[0, 0]), int(bits[0, 1])) == THREEFRY_KAT[0][2]


def test_three_fry_odd_shape_interleaves_along_the_largest_dim():
    _, bits = _rbg([7, 100], "u32[3,5]", "rng_three_fry")
    # no even dim: split the largest (dim 1, 5 -> 3 counters per row, 9 counters)
    x0, x1 = threefry2x32(np.arange(100, 109) & 0xffffffff, np.zeros(9), 7, 0)
    half = np.stack([x0.reshape(3, 3), x1.reshape(3, 3)], axis=-1).reshape(3, 6)[:, :5]
    np.testing.assert_array_equal(bits, half)


def test_narrow_outputs_truncate_the_32_bit_words():
    s32, b32 = _rbg([5, 9], "u32[4,6]", "rng_three_fry")
    s16, b16 = _rbg([5, 9], "u16[4,6]", "rng_three_fry")
    np.testing.assert_array_equal(s16, s32)
    np.testing.assert_array_equal(b16, (b32 & 0xffff).astype(np.uint16))
    _, p32 = _rbg([5, 9], "u32[7]", "rng_default")
    _, p8 = _rbg([5, 9], "u8[7]", "rng_philox")
    np.testing.assert_array_equal(p8, (p32 & 0xff).astype(np.uint8))


def test_philox_two_word_state_uses_the_key_as_counter_high_word():
    key, counter = 0x0123456789abcdef, 41
    new_state, bits = _rbg([key, counter], "u32[5]", "rng_default")
    words = philox4x32([counter, counter + 1], [0, 0], [key & 0xffffffff] * 2,
                       [key >> 32] * 2, key & 0xffffffff, key >> 32)
    expected = np.stack(words, axis=1).reshape(-1)[:5]
    np.testing.assert_array_equal(bits, expected)
    np.testing.assert_array_equal(new_state, [key, counter + 2])


def test_rng_get_and_update_state():
    text = """
HloModule r
ENTRY e {
  ROOT s = u64[2] rng-get-and-update-state(), delta=10
}
"""
    ctx = StandInCtx()
    first = run(text, "s", [], ctx=ctx)
    second = run(text, "s", [], ctx=ctx)
    np.testing.assert_array_equal(first, [0x7012395, 0])   # XLA's initial state
    np.testing.assert_array_equal(second, [0x7012395 + 10, 0])


RNG = """
HloModule r
ENTRY e {
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[{n}] rng(a, b), distribution={d}
}
"""


def _rng(t, n, d, a, b, ctx=None):
    text = RNG.replace("{t}", t).replace("{n}", str(n)).replace("{d}", d)
    dt = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "f16": np.float16}[t]
    return run(text, "r", [np.asarray(a, dt), np.asarray(b, dt)], ctx=ctx)


def test_rng_uniform_float_and_int_ranges():
    x = _rng("f32", 20000, "rng_uniform", -2.0, 3.0)
    assert x.min() >= -2.0 and x.max() < 3.0
    assert abs(x.mean() - 0.5) < 0.05 and abs(x.std() - 5 / np.sqrt(12)) < 0.05
    i = _rng("s32", 20000, "rng_uniform", -3, 4)
    assert set(np.unique(i).tolist()) == set(range(-3, 4))
    h = _rng("f16", 100, "rng_uniform", 0.0, 1.0)
    assert h.dtype == np.float16 and h.min() >= 0 and h.max() <= 1


def test_rng_normal_moments_and_determinism():
    x = _rng("f64", 20001, "rng_normal", 1.0, 2.0)
    assert abs(x.mean() - 1.0) < 0.06 and abs(x.std() - 2.0) < 0.06
    y = _rng("f64", 20001, "rng_normal", 1.0, 2.0)
    np.testing.assert_array_equal(x, y)  # fresh context, same seed: same values
    ctx = StandInCtx()
    a = _rng("f32", 8, "rng_normal", 0.0, 1.0, ctx=ctx)
    b = _rng("f32", 8, "rng_normal", 0.0, 1.0, ctx=ctx)
    assert not np.array_equal(a, b)  # the counter advanced between the two draws


def test_known_answers_through_the_real_evaluator():
    from tests.support.heavy_helpers import execute_or_skip
    execute = execute_or_skip()
    from hlo_opt.api import parse_hlo
    ctr, key, want = PHILOX_KAT[2]
    text = """
HloModule r
ENTRY e {
  s = u64[3] parameter(0)
  ROOT r = (u64[3], u32[4]) rng-bit-generator(s), algorithm=rng_philox
}
"""
    state = np.array([_u64(*key), _u64(ctr[0], ctr[1]), _u64(ctr[2], ctr[3])], np.uint64)
    new_state, bits = execute(parse_hlo(text), [state])
    np.testing.assert_array_equal(bits, np.array(want, np.uint32))
    np.testing.assert_array_equal(new_state, [state[0], state[1] + 1, state[2]])
