"""simplify-while-loops: differential tests, and loops it must keep."""
from hlo_opt.api import load, parse_hlo
from passes.while_loop_simplifier import WhileLoopSimplifier
from tests.conftest import SAMPLES
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("while_loop_simplifier*.hlo", WhileLoopSimplifier)
test_real_modules = real_modules_test(WhileLoopSimplifier)


def test_ten_trip_loop_with_live_state_is_kept():
    m = load(str(SAMPLES / "while_loop.hlo"))
    assert not WhileLoopSimplifier().run(m)


def test_one_trip_loop_with_side_effect_is_kept():
    text = """HloModule m
%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %c = s32[] constant(1)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}
%body (b: (s32[], f32[4])) -> (s32[], f32[4]) {
  %b = (s32[], f32[4]) parameter(0)
  %j = s32[] get-tuple-element(%b), index=0
  %x = f32[4] get-tuple-element(%b), index=1
  %one = s32[] constant(1)
  %n = s32[] add(%j, %one)
  %log = f32[4] custom-call(%x), custom_call_target="log", custom_call_has_side_effect=true
  ROOT %t = (s32[], f32[4]) tuple(%n, %log)
}
ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%zero, %p)
  %w = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  ROOT %r = f32[4] get-tuple-element(%w), index=1
}
"""
    m = parse_hlo(text)
    assert not WhileLoopSimplifier().run(m)
