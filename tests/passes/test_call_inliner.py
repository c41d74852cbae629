"""call-inliner (CallInliner)."""
from __future__ import annotations

from tests.support.harness import check_pass, load_text


def opcodes(module):
    return sorted(i.opcode for i in module.entry.instructions)


NESTED = """
HloModule m
%inner (x: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  %k = f32[] constant(2)
  %kb = f32[3] broadcast(%k), dimensions={}
  ROOT %m = f32[3] multiply(%x, %kb)
}
%outer (y: f32[3], z: f32[3]) -> f32[3] {
  %y = f32[3] parameter(0)
  %z = f32[3] parameter(1)
  %c = f32[3] call(%y), to_apply=%inner
  ROOT %s = f32[3] subtract(%c, %z)
}
ENTRY %main (p: f32[3], q: f32[3]) -> (f32[3], f32[3]) {
  %p = f32[3] parameter(0)
  %q = f32[3] parameter(1)
  %c1 = f32[3] call(%p, %q), to_apply=%outer
  %c2 = f32[3] call(%q, %p), to_apply=%outer
  ROOT %t = (f32[3], f32[3]) tuple(%c1, %c2)
}"""


def test_nested_calls_inlined_and_callees_removed():
    r = check_pass(load_text(NESTED), "call-inliner")
    assert r.changed
    assert [c.name for c in r.module.computations] == ["main"]
    assert opcodes(r.module) == sorted(["parameter"] * 2 + ["constant", "broadcast",
                                                            "multiply", "subtract"] * 2
                                       + ["tuple"])
    names = [i.name for i in r.module.entry.instructions]
    assert len(names) == len(set(names))
    sub = [i for i in r.module.entry.instructions if i.opcode == "subtract"]
    assert sorted(s.operands[1].name for s in sub) == ["p", "q"]


def test_not_inlined_with_backend_config_or_inlineable_false():
    m = load_text("""
HloModule m
%f (x: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  ROOT %n = f32[3] negate(%x)
}
ENTRY %main (p: f32[3]) -> (f32[3], f32[3], f32[3]) {
  %p = f32[3] parameter(0)
  %a = f32[3] call(%p), to_apply=%f, backend_config={"x":1}
  %b = f32[3] call(%p), to_apply=%f, frontend_attributes={inlineable="false"}
  %c = f32[3] call(%p), to_apply=%f, is_composite=true
  ROOT %t = (f32[3], f32[3], f32[3]) tuple(%a, %b, %c)
}""")
    r = check_pass(m, "call-inliner")
    calls = sorted(i.name for i in r.module.entry.instructions if i.opcode == "call")
    assert calls == ["a", "b"]
    assert "f" in {c.name for c in r.module.computations}


def test_root_call_and_parameter_root():
    m = load_text("""
HloModule m
%ident (x: f32[3], y: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  ROOT %y = f32[3] parameter(1)
}
ENTRY %main (p: f32[3], q: f32[3]) -> f32[3] {
  %p = f32[3] parameter(0)
  %q = f32[3] parameter(1)
  ROOT %c = f32[3] call(%p, %q), to_apply=%ident
}""")
    r = check_pass(m, "call-inliner")
    assert r.module.entry.root.name == "q"


def test_fusions_get_their_own_fused_computation():
    m = load_text("""
HloModule m
%fused (a: f32[3]) -> f32[3] {
  %a = f32[3] parameter(0)
  ROOT %e = f32[3] exponential(%a)
}
%f (x: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  ROOT %fu = f32[3] fusion(%x), kind=kLoop, calls=%fused
}
ENTRY %main (p: f32[3]) -> (f32[3], f32[3]) {
  %p = f32[3] parameter(0)
  %c1 = f32[3] call(%p), to_apply=%f
  %n = f32[3] negate(%p)
  %c2 = f32[3] call(%n), to_apply=%f
  ROOT %t = (f32[3], f32[3]) tuple(%c1, %c2)
}""")
    r = check_pass(m, "call-inliner")
    fusions = [i for i in r.module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 2 and fusions[0].called[0] is not fusions[1].called[0]


def test_control_edges_of_the_call_are_relayed():
    m = load_text("""
HloModule m
%f (x: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  %a = f32[3] negate(%x)
  ROOT %b = f32[3] abs(%a)
}
ENTRY %main (p: f32[3]) -> (f32[3], f32[3], f32[3]) {
  %p = f32[3] parameter(0)
  %first = f32[3] sqrt(%p)
  %c = f32[3] call(%p), to_apply=%f, control-predecessors={%first}
  %last = f32[3] exponential(%p), control-predecessors={%c}
  ROOT %t = (f32[3], f32[3], f32[3]) tuple(%first, %c, %last)
}""")
    r = check_pass(m, "call-inliner")
    insts = {i.name: i for i in r.module.entry.instructions}
    by_op = {i.opcode: i for i in r.module.entry.instructions}
    assert "c" not in insts
    # the inlined body starts after %first and %last waits for its root
    assert [p.name for p in by_op["negate"].control_predecessors] == ["first"]
    assert insts["last"].control_predecessors == [by_op["abs"]]
