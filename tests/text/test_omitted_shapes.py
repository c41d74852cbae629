"""Instructions written without a shape get it from shape inference (callees first)."""
from __future__ import annotations

import pytest

from hlo_opt.errors import HloParseError
from hlo_opt.text.parser import parse_hlo

TEXT = """HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = add(x, y)
}
callee {
  a = f32[4] parameter(0)
  ROOT n = negate(a)
}
ENTRY e {
  p = f32[4]{0} parameter(0)
  c = f32[] constant(0)
  r = reduce(p, c), dimensions={0}, to_apply=add
  k = call(p), to_apply=callee
  cmp = compare(p, k), direction=LT
  t = tuple(r, k, cmp)
  ROOT g = get-tuple-element(t), index=2
}
"""


def test_shapes_are_inferred():
    m = parse_hlo(TEXT)
    shapes = {i.name: i.shape.to_text() for c in m.computations for i in c.instructions}
    assert shapes["s"] == "f32[]"
    assert shapes["n"] == "f32[4]{0}"
    assert shapes["r"] == "f32[]"
    assert shapes["k"] == "f32[4]{0}"
    assert shapes["cmp"] == "pred[4]{0}"
    assert shapes["t"] == "(f32[], f32[4]{0}, pred[4]{0})"
    assert shapes["g"] == "pred[4]{0}"
    printed = m.to_text()
    assert parse_hlo(printed).to_text() == printed


def test_operand_defined_later_is_inferred_in_order():
    m = parse_hlo("e {\n ROOT b = negate(a)\n a = f32[3] parameter(0)\n}\n")
    assert m.entry.root.shape.to_text() == "f32[3]{0}"


@pytest.mark.parametrize("line,why", [
    ("ROOT q = custom-call(p), custom_call_target=\"x\"", "cannot infer the shape of 'q'"),
    ("ROOT q = add(p, z)", "cannot infer the shape of 'q'"),
    ("ROOT q = get-tuple-element(p), index=0", "cannot infer the shape of 'q'"),
])
def test_inference_failure_is_a_parse_error_at_the_instruction(line, why):
    text = f"e {{\n  p = f32[4] parameter(0)\n  z = s32[4] parameter(1)\n  {line}\n}}\n"
    with pytest.raises(HloParseError, match=why) as info:
        parse_hlo(text, "t.hlo")
    assert (info.value.line, info.value.column) == (4, 8)
    assert "write the shape out" in info.value.what
