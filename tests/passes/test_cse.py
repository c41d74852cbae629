"""cse (HloCSE)."""
from __future__ import annotations

from tests.support.harness import check_pass, load_text


def names(module, comp=None):
    return {i.name for i in (comp or module.entry).instructions}


def test_merges_identical_and_commutative():
    m = load_text("""
HloModule m
ENTRY %e (p: f32[4], q: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %p = f32[4] parameter(0)
  %q = f32[4] parameter(1)
  %a1 = f32[4] add(%p, %q)
  %a2 = f32[4] add(%q, %p)
  %s1 = f32[4] subtract(%p, %q)
  %s2 = f32[4] subtract(%q, %p)
  %n1 = f32[4] negate(%a1), metadata={op_name="one"}
  %n2 = f32[4] negate(%a2), metadata={op_name="two"}
  ROOT %t = (f32[4], f32[4], f32[4], f32[4]) tuple(%n1, %n2, %s1, %s2)
}""")
    r = check_pass(m, "cse")
    assert r.changed
    assert names(r.module) == {"p", "q", "a1", "s1", "s2", "n1", "t"}
    root = r.module.entry.root
    assert root.operands[0] is root.operands[1]
    assert not check_pass(r.module, "cse").changed


def test_constants_by_value_and_shape():
    m = load_text("""
HloModule m
ENTRY %e (p: f32[2,2]) -> (f32[2,2], f32[2,2], f32[2,2], f32[2,2], s32[]) {
  %p = f32[2,2] parameter(0)
  %c1 = f32[2,2]{1,0} constant({{1, 2}, {3, 4}})
  %c2 = f32[2,2]{1,0} constant({ {1.0, 2.0}, {3.0, 4.0} })
  %c3 = f32[2,2]{0,1} constant({{1, 2}, {3, 4}})
  %m1 = f32[2,2] multiply(%p, %c1)
  %m2 = f32[2,2] multiply(%p, %c2)
  %m3 = f32[2,2] multiply(%p, %c3)
  %i1 = s32[] constant(1)
  ROOT %t = (f32[2,2], f32[2,2], f32[2,2], f32[2,2], s32[]) tuple(%m1, %m2, %m3, %c3, %i1)
}""")
    r = check_pass(m, "cse")
    kept = names(r.module)
    assert "c2" not in kept and "m2" not in kept
    assert {"c1", "c3", "m3"} <= kept  # another layout is another constant


def test_elided_constants_and_side_effects_not_merged():
    m = load_text("""
HloModule m
ENTRY %e (p: f32[4]) -> (f32[16], f32[16], f32[4], f32[4]) {
  %p = f32[4] parameter(0)
  %big1 = f32[16] constant({...})
  %big2 = f32[16] constant({...})
  %zero = f32[] constant(0)
  %one = f32[] constant(1)
  %r1 = f32[4] rng(%zero, %one), distribution=rng_uniform
  %r2 = f32[4] rng(%zero, %one), distribution=rng_uniform
  ROOT %t = (f32[16], f32[16], f32[4], f32[4]) tuple(%big1, %big2, %r1, %r2)
}""")
    r = check_pass(m, "cse", execute=False)
    assert not r.changed


def test_called_computations_compared_structurally():
    m = load_text("""
HloModule m
%sum1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%sum2 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %z = f32[] add(%x, %y)
}
%max (u: f32[], v: f32[]) -> f32[] {
  %u = f32[] parameter(0)
  %v = f32[] parameter(1)
  ROOT %w = f32[] maximum(%u, %v)
}
ENTRY %e (p: f32[8]) -> (f32[], f32[], f32[]) {
  %p = f32[8] parameter(0)
  %init = f32[] constant(0)
  %r1 = f32[] reduce(%p, %init), dimensions={0}, to_apply=%sum1
  %r2 = f32[] reduce(%p, %init), dimensions={0}, to_apply=%sum2
  %r3 = f32[] reduce(%p, %init), dimensions={0}, to_apply=%max
  ROOT %t = (f32[], f32[], f32[]) tuple(%r1, %r2, %r3)
}""")
    r = check_pass(m, "cse")
    assert names(r.module) == {"p", "init", "r1", "r3", "t"}


def test_identical_iotas_count_as_one_operand():
    m = load_text("""
HloModule m
ENTRY %e (p: s32[4]) -> (s32[4], s32[4]) {
  %p = s32[4] parameter(0)
  %i1 = s32[4] iota(), iota_dimension=0
  %i2 = s32[4] iota(), iota_dimension=0
  %a1 = s32[4] add(%p, %i1)
  %a2 = s32[4] add(%p, %i2)
  %m = s32[4] multiply(%i1, %i2)
  ROOT %t = (s32[4], s32[4]) tuple(%a1, %a2)
}""")
    r = check_pass(m, "cse")
    assert "a2" not in names(r.module)


def test_control_dependencies_block_merging():
    m = load_text("""
HloModule m
ENTRY %e (p: f32[4]) -> (f32[4], f32[4]) {
  %p = f32[4] parameter(0)
  %a1 = f32[4] negate(%p)
  %a2 = f32[4] negate(%p), control-predecessors={%a1}
  ROOT %t = (f32[4], f32[4]) tuple(%a1, %a2)
}""")
    assert not check_pass(m, "cse").changed


def test_every_computation_is_processed():
    m = load_text("""
HloModule m
%body (v: f32[4]) -> f32[4] {
  %v = f32[4] parameter(0)
  %x = f32[4] exponential(%v)
  %y = f32[4] exponential(%v)
  ROOT %s = f32[4] add(%x, %y)
}
ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  ROOT %c = f32[4] call(%p), to_apply=%body
}""")
    r = check_pass(m, "cse")
    body = r.module.computation("body")
    assert names(r.module, body) == {"v", "x", "s"}


def test_scalar_constants_compare_by_exact_value():
    m = load_text("""
HloModule m
ENTRY %e () -> (f32[], f32[], f32[], f32[], s32[], s32[], pred[], pred[]) {
  %z1 = f32[] constant(0)
  %z2 = f32[] constant(-0)
  %n1 = f32[] constant(nan)
  %n2 = f32[] constant(nan)
  %i1 = s32[] constant(7)
  %i2 = s32[] constant(7)
  %b1 = pred[] constant(true)
  %b2 = pred[] constant(1)
  ROOT %t = (f32[], f32[], f32[], f32[], s32[], s32[], pred[], pred[]) tuple(%z1, %z2, %n1, %n2, %i1, %i2, %b1, %b2)
}""")
    r = check_pass(m, "cse")
    assert names(r.module) == {"z1", "z2", "n1", "i1", "b1", "t"}  # 0.0 and -0.0 differ
