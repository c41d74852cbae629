"""The reference grammar (hlo.lark) against the corpus, the samples, XLA's syntax, and the
fast parser: it accepts every module the parser accepts and rejects the syntax errors the
parser rejects."""
from __future__ import annotations

import pytest

from hlo_opt.errors import HloParseError
from hlo_opt.text import reference
from hlo_opt.text.parser import parse_hlo, split_modules
from tests.conftest import corpus_files, require_corpus, sample_files
from tests.text.xla_syntax import MODULES


def _chunks(path):
    return [chunk for chunk, _ in split_modules(path.read_text())]


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_lark_accepts_corpus_module_and_its_printed_form(path):
    for chunk in _chunks(path):
        assert reference.accepts(chunk)
        assert reference.accepts(parse_hlo(chunk, path.name).to_text())


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_lark_accepts_samples(path):
    assert reference.accepts(path.read_text())


@pytest.mark.parametrize("name", sorted(MODULES))
def test_xla_syntax_accepted_by_both_and_round_trips(name):
    text = MODULES[name]
    assert reference.accepts(text)
    printed = parse_hlo(text, name).to_text()
    assert reference.accepts(printed)
    assert parse_hlo(printed, name).to_text() == printed


def test_corpus_is_there():
    require_corpus()
    assert sum(len(_chunks(p)) for p in corpus_files()) > len(corpus_files())


GOOD = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %x, f32[] %y)
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %c = f32[] constant(0)
  %r = f32[] reduce(f32[4]{0} %p, f32[] %c), dimensions={0}, to_apply=%add
  ROOT %b = f32[4]{0} broadcast(f32[] %r), dimensions={}, metadata={op_name="b"}
}
"""

# (what, replaced by): syntax errors; both the parser and the grammar reject them.
SYNTAX_ERRORS = [
    ("add(f32[] %x, f32[] %y)", "add(f32[] %x f32[] %y)"),
    ("add(f32[] %x, f32[] %y)", "add(f32[] %x, f32[] %y"),
    ("add(f32[] %x, f32[] %y)", "add(f32[] %x, , f32[] %y)"),
    ("add(f32[] %x, f32[] %y)", "add(f32[] %x, f32[] %y))"),
    ("%c = f32[] constant(0)", "%c f32[] constant(0)"),
    ("%c = f32[] constant(0)", "%c = f32[] constant(0) @"),
    ("%c = f32[] constant(0)", "%c = f32[] constant(0) /* open"),
    ("%p = f32[4]{0} parameter", "%p = f32[4{0} parameter"),
    ("%p = f32[4]{0} parameter", "%p = f32[x]{0} parameter"),
    ("%p = f32[4]{0} parameter", "%p = f32[4]{0 parameter"),
    ('metadata={op_name="b"}', 'metadata={op_name="b}'),
    ("dimensions={0}, to_apply", "dimensions={0}}, to_apply"),
    ("dimensions={0}, to_apply", "dimensions=, to_apply"),
    ("dimensions={0}, to_apply", "dimensions={0)}, to_apply"),
    ('metadata={op_name="b"}', 'metadata={op_name="b"},'),
    ("(p: f32[4]) -> f32[4] {", "(p: f32[4]) f32[4] {"),
    ("(p: f32[4]) -> f32[4] {", "(p f32[4] -> f32[4] {"),
    ("(p: f32[4]) -> f32[4] {", "(p: f32[4]) -> f32[4]"),
    ("  ROOT %s = f32[] add(f32[] %x, f32[] %y)\n}", "  ROOT %s = f32[] add(f32[] %x, f32[] %y)"),
    ("HloModule m,", "HloModule m,,"),
    ("HloModule m,", "HloModule"),
    ("ENTRY %main", "1234 ENTRY %main"),
    ("ENTRY %main", "ENTRY ENTRY %main"),
    ("ENTRY %main (p: f32[4]) -> f32[4] {", "ENTRY %main (p: f32[4]) -> f32[4] ("),
    ("}\n\nENTRY", "}, execution_thread=1\n\nENTRY"),
    ("to_apply=%add", "to_apply=%add'"),
    ("%c = f32[] constant(0)", "%c = f32[] constant({0)"),
    ("%c = f32[] constant(0)", "%c = f32[] constant(}0{)"),
    ("%c = f32[] constant(0)", "%c = f32[] constant({{0}, {1})"),
]

# Semantic errors: well formed for the grammar, rejected by the parser with its own message.
SEMANTIC_ERRORS = [
    ("constant(0)", "konstant(0)", "unknown opcode 'konstant'"),
    ("broadcast(f32[] %r)", "broadcast(f32[] %q)", "uses unknown operand '%q'"),
    ("%c = f32[]", "%p = f32[]", "instruction 'p' is defined twice"),
    ("%c = f32[] constant", "%c = f33[] constant", "unknown element type 'f33'"),
    ("%y = f32[] parameter(1)", "%y = f32[] parameter(2)", r"parameter\(1\) is missing"),
    ("to_apply=%add", "to_apply=%mul", "unknown computation '%mul'"),
    ("  %c = f32[] constant(0)", "  ROOT %c = f32[] constant(0)", "more than one ROOT"),
    ("dimensions={0}, to", "dimensions={0}, dimensions={0}, to", "'dimensions' is given twice"),
    ("%p = f32[4]{0} parameter", "%p = f32[4]{1,0} parameter", "does not match rank 1"),
    ("%p = f32[4]{0} parameter", "%p = parameter", "cannot infer the shape of 'p'"),
]


@pytest.mark.parametrize("old,new", SYNTAX_ERRORS, ids=lambda x: x[:18])
def test_syntax_errors_rejected_by_both(old, new):
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    with pytest.raises(HloParseError):
        parse_hlo(text, "bad.hlo")
    assert not reference.accepts(text)


@pytest.mark.parametrize("old,new,message", SEMANTIC_ERRORS, ids=lambda x: x[:18])
def test_semantic_errors_keep_the_parsers_message(old, new, message):
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    assert reference.accepts(text)
    with pytest.raises(HloParseError, match=message):
        parse_hlo(text, "bad.hlo")


def test_good_module_is_accepted_by_both():
    assert reference.accepts(GOOD)
    parse_hlo(GOOD)
