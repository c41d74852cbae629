"""tuple-simplifier (TupleSimplifier)."""
from __future__ import annotations

from passes.tuple_simplifier import TupleSimplifier

from tests.support.harness import check_pass, load_text


def names(module, comp=None):
    return {i.name for i in (comp or module.entry).instructions}


def test_gte_chains_of_nested_tuples_forward():
    m = load_text("""
HloModule m
ENTRY %e (a: f32[2], b: f32[3], c: s32[]) -> f32[3] {
  %a = f32[2] parameter(0)
  %b = f32[3] parameter(1)
  %c = s32[] parameter(2)
  %inner = (f32[2], f32[3]) tuple(%a, %b)
  %outer = ((f32[2], f32[3]), s32[]) tuple(%inner, %c)
  %g = (f32[2], f32[3]) get-tuple-element(%outer), index=0
  %gg = f32[3] get-tuple-element(%g), index=1
  ROOT %r = f32[3] negate(%gg)
}""")
    r = check_pass(m, "tuple-simplifier")
    assert r.changed
    assert r.module.entry.root.operands[0].name == "b"
    assert names(r.module) == {"a", "b", "c", "r"}  # the tuples went with their last use


def test_whole_tuple_and_partial_tuples():
    m = load_text("""
HloModule m
ENTRY %e (p: (f32[2], f32[3], s32[])) -> ((f32[2], f32[3], s32[]), (f32[3], f32[2], s32[]), (f32[2], f32[3])) {
  %p = (f32[2], f32[3], s32[]) parameter(0)
  %g0 = f32[2] get-tuple-element(%p), index=0
  %g1 = f32[3] get-tuple-element(%p), index=1
  %g2 = s32[] get-tuple-element(%p), index=2
  %same = (f32[2], f32[3], s32[]) tuple(%g0, %g1, %g2)
  %swapped = (f32[3], f32[2], s32[]) tuple(%g1, %g0, %g2)
  %prefix = (f32[2], f32[3]) tuple(%g0, %g1)
  ROOT %r = ((f32[2], f32[3], s32[]), (f32[3], f32[2], s32[]), (f32[2], f32[3])) tuple(%same, %swapped, %prefix)
}""")
    r = check_pass(m, "tuple-simplifier")
    root = r.module.entry.root
    assert root.operands[0].name == "p"
    assert [o.name for o in root.operands[1:]] == ["swapped", "prefix"]


def test_sharding_is_preserved():
    m = load_text("""
HloModule m
ENTRY %e (a: f32[2]) -> f32[2] {
  %a = f32[2] parameter(0)
  %t = (f32[2]) tuple(%a)
  %g = f32[2] get-tuple-element(%t), index=0, sharding={replicated}
  ROOT %r = f32[2] negate(%g)
}""")
    assert not check_pass(m, "tuple-simplifier").changed


def test_exclude_entry_computation_option():
    m = load_text("""
HloModule m
ENTRY %e (a: f32[2]) -> f32[2] {
  %a = f32[2] parameter(0)
  %t = (f32[2]) tuple(%a)
  ROOT %g = f32[2] get-tuple-element(%t), index=0
}""")
    assert not check_pass(m, TupleSimplifier(exclude_entry_computation=True)).changed
    r = check_pass(m, TupleSimplifier())
    assert r.changed and r.module.entry.root.name == "a"


def test_control_dependencies_are_relayed():
    m = load_text("""
HloModule m
ENTRY %e (a: f32[2]) -> (f32[2], f32[2]) {
  %a = f32[2] parameter(0)
  %before = f32[2] negate(%a)
  %t = (f32[2]) tuple(%a)
  %g = f32[2] get-tuple-element(%t), index=0, control-predecessors={%before}
  %use = f32[2] abs(%g)
  %after = f32[2] sqrt(%a), control-predecessors={%g}
  ROOT %r = (f32[2], f32[2]) tuple(%use, %after)
}""")
    r = check_pass(m, "tuple-simplifier")
    entry = r.module.entry
    use = next(i for i in entry.instructions if i.name == "use")
    after = next(i for i in entry.instructions if i.name == "after")
    assert use.operands[0].name == "a"
    assert [p.name for p in use.control_predecessors] == ["before"]
    assert [p.name for p in after.control_predecessors] == ["a"]
    assert "g" not in names(r.module)
