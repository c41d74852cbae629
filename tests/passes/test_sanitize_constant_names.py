"""sanitize-constant-names: only constants are renamed, names stay unique and valid."""
import re

from hlo_opt.api import parse_hlo
from passes.sanitize_constant_names import SanitizeConstantNames
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("sanitize_constant_names*.hlo", SanitizeConstantNames)
test_real_modules = real_modules_test(SanitizeConstantNames)


def test_names_are_identifiers_and_unique():
    text = """HloModule m
ENTRY %main (p: f32[2]) -> f32[2] {
  %p = f32[2] parameter(0)
  %c.1 = f32[2] constant({1, 2})
  %c_1 = f32[2] add(%p, %c.1)
  %c-1 = f32[2] constant({3, 4})
  ROOT %r = f32[2] add(%c_1, %c-1)
}
"""
    m = parse_hlo(text)
    before = {i.name for i in m.entry.instructions if i.opcode != "constant"}
    assert SanitizeConstantNames().run(m)
    names = [i.name for i in m.entry.instructions]
    assert len(names) == len(set(names))
    consts = [i.name for i in m.entry.instructions if i.opcode == "constant"]
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in consts)
    assert before <= set(names)
