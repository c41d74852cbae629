"""HLO text forms XLA's parser accepts beyond the canonical one: what they become, how they
print, and that they execute like their long forms."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import parse_hlo, verify
from hlo_opt.errors import HloParseError
from tests.text.xla_syntax import (ASYNC_SUGAR, INLINE_COMPUTATIONS, NESTED_OPERANDS,
                                   QUOTED_NAME, SIGNATURES)


def _execute(module, args):
    from hlo_opt.backends import execute
    return [np.asarray(x) for x in execute(module, args)]


def test_nested_operands_become_instructions_named_after_their_opcode():
    m = parse_hlo(NESTED_OPERANDS)
    verify(m)
    names = {i.name: i for i in m.entry.iter_instructions()}
    assert names["parameter"].opcode == "parameter" and names["parameter"].parameter_number == 1
    assert {"constant", "constant.1", "constant.2", "negate", "add"} <= set(names)
    assert names["p"].operands[1].literal.array.item() == 5
    out = _execute(m, [np.int32(3), np.arange(56, dtype=np.float32).reshape(1, 8, 1, 7)])
    assert out[1].item() is True and out[2].item() == -1.0
    assert out[0].shape == (8, 7)


def test_nested_operand_errors_are_located():
    with pytest.raises(HloParseError) as info:
        parse_hlo("HloModule m\nENTRY e {\n  ROOT a = f32[] add(f32[] constant(1), "
                  "f32[] negate(%nope))\n}\n", "n.hlo")
    assert info.value.line == 3 and "unknown operand '%nope'" in info.value.what
    assert "negate written in place" in info.value.what


def test_signature_forms():
    m = parse_hlo(SIGNATURES)
    verify(m)
    assert m.entry.name == "sigs" and m.entry.is_entry
    assert [c.name for c in m.computations] == ["neg", "sigs"]
    x = np.arange(4, dtype=np.float64).reshape(2, 2)
    np.testing.assert_array_equal(_execute(m, [x])[0], -x)


def test_inline_computations_are_named_like_xla():
    m = parse_hlo(INLINE_COMPUTATIONS)
    verify(m)
    assert sorted(c.name for c in m.computations) == ["_", "_.1", "e"]
    r, r2 = m.entry.root.operands[1], m.entry.root
    assert r.called[0].root.opcode == "add" and r2.called[0].root.opcode == "maximum"
    x = np.array([1, 5, 2, 3, 0, 0, 0, 0], np.float32)
    assert _execute(m, [x])[0].item() == 11.0


def test_quoted_module_name_prints_quoted():
    m = parse_hlo(QUOTED_NAME)
    assert m.name == "jit(f)/a b.c"
    text = m.to_text()
    assert text.startswith('HloModule "jit(f)/a b.c",')
    assert parse_hlo(text).name == m.name


def test_async_sugar_wraps_the_op_and_runs_like_it():
    m = parse_hlo(ASYNC_SUGAR)
    verify(m)
    starts = [i for i in m.entry.iter_instructions() if i.opcode == "async-start"]
    assert [s.called[0].root.opcode for s in starts] == [
        "call", "dynamic-slice", "dynamic-update-slice", "exponential"]
    assert starts[0].called[0].root.called[0].name == "callee"
    assert starts[3].called[0].execution_thread == "side"
    p = np.arange(4, dtype=np.float32)
    out = _execute(m, [p, np.int32(1), np.array([7, 8], np.float32)])
    np.testing.assert_array_equal(out[0], -p)
    np.testing.assert_array_equal(out[1], [1, 2])
    np.testing.assert_array_equal(out[2], [0, 7, 8, 3])
    np.testing.assert_allclose(out[3], np.exp(p), rtol=1e-6)


def test_async_sugar_printing_follows_the_flag():
    m = parse_hlo(ASYNC_SUGAR)
    plain = m.to_text()
    assert "call-start" not in plain and "async-start(" in plain and "%async_wrapped" in plain
    sugared = m.to_text(syntax_sugar_async_ops=True)
    assert "async_wrapped" not in sugared
    assert "call-start(f32[4]{0} %p), to_apply=%callee" in sugared
    assert "dynamic-slice-start(f32[4]{0} %p, s32[] %i), dynamic_slice_sizes={2}" in sugared
    assert "dynamic-update-slice-update(" in sugared and "exponential-done(" in sugared
    assert 'exponential-start(f32[4]{0} %p), async_execution_thread="side"' in sugared
    again = parse_hlo(sugared)
    assert again.to_text(syntax_sugar_async_ops=True) == sugared
    assert again.to_text() == parse_hlo(plain).to_text()


def test_sugared_start_needs_its_shape():
    with pytest.raises(HloParseError) as info:
        parse_hlo("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
                  "  ROOT s = f32[4] negate-start(p)\n}\n", "s.hlo")
    assert "needs its shape written out" in info.value.what and info.value.line == 4
