"""flatten-call-graph (FlattenCallGraph)."""
from __future__ import annotations

from passes.flatten_call_graph import add_suffix

from tests.support.harness import check_pass, load_text

SHARED = """
HloModule m
%add (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %s = s32[] add(%a, %b)
}
%cond (c: s32[]) -> pred[] {
  %c = s32[] parameter(0)
  %ten = s32[] constant(10)
  ROOT %lt = pred[] compare(%c, %ten), direction=LT
}
%body (v: s32[]) -> s32[] {
  %v = s32[] parameter(0)
  %one = s32[] constant(1)
  %inc = s32[] add(%v, %one)
  %w = s32[] call(%inc), to_apply=%twice
  ROOT %r = s32[] add(%w, %one)
}
%twice (t: s32[]) -> s32[] {
  %t = s32[] parameter(0)
  ROOT %d = s32[] add(%t, %t)
}
ENTRY %main (p: s32[], q: s32[4]) -> (s32[], s32[], s32[], s32[]) {
  %p = s32[] parameter(0)
  %q = s32[4] parameter(1)
  %w1 = s32[] while(%p), condition=%cond, body=%body
  %w2 = s32[] while(%w1), condition=%cond, body=%body
  %zero = s32[] constant(0)
  %r1 = s32[] reduce(%q, %zero), dimensions={0}, to_apply=%add
  %r2 = s32[] reduce(%q, %zero), dimensions={0}, to_apply=%add
  %direct = s32[] call(%p), to_apply=%twice
  ROOT %out = (s32[], s32[], s32[], s32[]) tuple(%w2, %r1, %r2, %direct)
}"""


def callers(module):
    out = {}
    for comp in module.computations:
        for inst in comp.instructions:
            for c in inst.called:
                out.setdefault(c.name, []).append(inst.opcode)
    return out


def test_every_control_flow_computation_gets_one_caller():
    r = check_pass(load_text(SHARED), "flatten-call-graph")
    assert r.changed
    calls = callers(r.module)
    for name, sites in calls.items():
        if name != "add":
            assert len(sites) == 1, (name, sites)
    assert calls["add"] == ["reduce", "reduce"]  # embedded: shared, as XLA leaves it
    names = {c.name for c in r.module.computations}
    assert {"body.clone", "cond.clone", "twice.clone", "twice.clone.1"} <= names
    assert not check_pass(r.module, "flatten-call-graph").changed


def test_computation_in_both_contexts_is_cloned_for_every_control_site():
    m = load_text("""
HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (p: f32[4], x: f32[], y: f32[]) -> (f32[], f32[]) {
  %p = f32[4] parameter(0)
  %x = f32[] parameter(1)
  %y = f32[] parameter(2)
  %init = f32[] constant(0)
  %r = f32[] reduce(%p, %init), dimensions={0}, to_apply=%add
  %c = f32[] call(%x, %y), to_apply=%add
  ROOT %t = (f32[], f32[]) tuple(%r, %c)
}""")
    r = check_pass(m, "flatten-call-graph")
    calls = callers(r.module)
    assert calls == {"add": ["reduce"], "add.clone": ["call"]}


def test_clone_names_like_xla():
    assert add_suffix("x") == "x.clone"
    assert add_suffix("x.clone") == "x.clone2"
    assert add_suffix("x.clone2") == "x.clone3"
    assert add_suffix("x.clonex") == "x.clonex.clone"
