"""Mutated corpus text: the parser raises HloParseError or returns a module, nothing else.

Mutations delete, insert and duplicate characters and whole tokens, and truncate; the
inserted material is what breaks parsers (brackets, quotes, comment starts, '%', '=',
digits, separators).  A module that parses must also print and parse back identically.
"""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hlo_opt.errors import HloParseError
from hlo_opt.text.parser import parse_hlo, parse_hlo_modules
from tests.conftest import corpus_files, sample_files
from tests.text.xla_syntax import MODULES

_TOKEN_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%\w.\-]+|\S')
_NASTY = ["(", ")", "{", "}", "[", "]", '"', "/*", "*/", "//", "%", "=", ",", ":", "->",
          "<=", "\n", "\r\n", " ", "\t", "0", "-1", "1e9", "ROOT ", "ENTRY ", "HloModule x",
          "// -----\n", "f32[]", "(", "x = f32[] add(", "{...}", "\\", "'", "@", "\x00",
          "é", "9" * 30, "((((((((", "}}}}", "{" * 200, "(" * 300]


def _sources() -> list[str]:
    texts = [p.read_text() for p in sample_files()]
    texts += list(MODULES.values())
    corpus = corpus_files()
    texts += [p.read_text() for p in corpus[::7]]  # a spread of the corpus, kept small
    # keep inputs small so that each example is cheap
    return [t for t in texts if len(t) < 20_000]


SOURCES = _sources()


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(SOURCES))
    tokens = [m.span() for m in _TOKEN_RE.finditer(text)]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["del_char", "ins", "dup_char", "del_tok", "dup_tok",
                                     "swap_tok", "truncate", "ins_tok"]))
        n = len(text)
        if n == 0:
            break
        i = draw(st.integers(0, n - 1))
        if kind == "del_char":
            text = text[:i] + text[i + 1:]
        elif kind == "ins":
            text = text[:i] + draw(st.sampled_from(_NASTY)) + text[i:]
        elif kind == "dup_char":
            text = text[:i] + text[i] + text[i:]
        elif kind == "truncate":
            text = text[:i]
        else:
            tokens = [m.span() for m in _TOKEN_RE.finditer(text)]
            if not tokens:
                continue
            a, b = tokens[draw(st.integers(0, len(tokens) - 1))]
            if kind == "del_tok":
                text = text[:a] + text[b:]
            elif kind == "dup_tok":
                text = text[:b] + " " + text[a:b] + text[b:]
            elif kind == "ins_tok":
                c, d = tokens[draw(st.integers(0, len(tokens) - 1))]
                text = text[:a] + text[c:d] + text[a:]
            else:  # swap with the next token
                k = tokens.index((a, b))
                if k + 1 < len(tokens):
                    c, d = tokens[k + 1]
                    text = text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
    return text


def _check(text: str) -> None:
    for parse in (lambda t: [parse_hlo(t, "fuzz.hlo")], lambda t: parse_hlo_modules(t, "f")):
        try:
            modules = parse(text)
        except HloParseError as e:
            assert e.line >= 1 and e.column >= 1, str(e)
            assert str(e).startswith(f"{e.filename}:{e.line}:{e.column}: error: ")
            continue
        for m in modules:  # what parses must print and parse back
            printed = m.to_text()
            assert parse_hlo(printed, "printed").to_text() == printed


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutations_raise_only_parse_errors(text):
    _check(text)


@pytest.mark.parametrize("text", [
    "", " ", "\n", "HloModule", "HloModule m", "HloModule m,", "ENTRY", "ENTRY e {", "e {}",
    "e { x = f32[] parameter(0) ", "e { x = }", "e { x = f32[ }", "e { x = (((( }",
    "e { x = f32[<=x] parameter(0) }", "e { x = f32[<=] parameter(0) }",
    "e { x = f32[99999999999999999999] parameter(0) }", "e { x = f32[] parameter(-1) }",
    "e { x = f32[] parameter(0x1) }", "e { x = f32[2]{0,1} parameter(0) }",
    "e { x = f32[] parameter(0), metadata={\"unterminated} }", "/* never closed",
    "e { x = " + "(" * 5000 + " }", "e { x = f32[] constant(" + "{" * 5000 + ") }",
    "e { x = f32[] add(), dimensions={0}} }", "e { x = f32[] tuple(x) }",
    "e { x = tuple(y) \n y = tuple(x) }", "e { x = f32[] custom-call() \n ROOT y = add(x, x) }",
    "e { ROOT y = add(x, x) }", "e {\n x = f32[] parameter(0)\n y = reduce(x, x), to_apply=e\n}",
    "e { x = f32[] parameter(0), control-predecessors={%nope} }",
    "a { x = f32[] parameter(0) }\nb { y = f32[] call(), to_apply=c }",
    "e { x = f32[] parameter(0) }, execution_thread=",
    "e {\n x = bf16[2,3]{1,0:T(2,128),1)} parameter(0)\n}",
    "e {\n x = f32[2] {1,0} parameter(0)\n}", "e {\n x = f32[2] {0} parameter(0)\n}",
])
def test_edge_inputs_raise_only_parse_errors(text):
    _check(text)
