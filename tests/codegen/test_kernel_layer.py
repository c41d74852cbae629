"""The shared kernel layer on its own: index simplification, kinds, plans, buffers."""
from __future__ import annotations

import pytest

from hlo_opt.api import load
from hlo_opt.codegen import ElementalEmitter, make_plan
from hlo_opt.codegen import index as ix
from hlo_opt.codegen.expr import walk
from hlo_opt.ir.shape import Shape
from hlo_opt.text.parser import parse_hlo_modules
from tests.conftest import sample_files


def test_reshape_of_a_degenerate_dim_costs_no_division():
    i = ix.loop_var("i", 64)
    j = ix.loop_var("j", 1)
    # f32[64,1] -> f32[64]: index (i,) of the output reads (i, 0) of the operand
    assert ix.reshape_index((64,), (64, 1), (i,)) == (i, ix.c(0))
    # f32[64] -> f32[64,1]
    assert j == ix.c(0)
    assert ix.reshape_index((64, 1), (64,), (i, j)) == (i,)


def test_split_and_merge_dims_simplify():
    a, b = ix.loop_var("a", 4), ix.loop_var("b", 8)
    lin = ix.logical_linear((4, 8), (a, b))
    assert ix.div(lin, 8) == a and ix.rem(lin, 8) == b
    assert ix.reshape_index((4, 8), (32,), (a, b)) == (ix.add(ix.mul(a, ix.c(8)), b),)
    k = ix.loop_var("k", 32)
    split = ix.reshape_index((32,), (4, 8), (k,))
    assert ix.count_divisions(split[0]) == 1 and ix.count_divisions(split[1]) == 1
    assert ix.rem(ix.c(17), 5) == ix.c(2)


def test_layout_aware_linear_index():
    s = Shape.parse("f32[3,5]{0,1}")
    i, j = ix.loop_var("i", 3), ix.loop_var("j", 5)
    assert ix.linear_index(s, (i, j)) == ix.add(i, ix.mul(j, ix.c(3)))


HLO = """
HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
fr { p = f32[16,32]{1,0} parameter(0)  z = f32[] constant(0)
     ROOT r = f32[16]{0} reduce(p, z), dimensions={1}, to_apply=add }
fc { p = f32[16,32]{1,0} parameter(0)  z = f32[] constant(0)
     ROOT r = f32[32]{0} reduce(p, z), dimensions={0}, to_apply=add }
ft { p = f32[16,32]{1,0} parameter(0)  ROOT t = f32[32,16]{1,0} transpose(p), dimensions={1,0} }
fd { p = f32[16,32]{1,0} parameter(0)  u = f32[2,32]{1,0} parameter(1)  i = s32[] parameter(2)
     z = s32[] constant(0)
     ROOT d = f32[16,32]{1,0} dynamic-update-slice(p, u, i, z) }
ENTRY e {
  x = f32[16,32]{1,0} parameter(0)
  u = f32[2,32]{1,0} parameter(1)
  i = s32[] parameter(2)
  e1 = f32[16,32]{1,0} exponential(x)
  r1 = f32[16]{0} fusion(e1), kind=kInput, calls=fr
  r2 = f32[32]{0} fusion(e1), kind=kInput, calls=fc
  tr = f32[32,16]{1,0} fusion(e1), kind=kLoop, calls=ft
  du = f32[16,32]{1,0} fusion(e1, u, i), kind=kLoop, calls=fd
  dt = f32[32,32]{1,0} dot(tr, du), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = (f32[16]{0}, f32[32]{0}, f32[32,32]{1,0}) tuple(r1, r2, dt)
}
"""


def test_kinds_and_reasons():
    m = parse_hlo_modules(HLO, "t.hlo")[0]
    p = make_plan(m)
    kinds = {s.name: s.kind for s in p.entry_plan.steps}
    assert kinds == {"e1": "loop", "r1": "row_reduction", "r2": "column_reduction",
                     "tr": "transpose", "du": "in_place_dynamic_update_slice",
                     "dt": "library_call"}
    text = p.to_text()
    assert "which include the minor-most" in text and "not the minor-most" in text


def test_buffers_reuse_and_in_place():
    m = parse_hlo_modules(HLO, "t.hlo")[0]
    p = make_plan(m)
    steps = {s.name: s for s in p.entry_plan.steps}
    # d updates e1 in place only if e1 dies there; it does not (t reads it... before d)
    assert steps["du"].in_place == {0: 0}
    # e1's last use is d: d takes over e1's block
    assert steps["du"].output_slices[0] == steps["e1"].output_slices[0]
    # the transpose dies at the dot; nothing overlaps a live value
    asg = p.assignment
    spans = [(a.offset, a.offset + a.size, v, f, l) for a in asg.allocations
             for v, f, l in a.values]
    for o1, e1, v1, f1, l1 in spans:
        for o2, e2, v2, f2, l2 in spans:
            if v1 is v2 or not (o1 < e2 and o2 < e1):
                continue
            same_alloc = any(v1 in [x for x, _, _ in a.values] and
                             v2 in [x for x, _, _ in a.values] for a in asg.allocations)
            assert same_alloc or l1 < f2 or l2 < f1, (v1, v2)
    assert "BufferAssignment" in asg.to_text()


def test_elemental_reduce_and_transpose_exprs():
    m = parse_hlo_modules(HLO, "t.hlo")[0]
    p = make_plan(m)
    k = {s.name: s for s in p.entry_plan.steps}["r1"]
    em = ElementalEmitter(k.input_map)
    i = ix.loop_var("i", 16)
    root, leaf = k.roots[0]
    e = em.value(root, (i,), leaf)
    assert e.op == "reduce" and e.attr.loop_vars[0][1] == 32
    assert not any(n.op in ("floordiv", "rem") for n in walk(e))


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_every_sample_plans(path):
    p = make_plan(load(str(path)))
    assert p.assignment.arena_size >= 0
    for _, st in p.steps():
        assert len(st.output_slices) == len(st.outputs)
