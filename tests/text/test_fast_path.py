"""The one-line fast path and the general scanner build the same module; canonical text
takes the fast path (a guard against silent slowdowns; no timings)."""
from __future__ import annotations

import re

import pytest

from hlo_opt.text import parser, patterns
from hlo_opt.text.parser import parse_hlo, parse_hlo_modules
from tests.conftest import corpus_files, sample_files
from tests.text.xla_syntax import MODULES

NEVER = re.compile(r"(?!)")


def _texts():
    texts = [p.read_text() for p in sample_files() + corpus_files()]
    return texts + list(MODULES.values())


def _general_only(monkeypatch):
    monkeypatch.setattr(parser, "FAST_INST_RE", NEVER)


def test_fast_and_general_paths_agree(monkeypatch):
    texts = _texts()
    fast = [[m.to_text() for m in parse_hlo_modules(t)] for t in texts]
    _general_only(monkeypatch)
    general = [[m.to_text() for m in parse_hlo_modules(t)] for t in texts]
    assert fast == general


def test_fast_and_general_paths_agree_on_errors(monkeypatch):
    from tests.text.test_errors import CASES
    from tests.text.test_grammar import GOOD

    def errors():
        out = []
        for old, new, _ in CASES:
            try:
                parse_hlo(GOOD.replace(old, new, 1), "e.hlo")
            except Exception as e:  # noqa: BLE001
                out.append(str(e))
        return out
    fast = errors()
    _general_only(monkeypatch)
    assert errors() == fast


def test_canonical_text_takes_the_fast_path(monkeypatch):
    printed = []
    for t in _texts():
        printed += [m.to_text() for m in parse_hlo_modules(t)]
    slow = []
    original = parser._Parser.parse_instruction

    def counting(self, pos, *args):
        slow.append(self.text[pos:self.text.find("\n", pos)])
        return original(self, pos, *args)
    monkeypatch.setattr(parser._Parser, "parse_instruction", counting)
    for text in printed:
        parse_hlo(text)
    # only a backend_config spanning lines (kept verbatim) or a value with spaces in it
    # (custom-call's `literal=f32[] 0.1`) go to the general scanner
    assert all(line.endswith("backend_config={") or " literal=" in line for line in slow), \
        [line for line in slow if not line.endswith("{")][:3]
    assert len(slow) < 30


@pytest.mark.parametrize("line", [
    "  %a = f32[2]{0} add(f32[2]{0} %p, f32[2]{0} %p)",
    "  a = f32[2] add(p, p)",
    "  ROOT %t = (f32[2]{0}, (s32[], f32[])) tuple(f32[2]{0} %p, (s32[], f32[]) %q)",
    "  %c = f32[2]{0} constant({1, 2})",
    '  %m = f32[2]{0} negate(f32[2]{0} %p), metadata={op_name="a, b" source_line=3}',
    "  %s = f32[1]{0} slice(f32[2]{0} %p), slice={[0:1]}",
])
def test_fast_regex_covers_common_lines(line):
    assert patterns.FAST_INST_RE.match(line + "\n")
