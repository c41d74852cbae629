"""The table of opcode facts (hlo_opt/ir/opcodes.py) is complete: every opcode has a row,
a shape rule and an interpreter handler (or is listed as not interpreted yet), and every
fact set names only real opcodes."""
from __future__ import annotations

from hlo_opt.backends.interpreter import FAST, HANDLERS
from hlo_opt.ir import opcodes as o
from hlo_opt.shape_inference import RULES

FACT_SETS = {
    "ELEMENTWISE": o.ELEMENTWISE, "SIDE_EFFECT_ALWAYS": o.SIDE_EFFECT_ALWAYS,
    "SIDE_EFFECT_POSSIBLE": o.SIDE_EFFECT_POSSIBLE, "IMPURE": o.IMPURE,
    "TRANSCENDENTAL": o.TRANSCENDENTAL, "FREE": o.FREE,
    "NEVER_EXPENSIVE": o.NEVER_EXPENSIVE, "BATCHABLE": o.BATCHABLE,
    "EMITTER_FUSIBLE": o.EMITTER_FUSIBLE, "NOT_INTERPRETED": o.NOT_INTERPRETED,
}


def test_every_opcode_has_a_row():
    assert sorted(o.TABLE) == sorted(o.OPCODES)
    for name, row in o.TABLE.items():
        assert row.name == name and (row.arity, row.category) == o.OPCODES[name]


def test_every_fact_names_real_opcodes():
    for what, names in FACT_SETS.items():
        assert set(names) <= set(o.OPCODES), f"{what}: {sorted(set(names) - set(o.OPCODES))}"


def test_every_opcode_has_a_shape_rule():
    assert sorted(set(o.OPCODES) - set(RULES)) == []
    assert sorted(set(RULES) - set(o.OPCODES)) == []


def test_every_opcode_has_an_interpreter_handler_or_says_why_not():
    handled = set(HANDLERS) | set(FAST)
    assert sorted(set(o.OPCODES) - handled) == sorted(o.NOT_INTERPRETED)
    assert sorted(handled - set(o.OPCODES)) == []


def test_rows_agree_with_the_sets():
    row = o.TABLE["tanh"]
    assert row.elementwise and row.transcendental and row.side_effect == "never"
    assert o.TABLE["send"].side_effect == "always" and o.TABLE["send"].impure
    assert o.TABLE["all-reduce"].side_effect == "possible"
    assert not o.TABLE["shuffle"].interpreted
