"""dynamic-index-splitter (DynamicIndexSplitter): vector start indices of
dynamic-slice/dynamic-update-slice become one scalar per dimension."""
from __future__ import annotations

import pytest

from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape
from passes.dynamic_index_splitter import DynamicIndexSplitter
from tests.support.expander_real_modules import MODULES, check_module, check_variant, load_or_skip
from tests.conftest import require_corpus
from tests.support.harness import check_pass, load_text
from tests.support.lit_chunks import chunks


def split(text: str):
    return check_pass(load_text(text), "dynamic-index-splitter", rtol=0, atol=0)


def test_vector_indices_of_a_dynamic_slice():
    # random s32 inputs lie in [-8, 8]: the starts get clamped both ways
    r = split("""
HloModule m
ENTRY %e (x: f32[6,5,4], i: s32[3]) -> f32[2,3,4] {
  %x = f32[6,5,4] parameter(0)
  %i = s32[3] parameter(1)
  ROOT %d = f32[2,3,4] dynamic-slice(%x, %i), dynamic_slice_sizes={2,3,4}
}""")
    assert r.changed and r.compared_runs == 3
    root = r.module.entry.root
    assert root.opcode == "dynamic-slice" and len(root.operands) == 4
    for k, idx in enumerate(root.operands[1:]):
        assert idx.opcode == "reshape" and idx.shape.is_scalar()
        assert idx.operands[0].opcode == "slice"
        assert idx.operands[0].attrs["slice"] == f"{{[{k}:{k + 1}]}}"
    assert root.attr("dynamic_slice_sizes") == (2, 3, 4)


def test_vector_indices_of_a_dynamic_update_slice():
    r = split("""
HloModule m
ENTRY %e (x: s32[5,7], u: s32[2,3], i: s64[2]) -> s32[5,7] {
  %x = s32[5,7] parameter(0)
  %u = s32[2,3] parameter(1)
  %i = s64[2] parameter(2)
  ROOT %d = s32[5,7] dynamic-update-slice(%x, %u, %i)
}""")
    assert r.changed and r.compared_runs == 3
    root = r.module.entry.root
    assert len(root.operands) == 4
    assert all(o.shape == Shape.array("s64", ()) for o in root.operands[2:])


def test_rank_zero_operands_are_replaced():
    r = split("""
HloModule m
ENTRY %e (x: f32[], u: f32[], i: s32[0]) -> (f32[], f32[]) {
  %x = f32[] parameter(0)
  %u = f32[] parameter(1)
  %i = s32[0] parameter(2)
  %d = f32[] dynamic-slice(%x, %i), dynamic_slice_sizes={}
  %w = f32[] dynamic-update-slice(%x, %u, %i)
  ROOT %t = (f32[], f32[]) tuple(%d, %w)
}""")
    assert r.changed and r.compared_runs == 3
    assert [o.name for o in r.module.entry.root.operands] == ["x", "u"]


def test_a_non_default_root_layout_is_kept():
    r = split("""
HloModule m
ENTRY %e (x: f32[6,5], i: s32[2]) -> f32[3,2] {
  %x = f32[6,5] parameter(0)
  %i = s32[2] parameter(1)
  ROOT %d = f32[3,2]{0,1} dynamic-slice(%x, %i), dynamic_slice_sizes={3,2}
}""")
    assert r.changed
    assert r.module.entry.root.shape.to_text() == "f32[3,2]{0,1}"


def test_scalar_indices_and_fusions_are_left_alone():
    r = split("""
HloModule m
%fused (x: f32[6], i: s32[1]) -> f32[2] {
  %x = f32[6] parameter(0)
  %i = s32[1] parameter(1)
  ROOT %d = f32[2] dynamic-slice(%x, %i), dynamic_slice_sizes={2}
}

ENTRY %e (y: f32[6], j: s32[], k: s32[1]) -> (f32[2], f32[2]) {
  %y = f32[6] parameter(0)
  %j = s32[] parameter(1)
  %k = s32[1] parameter(2)
  %a = f32[2] dynamic-slice(%y, %j), dynamic_slice_sizes={2}
  %f = f32[2] fusion(%y, %k), kind=kLoop, calls=%fused
  ROOT %t = (f32[2], f32[2]) tuple(%a, %f)
}""")
    assert not r.changed


# ---- the FileCheck inputs, differentially ---------------------------------------------------
LIT = chunks("dynamic_index_splitter.hlo")


@pytest.mark.parametrize("chunk", LIT, ids=[c.id for c in LIT])
def test_lit_inputs_keep_values(chunk):
    r = split(chunk.text)
    assert r.changed and r.compared_runs == 3


def test_lit_file_present():
    assert LIT


# ---- every sample and corpus module -------------------------------------------------------
@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module(mid, text, fixture):
    check_module(text, DynamicIndexSplitter, fixture, exact=True)


def vectorize_indices(module) -> bool:
    """Give every dynamic-slice / dynamic-update-slice of rank >= 1 (outside fusions)
    one vector of start indices: ``concatenate(reshape(i0), reshape(i1), ...)``."""
    fused = module.fusion_computations()
    changed = False
    for comp in module.computations:
        if comp in fused:
            continue
        for inst in comp.post_order():
            if inst.opcode not in ("dynamic-slice", "dynamic-update-slice"):
                continue
            first = 2 if inst.opcode == "dynamic-update-slice" else 1
            scalars = inst.operands[first:]
            if not scalars or not scalars[0].shape.is_scalar():
                continue
            et = scalars[0].shape.element_type
            vecs = []
            for s in scalars:
                r = Instruction("reshape", Shape.array(et, (1,)), [s], {}, "idx")
                comp.add_instruction(r)
                vecs.append(r)
            cat = Instruction("concatenate", Shape.array(et, (len(vecs),)), vecs,
                              {"dimensions": "{0}"}, "indices")
            comp.add_instruction(cat)
            inst.set_operands(list(inst.operands[:first]) + [cat])
            changed = True
    return changed


@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module_with_vector_indices(mid, text, fixture):
    """Real dynamic slices rewritten to vector indices: the splitter takes them back to
    scalars, bit-exact with the original module."""
    changed = check_variant(text, vectorize_indices, DynamicIndexSplitter, fixture,
                            exact=True)
    assert changed == vectorize_indices(load_or_skip(text))


def test_real_modules_exercise_the_vector_variant():
    require_corpus()  # the counts are over the XLA corpus
    assert sum("dynamic-slice(" in t or "dynamic-update-slice(" in t
               for _, t, _ in MODULES) >= 5
