"""rng-bit-generator-expander (RngBitGeneratorExpander): the Threefry/Philox computations
it emits give the interpreter's rng-bit-generator bits exactly, state included."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import verify
from passes.rng_bit_generator_expander import RngBitGeneratorExpander
from tests.support.expander_real_modules import MODULES, check_module
from tests.support.harness import check_pass, execute_or_xfail, load_text
from tests.support.lit_chunks import chunks

SHAPES = [(), (1,), (5,), (3, 5), (2, 3, 1), (7, 3), (6, 2, 5)]
TYPES = ["u32", "u64", "u16", "u8", "s32", "s64", "s16", "f32", "f64", "f16", "bf16"]
ALGORITHMS = [("rng_three_fry", 2), ("rng_philox", 2), ("rng_philox", 3)]


def rng_module(algorithm: str, words: int, et: str, dims) -> str:
    d = ",".join(map(str, dims))
    return f"""
HloModule m
ENTRY %e (s: u64[{words}]) -> (u64[{words}], {et}[{d}]) {{
  %s = u64[{words}] parameter(0)
  ROOT %r = (u64[{words}], {et}[{d}]) rng-bit-generator(%s), algorithm={algorithm}
}}"""


def states(words: int, seed: int):
    """Random states, plus counters about to wrap (the 128-bit carry and the u64 wrap)."""
    rng = np.random.default_rng(seed)
    out = [rng.integers(0, 2 ** 63, size=words, dtype=np.uint64) * np.uint64(2) + np.uint64(1)]
    wrap = out[0].copy()
    wrap[1] = np.uint64(2 ** 64 - 2)
    out.append(wrap)
    out.append(np.zeros(words, np.uint64))
    return out


def assert_same_bits(before, after):
    for state in states(before.entry.parameters[0].shape.dims[0], 0):
        expected = execute_or_xfail(before, [state])
        got = execute_or_xfail(after, [state])
        assert len(expected) == len(got) == 2
        for e, g in zip(expected, got):
            assert e.dtype == g.dtype and e.shape == g.shape
            assert e.tobytes() == g.tobytes(), f"bits differ for state {state}"


@pytest.mark.parametrize("algorithm,words", ALGORITHMS, ids=[f"{a}-u64[{w}]"
                                                             for a, w in ALGORITHMS])
@pytest.mark.parametrize("et", TYPES)
def test_bit_exact_with_the_interpreter(algorithm, words, et):
    for dims in SHAPES:
        before = load_text(rng_module(algorithm, words, et, dims))
        after = before.clone()
        assert RngBitGeneratorExpander().run(after)
        verify(after)
        ops = [i.opcode for i in after.instructions()]
        assert "rng-bit-generator" not in ops and ops.count("call") == 1
        assert_same_bits(before, after)


def test_structure_of_the_expansion():
    r = check_pass(load_text(rng_module("rng_three_fry", 2, "u32", (4, 6))),
                   "rng-bit-generator-expander")
    assert r.changed
    gen = r.module.entry.root.called[0]
    assert r.module.entry.root.opcode == "call" and gen.name == "rng"
    assert gen.parameters[0].name == "state"
    ops = [i.opcode for i in gen.instructions]
    assert ops.count("shift-left") == 20  # one rotation per Threefry round
    r = check_pass(load_text(rng_module("rng_philox", 3, "u32", (4, 6))),
                   "rng-bit-generator-expander")
    gen = r.module.entry.root.called[0]
    muls = [i for i in gen.instructions if i.opcode == "multiply"]
    assert len(muls) == 20  # two 32x32->64 products per Philox round, 10 rounds


def test_one_generator_per_shape_and_algorithm():
    text = """
HloModule m
ENTRY %e (s: u64[2], t: u64[2]) -> (u32[8], u32[8], u32[3], u32[8]) {
  %s = u64[2] parameter(0)
  %t = u64[2] parameter(1)
  %a = (u64[2], u32[8]) rng-bit-generator(%s), algorithm=rng_philox
  %b = (u64[2], u32[8]) rng-bit-generator(%t), algorithm=rng_philox
  %c = (u64[2], u32[3]) rng-bit-generator(%t), algorithm=rng_philox
  %d = (u64[2], u32[8]) rng-bit-generator(%t), algorithm=rng_three_fry
  %a1 = u32[8] get-tuple-element(%a), index=1
  %b1 = u32[8] get-tuple-element(%b), index=1
  %c1 = u32[3] get-tuple-element(%c), index=1
  %d1 = u32[8] get-tuple-element(%d), index=1
  ROOT %r = (u32[8], u32[8], u32[3], u32[8]) tuple(%a1, %b1, %c1, %d1)
}"""
    before = load_text(text)
    after = before.clone()
    assert RngBitGeneratorExpander().run(after)
    verify(after)
    calls = [i for i in after.instructions() if i.opcode == "call"]
    assert len(calls) == 4 and len({c.called[0].name for c in calls}) == 3
    s, t = states(2, 1)[:2]
    for e, g in zip(execute_or_xfail(before, [s, t]), execute_or_xfail(after, [s, t])):
        assert e.tobytes() == g.tobytes()


def test_state_threaded_through_two_generators():
    """The second generator runs on the state the first returns."""
    text = """
HloModule m
ENTRY %e (s: u64[2]) -> (u64[2], u32[5], u32[5]) {
  %s = u64[2] parameter(0)
  %a = (u64[2], u32[5]) rng-bit-generator(%s), algorithm=rng_three_fry
  %s1 = u64[2] get-tuple-element(%a), index=0
  %b = (u64[2], u32[5]) rng-bit-generator(%s1), algorithm=rng_three_fry
  %s2 = u64[2] get-tuple-element(%b), index=0
  %a1 = u32[5] get-tuple-element(%a), index=1
  %b1 = u32[5] get-tuple-element(%b), index=1
  ROOT %r = (u64[2], u32[5], u32[5]) tuple(%s2, %a1, %b1)
}"""
    before = load_text(text)
    after = before.clone()
    assert RngBitGeneratorExpander().run(after)
    state = states(2, 3)[0]
    expected = execute_or_xfail(before, [state])
    got = execute_or_xfail(after, [state])
    for e, g in zip(expected, got):
        assert e.tobytes() == g.tobytes()
    assert not np.array_equal(got[1], got[2])  # the counter advanced between the two


def test_default_algorithm_option():
    """rng_default follows ``default_algorithm``: with three_fry it gives the bits of an
    explicit rng_three_fry generator."""
    default = load_text(rng_module("rng_default", 2, "u32", (3, 4)))
    three_fry = load_text(rng_module("rng_three_fry", 2, "u32", (3, 4)))
    after = default.clone()
    assert RngBitGeneratorExpander(default_algorithm="three_fry").run(after)
    assert_same_bits(three_fry, after)
    with pytest.raises(ValueError):
        RngBitGeneratorExpander(default_algorithm="mersenne")


@pytest.mark.parametrize("algorithm,words,et", [("rng_three_fry", 3, "u32"),
                                                ("rng_philox", 4, "u32"),
                                                ("rng_philox", 2, "pred"),
                                                ("rng_philox", 2, "c64")])
def test_states_and_types_the_generators_cannot_take_are_left(algorithm, words, et):
    r = check_pass(load_text(rng_module(algorithm, words, et, (4,))),
                   "rng-bit-generator-expander", execute=False)
    assert not r.changed


# ---- the FileCheck inputs -----------------------------------------------------------------
LIT = chunks("rng_bit_generator_expander.hlo")


@pytest.mark.parametrize("chunk", LIT, ids=[c.id for c in LIT])
def test_lit_inputs_are_bit_exact(chunk):
    before = load_text(chunk.text)
    after = before.clone()
    assert RngBitGeneratorExpander().run(after)
    verify(after)
    assert_same_bits(before, after)


def test_lit_file_present():
    assert LIT


# ---- every sample and corpus module -------------------------------------------------------
@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module(mid, text, fixture):
    out = check_module(text, RngBitGeneratorExpander, fixture, exact=True)
    assert out.changed == ("rng-bit-generator(" in text)
