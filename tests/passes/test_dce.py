"""dce (HloDCE)."""
from __future__ import annotations

from tests.support.harness import check_pass, load_text


def opcodes(module, comp=None):
    comp = comp or module.entry
    return sorted(i.opcode for i in comp.instructions)


def names(module, comp=None):
    return {i.name for i in (comp or module.entry).instructions}


def test_removes_dead_chains_keeps_parameters():
    m = load_text("""
HloModule m
ENTRY %e (p: f32[4], unused: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %unused = f32[4] parameter(1)
  %a = f32[4] add(%p, %p)
  %b = f32[4] multiply(%a, %a)
  %c = f32[4] negate(%b)
  ROOT %r = f32[4] abs(%p)
}""")
    r = check_pass(m, "dce")
    assert r.changed
    assert names(r.module) == {"p", "unused", "r"}
    assert not check_pass(r.module, "dce").changed  # idempotent


def test_keeps_side_effects_and_control_edges():
    m = load_text("""
HloModule m
ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %log = f32[4] custom-call(%p), custom_call_target="log", custom_call_has_side_effect=true
  %pure_cc = f32[4] custom-call(%p), custom_call_target="pure"
  %tok = token[] after-all()
  %out = token[] outfeed(%p, %tok)
  %zero = f32[] constant(0)
  %one = f32[] constant(1)
  %rand = f32[4] rng(%zero, %one), distribution=rng_uniform
  %ar = f32[4] all-reduce(%p), channel_id=1, replica_groups={}, to_apply=%sum
  %ar_spmd = f32[4] all-reduce(%p), replica_groups={}, to_apply=%sum
  %ordered = f32[4] negate(%p)
  ROOT %r = f32[4] abs(%p), control-predecessors={%ordered}
}
%sum (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}""")
    r = check_pass(m, "dce", execute=False)
    assert r.changed
    kept = names(r.module, r.module.computation("e"))
    assert {"log", "tok", "out", "rand", "ar", "ordered", "r"} <= kept
    assert "pure_cc" not in kept and "ar_spmd" not in kept


def test_removes_dead_computations_and_pure_while():
    m = load_text("""
HloModule m
%cond (c: s32[]) -> pred[] {
  %c = s32[] parameter(0)
  %k = s32[] constant(3)
  ROOT %lt = pred[] compare(%c, %k), direction=LT
}
%body (v: s32[]) -> s32[] {
  %v = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %inc = s32[] add(%v, %one)
}
%effect_body (v2: s32[]) -> s32[] {
  %v2 = s32[] parameter(0)
  %tok = token[] after-all()
  %o = token[] outfeed(%v2, %tok)
  %one2 = s32[] constant(1)
  ROOT %inc2 = s32[] add(%v2, %one2)
}
%never_called (a: f32[]) -> f32[] {
  ROOT %a = f32[] parameter(0)
}
ENTRY %e (p: s32[]) -> s32[] {
  %p = s32[] parameter(0)
  %dead_loop = s32[] while(%p), condition=%cond, body=%body
  %effect_loop = s32[] while(%p), condition=%cond, body=%effect_body
  ROOT %r = s32[] negate(%p)
}""")
    r = check_pass(m, "dce", execute=False)
    comps = {c.name for c in r.module.computations}
    assert comps == {"e", "cond", "effect_body"}
    assert "effect_loop" in names(r.module) and "dead_loop" not in names(r.module)


def test_multi_output_fusion_drops_unused_outputs():
    m = load_text("""
HloModule m
%fused (a: f32[4], b: f32[4]) -> (f32[4], f32[4], f32[4]) {
  %a = f32[4] parameter(0)
  %b = f32[4] parameter(1)
  %x = f32[4] add(%a, %b)
  %y = f32[4] multiply(%a, %b)
  %z = f32[4] subtract(%a, %b)
  ROOT %t = (f32[4], f32[4], f32[4]) tuple(%x, %y, %z)
}
ENTRY %e (p: f32[4], q: f32[4]) -> (f32[4], f32[4]) {
  %p = f32[4] parameter(0)
  %q = f32[4] parameter(1)
  %f = (f32[4], f32[4], f32[4]) fusion(%p, %q), kind=kLoop, calls=%fused
  %g0 = f32[4] get-tuple-element(%f), index=0
  %g2 = f32[4] get-tuple-element(%f), index=2
  ROOT %r = (f32[4], f32[4]) tuple(%g0, %g2)
}""")
    r = check_pass(m, "dce")
    fusion = next(i for i in r.module.entry.instructions if i.opcode == "fusion")
    assert fusion.shape.to_text() == "(f32[4]{0}, f32[4]{0})"
    assert sorted(u.attr("index") for u in fusion.users) == [0, 1]
    fused = fusion.called[0]
    assert "multiply" not in opcodes(r.module, fused)
    assert [o.opcode for o in fused.root.operands] == ["add", "subtract"]


def test_multi_output_fusion_single_output_left():
    m = load_text("""
HloModule m
%fused (a: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4] parameter(0)
  %x = f32[4] negate(%a)
  %y = f32[4] abs(%a)
  ROOT %t = (f32[4], f32[4]) tuple(%x, %y)
}
ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %f = (f32[4], f32[4]) fusion(%p), kind=kLoop, calls=%fused
  %g1 = f32[4] get-tuple-element(%f), index=1
  ROOT %r = f32[4] sqrt(%g1)
}""")
    r = check_pass(m, "dce")
    assert opcodes(r.module) == ["fusion", "parameter", "sqrt"]
    fusion = r.module.entry.root.operands[0]
    assert fusion.opcode == "fusion" and fusion.shape.to_text() == "f32[4]{0}"
    assert fusion.called[0].root.opcode == "abs"
    assert opcodes(r.module, fusion.called[0]) == ["abs", "parameter"]


def test_nothing_to_do():
    m = load_text("""
HloModule m
ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  ROOT %r = f32[4] abs(%p)
}""")
    assert not check_pass(m, "dce").changed
