"""simplify-sorts (SortSimplifier): differential tests and the comparator rebuild."""
from hlo_opt.api import parse_hlo
from passes.simplify_sorts import SortSimplifier
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("simplify_sorts*.hlo", SortSimplifier)
test_real_modules = real_modules_test(SortSimplifier)


def test_operand_read_by_comparator_is_kept():
    text = """HloModule m
%lt (a: f32[], b: f32[], c: s32[], d: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = s32[] parameter(2)
  %d = s32[] parameter(3)
  ROOT %cmp = pred[] compare(%c, %d), direction=LT
}
ENTRY %main (k: f32[8], v: s32[8]) -> f32[8] {
  %k = f32[8] parameter(0)
  %v = s32[8] parameter(1)
  %s = (f32[8], s32[8]) sort(%k, %v), dimensions={0}, to_apply=%lt
  ROOT %sk = f32[8] get-tuple-element(%s), index=0
}
"""
    m = parse_hlo(text)
    assert not SortSimplifier().run(m)


def test_root_sort_is_left_alone():
    text = """HloModule m
%lt (a: f32[], b: f32[], c: s32[], d: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = s32[] parameter(2)
  %d = s32[] parameter(3)
  ROOT %cmp = pred[] compare(%a, %b), direction=LT
}
ENTRY %main (k: f32[8], v: s32[8]) -> (f32[8], s32[8]) {
  %k = f32[8] parameter(0)
  %v = s32[8] parameter(1)
  ROOT %s = (f32[8], s32[8]) sort(%k, %v), dimensions={0}, to_apply=%lt
}
"""
    assert not SortSimplifier().run(parse_hlo(text))
