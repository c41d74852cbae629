"""slice-sinker (SliceSinker): elementwise ops on like slices of the same sources become
one op on the sources plus slices of its result."""
from __future__ import annotations

import pytest

from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape
from passes.slice_sinker import SliceSinker, is_elementwise
from hlo_opt.api import parse_hlo
from hlo_opt.errors import HloError
from tests.support.expander_real_modules import MODULES, check_module, check_variant, load_or_skip
from tests.conftest import require_corpus
from tests.support.harness import check_pass, load_text
from tests.support.lit_chunks import chunks


def sink(text: str):
    # elementwise ops on the same elements: bit-exact
    return check_pass(load_text(text), "slice-sinker", rtol=0, atol=0)


def live(m, opcode: str) -> list:
    return [i for i in m.entry.instructions
            if i.opcode == opcode and (i.user_count or i.is_root)]


def test_overlapping_slices_share_one_operation():
    """XLA's first example: 9 + 8 adds become 10."""
    r = sink("""
HloModule m
ENTRY %e (p: f32[10]) -> (f32[9], f32[8]) {
  %p = f32[10] parameter(0)
  %a = f32[9] slice(%p), slice={[0:9]}
  %aa = f32[9] add(%a, %a)
  %b = f32[8] slice(%p), slice={[2:10]}
  %bb = f32[8] add(%b, %b)
  ROOT %t = (f32[9], f32[8]) tuple(%aa, %bb)
}""")
    assert r.changed and r.compared_runs == 3
    (add,) = live(r.module, "add")
    assert add.operands == [r.module.entry.parameters[0]] * 2
    root = r.module.entry.root
    assert [o.opcode for o in root.operands] == ["slice", "slice"]
    assert all(o.operands[0] is add for o in root.operands)
    assert [o.attrs["slice"] for o in root.operands] == ["{[0:9]}", "{[2:10]}"]


def test_adjacent_slices_of_two_sources_and_element_type_changes():
    """Binary ops over two sources; a compare (pred result, same direction) and a
    convert (its result type joins the group's identity)."""
    r = sink("""
HloModule m
ENTRY %e (p: f32[8,3], q: f32[8,3]) -> (f32[5,3], f32[3,3], pred[5,3], pred[3,3], s32[5,3], s32[3,3]) {
  %p = f32[8,3] parameter(0)
  %q = f32[8,3] parameter(1)
  %p0 = f32[5,3] slice(%p), slice={[0:5],[0:3]}
  %q0 = f32[5,3] slice(%q), slice={[0:5],[0:3]}
  %p1 = f32[3,3] slice(%p), slice={[5:8],[0:3]}
  %q1 = f32[3,3] slice(%q), slice={[5:8],[0:3]}
  %m0 = f32[5,3] multiply(%p0, %q0)
  %m1 = f32[3,3] multiply(%p1, %q1)
  %c0 = pred[5,3] compare(%p0, %q0), direction=GT
  %c1 = pred[3,3] compare(%p1, %q1), direction=GT
  %v0 = s32[5,3] convert(%p0)
  %v1 = s32[3,3] convert(%p1)
  ROOT %t = (f32[5,3], f32[3,3], pred[5,3], pred[3,3], s32[5,3], s32[3,3]) tuple(%m0, %m1, %c0, %c1, %v0, %v1)
}""")
    assert r.changed and r.compared_runs == 3
    for op, et in (("multiply", "f32"), ("compare", "pred"), ("convert", "s32")):
        (inst,) = live(r.module, op)
        assert inst.shape.dims == (8, 3) and inst.shape.element_type == et


def test_groups_need_the_same_op_and_attributes():
    r = sink("""
HloModule m
ENTRY %e (p: f32[8], q: f32[8]) -> (pred[4], pred[4], f32[4], f32[4]) {
  %p = f32[8] parameter(0)
  %q = f32[8] parameter(1)
  %p0 = f32[4] slice(%p), slice={[0:4]}
  %q0 = f32[4] slice(%q), slice={[0:4]}
  %p1 = f32[4] slice(%p), slice={[4:8]}
  %q1 = f32[4] slice(%q), slice={[4:8]}
  %lt = pred[4] compare(%p0, %q0), direction=LT
  %gt = pred[4] compare(%p1, %q1), direction=GT
  %add = f32[4] add(%p0, %q0)
  %sub = f32[4] subtract(%p1, %q1)
  ROOT %t = (pred[4], pred[4], f32[4], f32[4]) tuple(%lt, %gt, %add, %sub)
}""")
    assert not r.changed


def test_not_enough_elements_to_pay():
    """Two 3-element adds on a 10-element source would add work: left alone."""
    r = sink("""
HloModule m
ENTRY %e (p: f32[10]) -> (f32[3], f32[3]) {
  %p = f32[10] parameter(0)
  %a = f32[3] slice(%p), slice={[0:3]}
  %b = f32[3] slice(%p), slice={[5:8]}
  %aa = f32[3] sqrt(%a)
  %bb = f32[3] sqrt(%b)
  ROOT %t = (f32[3], f32[3]) tuple(%aa, %bb)
}""")
    assert not r.changed


def test_operands_sliced_differently_or_from_unlike_sources():
    r = sink("""
HloModule m
ENTRY %e (p: f32[8], q: f32[8], w: f32[9]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %p = f32[8] parameter(0)
  %q = f32[8] parameter(1)
  %w = f32[9] parameter(2)
  %p0 = f32[4] slice(%p), slice={[0:4]}
  %q1 = f32[4] slice(%q), slice={[4:8]}
  %p1 = f32[4] slice(%p), slice={[4:8]}
  %q0 = f32[4] slice(%q), slice={[0:4]}
  %x = f32[4] add(%p0, %q1)
  %y = f32[4] add(%p1, %q0)
  %w0 = f32[4] slice(%w), slice={[0:4]}
  %w1 = f32[4] slice(%w), slice={[4:8]}
  %z0 = f32[4] maximum(%p0, %w0)
  %z1 = f32[4] maximum(%p1, %w1)
  ROOT %t = (f32[4], f32[4], f32[4], f32[4]) tuple(%x, %y, %z0, %z1)
}""")
    assert not r.changed


def test_operations_inside_called_computations():
    r = sink("""
HloModule m
%body (p: f32[6]) -> (f32[3], f32[3]) {
  %p = f32[6] parameter(0)
  %a = f32[3] slice(%p), slice={[0:3]}
  %b = f32[3] slice(%p), slice={[3:6]}
  %na = f32[3] negate(%a)
  %nb = f32[3] negate(%b)
  ROOT %t = (f32[3], f32[3]) tuple(%na, %nb)
}

ENTRY %e (x: f32[6]) -> (f32[3], f32[3]) {
  %x = f32[6] parameter(0)
  ROOT %c = (f32[3], f32[3]) call(%x), to_apply=%body
}""")
    assert r.changed and r.compared_runs == 3


def test_elementwise_predicate():
    p = Instruction("parameter", Shape.array("f32", (4,)), payload="0")
    assert is_elementwise(Instruction("copy", p.shape, [p]))
    assert is_elementwise(Instruction("bitcast-convert", Shape.array("s32", (4,)), [p]))
    assert not is_elementwise(Instruction("bitcast-convert", Shape.array("s16", (4, 2)), [p]))
    assert not is_elementwise(Instruction("reverse", p.shape, [p]))


# ---- the FileCheck inputs, differentially ---------------------------------------------------
LIT = chunks("slice_sinker.hlo")


@pytest.mark.parametrize("chunk", LIT, ids=[c.id for c in LIT])
def test_lit_inputs_keep_values(chunk):
    r = sink(chunk.text)
    assert r.changed and r.compared_runs == 3


def test_lit_file_present():
    assert LIT


# ---- every sample and corpus module -------------------------------------------------------
@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module(mid, text, fixture):
    check_module(text, SliceSinker, fixture, exact=True)


MAX_SPLITS = 6


def split_elementwise_ops(module) -> bool:
    """Rewrite up to MAX_SPLITS elementwise ops ``e`` of the entry (operands of ``e``'s
    dims, leading dim >= 2) as ``concat(e(slices [0:k]), e(slices [k:n]))`` -- the
    pattern slice-sinker folds back into ``e`` on the whole operands."""
    comp = module.entry
    done = 0
    for inst in comp.post_order():
        if done == MAX_SPLITS:
            break
        s = inst.shape
        if not is_elementwise(inst) or not inst.operands or not s.is_array() \
                or s.rank == 0 or s.dims[0] < 2 \
                or any(o.shape.dims != s.dims for o in inst.operands):
            continue
        k = s.dims[0] // 2
        halves = []
        for lo, hi in ((0, k), (k, s.dims[0])):
            text = "{" + ",".join([f"[{lo}:{hi}]"] + [f"[0:{d}]" for d in s.dims[1:]]) + "}"
            pieces = []
            for o in inst.operands:
                sl = Instruction("slice", o.shape.with_dims((hi - lo,) + o.shape.dims[1:]),
                                 [o], {"slice": text}, "split")
                comp.add_instruction(sl)
                pieces.append(sl)
            half = inst.clone_with(pieces, s.with_dims((hi - lo,) + s.dims[1:]),
                                   name=inst.name + ".half")
            half.attrs.pop("control-predecessors", None)
            comp.add_instruction(half)
            halves.append(half)
        cat = Instruction("concatenate", s, halves, {"dimensions": "{0}"}, "joined")
        comp.add_instruction(cat)
        inst.replace_all_uses_with(cat)
        done += 1
    return done > 0


@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module_with_split_ops(mid, text, fixture):
    """Real elementwise ops cut into two halves: slice-sinker must join every pair again,
    bit-exact with the original module."""
    changed = check_variant(text, split_elementwise_ops, SliceSinker, fixture, exact=True)
    assert changed == split_elementwise_ops(load_or_skip(text))


def test_real_modules_exercise_the_split_variant():
    require_corpus()  # the counts are over the XLA corpus
    count = 0
    for _, text, _ in MODULES:
        try:
            count += split_elementwise_ops(parse_hlo(text, "<module>"))
        except HloError:
            continue
    assert count >= 50
