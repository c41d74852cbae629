"""reduction-layout-normalizer, reduction-dimension-grouper, reduction-splitter and
gpu-tree-reduction-rewriter."""
from __future__ import annotations

from hlo_opt.analysis.gpu.reduction import (reduction_dimensions, reduction_is_race_free,
                                            is_reduction_from_or_to_contiguous_dimensions)

from .util import check, entry_ops, run

ADD = """%add (ax: f32[], ay: f32[]) -> f32[] {
  %ax = f32[] parameter(0)
  %ay = f32[] parameter(1)
  ROOT %asum = f32[] add(%ax, %ay)
}
"""


def module(shape: str, out: str, dims: str, layout: str = "") -> str:
    return f"""HloModule r
{ADD}
ENTRY %main (a: f32[{shape}]) -> f32[{out}] {{
  %a = f32[{shape}]{layout} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[{out}] reduce(%a, %z), dimensions={{{dims}}}, to_apply=%add
}}
"""


def _reduces(m):
    return [i for i in m.entry.post_order() if i.opcode == "reduce"]


def test_reduction_kinds():
    from hlo_opt.api import parse_hlo
    row = _reduces(parse_hlo(module("64,1024", "64", "1")))[0]
    col = _reduces(parse_hlo(module("1024,64", "64", "0")))[0]
    rd = reduction_dimensions(row)
    assert rd.is_row_reduction and rd.dimensions == (1, 64, 1024)
    rd = reduction_dimensions(col)
    assert not rd.is_row_reduction and rd.dimensions == (1, 1024, 64)
    assert is_reduction_from_or_to_contiguous_dimensions(row)
    assert reduction_is_race_free(reduction_dimensions(row))
    tiny = _reduces(parse_hlo(module("8,3", "8", "1")))[0]
    assert not is_reduction_from_or_to_contiguous_dimensions(tiny)  # elemental is faster


def test_grouper_merges_adjacent_reduced_dimensions():
    m = check(module("4,8,16", "4", "1,2"), "reduction-dimension-grouper").module
    (r,) = _reduces(m)
    assert r.operands[0].opcode == "bitcast"
    assert r.operands[0].shape.dims == (4, 128) and r.dimensions == (1,)


def test_grouper_leaves_separate_dimensions():
    m = run(module("4,8,16", "8", "0,2"), "reduction-dimension-grouper")
    assert _reduces(m)[0].dimensions == (0, 2)


def test_layout_normalizer_bitcasts_to_the_default_layout():
    m = check(module("16,32", "32", "0", "{0,1}"), "reduction-layout-normalizer").module
    (r,) = _reduces(m)
    # physically [32][16]: reduce the minor dimension of a row-major [32,16]
    assert r.operands[0].opcode == "bitcast"
    assert r.operands[0].shape.to_text() == "f32[32,16]{1,0}"
    assert r.dimensions == (1,)


def test_splitter_splits_non_contiguous_reductions():
    # neither the kept {1,3} nor the reduced {0,2} dimensions are adjacent
    m = check(module("16,8,32,4", "8,4", "0,2"), "reduction-splitter").module
    rs = _reduces(m)
    assert len(rs) == 2
    inner, outer = rs
    assert inner.dimensions == (2,) and inner.shape.dims == (16, 8, 4)  # the largest first
    assert outer.dimensions == (0,) and outer.shape.dims == (8, 4)
    # a batched row reduction (R, K, R) is handled by the emitter: not split
    m = run(module("64,3,64", "3", "0,2"), "reduction-splitter")
    assert len(_reduces(m)) == 1


def test_tree_rewriter_splits_huge_row_reductions():
    m = check(module("1048576", "", "0"), "gpu-tree-reduction-rewriter", seeds=(0,)).module
    inner, outer = _reduces(m)
    assert inner.operands[0].opcode == "bitcast"
    assert inner.operands[0].shape.dims == (1024, 1024)
    assert inner.shape.dims == (1024,) and outer.shape.dims == ()


def test_tree_rewriter_pads_to_a_multiple():
    m = check(module("1000003", "", "0"), "gpu-tree-reduction-rewriter", seeds=(0,)).module
    assert "pad" in entry_ops(m)
    inner, outer = _reduces(m)
    assert inner.operands[0].shape.num_elements() >= 1000003


def test_tree_rewriter_column_reduction():
    m = check(module("100000,8", "8", "0"), "gpu-tree-reduction-rewriter", seeds=(0,)).module
    assert len(_reduces(m)) == 2


def test_tree_rewriter_leaves_race_free_and_max_reductions():
    m = run(module("64,1024", "64", "1"), "gpu-tree-reduction-rewriter")
    assert len(_reduces(m)) == 1
    text = module("1048576", "", "0").replace("add(%ax, %ay)", "maximum(%ax, %ay)")
    m = run(text, "gpu-tree-reduction-rewriter")
    assert len(_reduces(m)) == 1
