"""Parse errors: exact file:line:col, the message in words, the offending line and a caret;
right line numbers after `// -----` splits and in CRLF files."""
from __future__ import annotations

import pytest

from hlo_opt.errors import escape_control, HloParseError
from hlo_opt.text.parser import parse_hlo, parse_hlo_modules
from tests.text.test_grammar import GOOD

# (replace, by, "line:col: message")
CASES = [
    # syntax errors: located and worded by the reference grammar
    ("add(f32[] %x, f32[] %y)", "add(f32[] %x f32[] %y)", "6:32: expected ',' or ')'"),
    ("add(f32[] %x, f32[] %y)", "add(f32[] %x, f32[] %y", "7:1: expected ',' or ')'"),
    ("add(f32[] %x, f32[] %y)", "add(f32[] %x, , f32[] %y)", "6:33: expected an operand"),
    ("%c = f32[] constant(0)", "%c f32[] constant(0)",
     "11:3: expected ',', '}' or an instruction ('name = shape opcode(...)')"),
    ("%p = f32[4]{0} parameter", "%p = f32[4{0} parameter", "10:13: expected ',' or ']'"),
    ("%p = f32[4]{0} parameter", "%p = f32[x]{0} parameter",
     "10:12: expected ']', '<=', '?' or an integer"),
    ("%p = f32[4]{0} parameter", "%p = f32[4]{0 parameter", "10:17: expected ',', '}' or ':'"),
    ('metadata={op_name="b"}', 'metadata={op_name="b}', "13:77: unterminated string"),
    ("%c = f32[] constant(0)", "%c = f32[] constant(0) /* open",
     "11:26: unterminated '/*' comment"),
    ("dimensions={0}, to_apply", "dimensions=, to_apply", "12:57: expected an attribute value"),
    ('metadata={op_name="b"}', 'metadata={op_name="b"},', "14:1: expected an attribute 'name=value'"),
    ("(p: f32[4]) -> f32[4] {", "(p: f32[4]) f32[4] {", "9:25: expected '->'"),
    ("HloModule m,", "HloModule m,,", "1:13: expected an attribute 'name=value'"),
    ("ENTRY %main", "1234 ENTRY %main", "9:1: expected ',', a computation or the end of the input"),
    ("  ROOT %s = f32[] add(f32[] %x, f32[] %y)\n}", "  ROOT %s = f32[] add(f32[] %x, f32[] %y)",
     "8:1: expected ',', '}' or an instruction ('name = shape opcode(...)')"),
    ("%c = f32[] constant(0)", "%c = f32[] constant(0) \x01",
     "11:26: unexpected character '\\x01'; expected ',', '}' or an instruction "
     "('name = shape opcode(...)')"),
    # semantic errors: the parser's own words and place
    ("constant(0)", "konstant(0)", "11:14: unknown opcode 'konstant'"),
    ("broadcast(f32[] %r)", "broadcast(f32[] %q)",
     "13:39: instruction 'b' uses unknown operand '%q'"),
    ("%c = f32[]", "%p = f32[]", "11:4: instruction 'p' is defined twice"),
    ("%c = f32[] constant", "%c = f33[] constant", "11:8: unknown element type 'f33'"),
    ("%y = f32[] parameter(1)", "%y = f32[] parameter(2)",
     "5:4: parameter numbers of 'add' must be 0...1; parameter(1) is missing"),
    ("%y = f32[] parameter(1)", "%y = f32[] parameter(0)",
     "5:4: parameter number 0 is used twice in 'add'"),
    ("to_apply=%add", "to_apply=%mul", "12:71: unknown computation '%mul' in to_apply="),
    ("  %c = f32[] constant(0)", "  ROOT %c = f32[] constant(0)",
     "13:3: more than one ROOT in a computation"),
    ("dimensions={0}, to", "dimensions={0}, dimensions={0}, to",
     "12:62: attribute 'dimensions' is given twice"),
    ("%p = f32[4]{0} parameter", "%p = f32[4]{1,0} parameter",
     "10:14: layout {1,0} does not match rank 1"),
    # a constant whose literal does not fit its shape (XLA's parser rejects it)
    ("%c = f32[] constant(0)", "%c = f32[] constant(garbage)",
     "11:23: constant literal does not fit f32[]: bad number 'garbage'"),
    ("%c = f32[] constant(0)", "%c = s8[] constant(300)",
     "11:22: constant literal does not fit s8[]: value 300 is out of range for s8 [-128, 127]"),
    ("%c = f32[] constant(0)", "%c = f16[] constant(1e5)",
     "11:23: constant literal does not fit f16[]: value 100000 is out of range for f16 "
     "(|value| <= 65504)"),
    ("%c = f32[] constant(0)", "%c = f32[2] constant({1, 2, 3})",
     "11:24: constant literal does not fit f32[2]: literal's nesting does not match shape "
     "f32[2] (expected 1 level(s) of braces of sizes [2])"),
    ("%c = f32[] constant(0)", "%c = f32[] constant({0})",
     "11:23: constant literal does not fit f32[]: a literal of shape f32[] is one value, "
     "without braces"),
    ("%c = f32[] constant(0)", "%c =\n    f32[] constant(nope)",
     "12:20: constant literal does not fit f32[]: bad number 'nope'"),
    ("%r = f32[] reduce(f32[4]{0} %p, f32[] %c)", "%r = f32[] reduce(f32[4]{0} %p, s8[] constant(999))",
     "12:49: constant literal does not fit s8[]: value 999 is out of range for s8 [-128, 127]"),
]


@pytest.mark.parametrize("old,new,expected", CASES, ids=[c[2][:40] for c in CASES])
def test_error_location_and_message(old, new, expected):
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    with pytest.raises(HloParseError) as info:
        parse_hlo(text, "bad.hlo")
    err = info.value
    assert f"{err.line}:{err.column}: {err.what}" == expected
    lines = str(err).split("\n")
    assert lines[0] == f"bad.hlo:{expected.split(': ', 1)[0]}: error: {err.what}"
    assert lines[1] == escape_control(text.split("\n")[err.line - 1])  # no raw control bytes
    assert lines[2] == " " * (err.column - 1) + "^"


def test_no_traceback_chain():
    with pytest.raises(HloParseError) as info:
        parse_hlo("e { x = f32[] add(", "t.hlo")
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_line_numbers_after_split_markers():
    second = GOOD.replace("%c = f32[] constant(0)", "%c = f32[] konstant(0)")
    text = GOOD + "// -----\n" + GOOD + "\n// -----\n\n" + second
    with pytest.raises(HloParseError) as info:
        parse_hlo_modules(text, "split.hlo")
    err = info.value
    assert err.line == text.split("\n").index("  %c = f32[] konstant(0)") + 1
    assert err.column == 14
    assert err.source_line == "  %c = f32[] konstant(0)"


def test_syntax_error_line_after_split_marker():
    bad = GOOD.replace("add(f32[] %x, f32[] %y)", "add(f32[] %x f32[] %y)")
    text = GOOD + "// -----\n" + bad
    with pytest.raises(HloParseError) as info:
        parse_hlo_modules(text, "split.hlo")
    err = info.value
    assert (err.line, err.column, err.what) == (GOOD.count("\n") + 1 + 6, 32,
                                                "expected ',' or ')'")


def test_crlf_file_positions():
    text = GOOD.replace("constant(0)", "konstant(0)").replace("\n", "\r\n")
    with pytest.raises(HloParseError) as info:
        parse_hlo(text, "crlf.hlo")
    assert (info.value.line, info.value.column) == (11, 14)
    assert info.value.source_line.rstrip("\r") == "  %c = f32[] konstant(0)"
    assert "\r" not in str(info.value)


def test_crlf_syntax_error_positions():
    text = GOOD.replace("add(f32[] %x, f32[] %y)", "add(f32[] %x f32[] %y)").replace("\n", "\r\n")
    with pytest.raises(HloParseError) as info:
        parse_hlo(text, "crlf.hlo")
    assert (info.value.line, info.value.column, info.value.what) == (6, 32, "expected ',' or ')'")


def test_error_after_comment_keeps_columns():
    text = GOOD.replace("  %c = f32[] constant(0)", "  /* a */ %c = f32[] konstant(0) // x")
    with pytest.raises(HloParseError) as info:
        parse_hlo(text, "c.hlo")
    assert (info.value.line, info.value.column) == (11, 22)


def test_omitted_shape_that_cannot_be_inferred():
    text = GOOD.replace("%c = f32[] constant(0)", "%c = custom-call(), custom_call_target=\"x\"")
    with pytest.raises(HloParseError, match=r"cannot infer the shape of 'c' .*; write the shape"):
        parse_hlo(text, "t.hlo")


def test_lark_reads_only_the_text_near_a_syntax_error(monkeypatch):
    from hlo_opt.text import reference
    lines = ["ENTRY %e (p: f32[4]) -> f32[4] {", "  %p.0 = f32[4]{0} parameter(0)"]
    lines += [f"  %p.{i} = f32[4]{{0}} negate(f32[4]{{0}} %p.{i - 1})" for i in range(1, 3000)]
    lines += ["  ROOT %bad = f32[4]{0} negate(f32[4]{0} %p.5 f32[4]{0} %p.6)", "}"]
    text = "\n".join(lines) + "\n"
    starts = []
    real = reference.diagnose

    def spy(text, start=0, *args, **kwargs):
        starts.append(start)
        return real(text, start, *args, **kwargs)
    monkeypatch.setattr(reference, "diagnose", spy)
    with pytest.raises(HloParseError) as info:
        parse_hlo(text, "big.hlo")
    assert (info.value.line, info.value.column, info.value.what) == \
        (3002, 47, "expected ',' or ')'")
    assert starts and len(text) - starts[0] < 200  # from the instruction before, not line 1
