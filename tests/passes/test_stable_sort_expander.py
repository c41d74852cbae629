"""stable-sort-expander (StableSortExpander): stable sorts get an iota tie-breaker, so the
comparator alone fixes the stable order."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from hlo_opt.api import parse_hlo, verify
from hlo_opt.ir.computation import Computation
from hlo_opt.ir.module import HloModule
from hlo_opt.ir.shape import Shape
from passes.stable_sort_expander import StableSortExpander, clone_comparator
from tests.support.expander_real_modules import MODULES, check_module
from tests.support.harness import check_pass, execute_or_xfail, load_text
from tests.support.lit_chunks import chunks

LESS = """
%less (a: s32[], b: s32[]) -> pred[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}
"""
LESS_KV = """
%less_kv (k0: s32[], k1: s32[], v0: f32[], v1: f32[]) -> pred[] {
  %k0 = s32[] parameter(0)
  %k1 = s32[] parameter(1)
  %v0 = f32[] parameter(2)
  %v1 = f32[] parameter(3)
  ROOT %lt = pred[] compare(%k0, %k1), direction=LT
}
"""


def sorts(m):
    return [i for i in m.instructions() if i.opcode == "sort"]


def call_comparator(comp: Computation, args) -> bool:
    """Evaluate a (scalar, self-contained) comparator with the interpreter."""
    m = HloModule("cmp")
    copy = clone_comparator(m, comp)
    entry = Computation("entry")
    params = [entry.add_parameter(p.shape, f"x{i}") for i, p in enumerate(comp.parameters)]
    entry.root = entry.add("call", Shape.array("pred", ()), params, called=[copy],
                           called_attr="to_apply", attrs={"to_apply": ""})
    m.add_computation(entry, entry=True)
    verify(m)
    (out,) = execute_or_xfail(m, [np.asarray(a, dtype=p.shape.dtype)
                                  for a, p in zip(args, comp.parameters)])
    return bool(out)


def test_single_operand_sort_gets_an_iota_operand():
    text = "HloModule m\n" + LESS + """
ENTRY %e (k: s32[12]) -> s32[12] {
  %k = s32[12] parameter(0)
  ROOT %s = s32[12] sort(%k), dimensions={0}, is_stable=true, to_apply=%less
}"""
    r = check_pass(load_text(text), "stable-sort-expander")
    assert r.changed and r.compared_runs == 3
    (s,) = sorts(r.module)
    assert [o.opcode for o in s.operands] == ["parameter", "iota"]
    assert s.shape.is_tuple() and s.attr("is_stable")
    root = r.module.entry.root
    assert root.opcode == "get-tuple-element" and root.operands[0] is s
    cmp = s.to_apply
    assert len(cmp.parameters) == 4 and cmp.root.opcode == "select"
    assert [p.name for p in cmp.parameters[2:]] == ["p.1.lhs", "p.1.rhs"]


def test_ties_are_broken_by_position():
    """The rewritten comparator is a total order: equal keys order by their iota."""
    text = "HloModule m\n" + LESS_KV + """
ENTRY %e (k: s32[6], v: f32[6]) -> (s32[6], f32[6]) {
  %k = s32[6] parameter(0)
  %v = f32[6] parameter(1)
  ROOT %s = (s32[6], f32[6]) sort(%k, %v), dimensions={0}, is_stable=true, to_apply=%less_kv
}"""
    r = check_pass(load_text(text), "stable-sort-expander")
    assert r.changed
    cmp = sorts(r.module)[0].to_apply
    for k0, k1, i0, i1 in itertools.product([1, 2], [1, 2], [0, 3], [0, 3]):
        got = call_comparator(cmp, [k0, k1, 0.0, 0.0, i0, i1])
        assert got == (k0 < k1 or (k0 == k1 and i0 < i1)), (k0, k1, i0, i1)
    # keys with many ties: the values come out in their input order within each key
    keys = np.array([2, 1, 2, 1, 1, 2], np.int32)
    vals = np.arange(6, dtype=np.float32)
    k, v = execute_or_xfail(r.module, [keys, vals])
    np.testing.assert_array_equal(k, [1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(v, [1, 3, 4, 0, 2, 5])


def test_sort_along_an_inner_dimension():
    text = "HloModule m\n" + LESS + """
ENTRY %e (k: s32[3,8]) -> s32[3,8] {
  %k = s32[3,8] parameter(0)
  ROOT %s = s32[3,8] sort(%k), dimensions={1}, is_stable=true, to_apply=%less
}"""
    r = check_pass(load_text(text), "stable-sort-expander")
    assert r.changed and r.compared_runs == 3
    iota = sorts(r.module)[0].operands[1]
    assert iota.opcode == "iota" and iota.attr("iota_dimension") == 1
    assert iota.shape.dims == (3, 8) and iota.shape.element_type == "s32"


EXISTING_IOTA = "HloModule m\n" + """
%less_ki (k0: f32[], k1: f32[], i0: s32[], i1: s32[]) -> pred[] {
  %k0 = f32[] parameter(0)
  %k1 = f32[] parameter(1)
  %i0 = s32[] parameter(2)
  %i1 = s32[] parameter(3)
  ROOT %lt = pred[] compare(%k0, %k1), direction=LT
}

ENTRY %e (k: f32[10]) -> ((f32[10], s32[10]), (f32[10], s32[10])) {
  %k = f32[10] parameter(0)
  %iota = s32[10] iota(), iota_dimension=0
  %a = (f32[10], s32[10]) sort(%k, %iota), dimensions={0}, is_stable=true, to_apply=%less_ki
  %n = f32[10] negate(%k)
  %b = (f32[10], s32[10]) sort(%n, %iota), dimensions={0}, to_apply=%less_ki
  ROOT %t = ((f32[10], s32[10]), (f32[10], s32[10])) tuple(%a, %b)
}"""


def test_an_existing_s32_iota_operand_is_reused():
    r = check_pass(load_text(EXISTING_IOTA), "stable-sort-expander")
    assert r.changed and r.compared_runs == 3
    a, b = sorted(sorts(r.module), key=lambda s: s.name)
    assert len(a.operands) == 2  # no new operand
    assert a.to_apply.root.opcode == "select"
    # the comparator the unstable sort shares is copied before the edit, not changed
    assert b.to_apply.root.opcode == "compare" and a.to_apply is not b.to_apply


def test_ties_with_few_distinct_float_keys():
    """Keys drawn from a few values: many ties, compared through the interpreter."""
    before = load_text(EXISTING_IOTA)
    r = check_pass(before, "stable-sort-expander", execute=False)
    keys = np.array([0.5, -1, 0.5, 2, -1, 0.5, 2, 2, -1, 0.5], np.float32)
    expected = execute_or_xfail(before, [keys])
    got = execute_or_xfail(r.module, [keys])
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(e, g)
    np.testing.assert_array_equal(got[1], [1, 4, 8, 0, 2, 5, 9, 3, 6, 7])


def test_unstable_sorts_are_left_alone():
    text = "HloModule m\n" + LESS + """
ENTRY %e (k: s32[12]) -> s32[12] {
  %k = s32[12] parameter(0)
  ROOT %s = s32[12] sort(%k), dimensions={0}, to_apply=%less
}"""
    assert not check_pass(load_text(text), "stable-sort-expander").changed


def test_a_comparator_shared_by_two_stable_sorts():
    text = "HloModule m\n" + LESS + """
ENTRY %e (k: s32[12], j: s32[5]) -> (s32[12], s32[5]) {
  %k = s32[12] parameter(0)
  %j = s32[5] parameter(1)
  %s1 = s32[12] sort(%k), dimensions={0}, is_stable=true, to_apply=%less
  %s2 = s32[5] sort(%j), dimensions={0}, is_stable=true, to_apply=%less
  ROOT %t = (s32[12], s32[5]) tuple(%s1, %s2)
}"""
    r = check_pass(load_text(text), "stable-sort-expander")
    assert r.changed and r.compared_runs == 3
    s1, s2 = sorts(r.module)
    assert s1.to_apply is not s2.to_apply
    verify(parse_hlo(r.after_text))


# ---- the FileCheck inputs, differentially ---------------------------------------------------
LIT = chunks("stable_sort_expander.hlo")


@pytest.mark.parametrize("chunk", LIT, ids=[c.id for c in LIT])
def test_lit_inputs_keep_values(chunk):
    r = check_pass(load_text(chunk.text), "stable-sort-expander")
    assert r.changed and r.compared_runs == 3


def test_lit_file_present():
    assert LIT


# ---- every sample and corpus module -------------------------------------------------------
@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module(mid, text, fixture):
    out = check_module(text, StableSortExpander, fixture, exact=True)
    assert out.changed == ("is_stable=true" in text)


def test_real_modules_exercise_the_pass():
    assert any("is_stable=true" in t for _, t, _ in MODULES)
