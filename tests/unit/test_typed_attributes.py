"""Typed attribute values the passes read: dimension numbers, fusion kind, comparison
direction, and one IsElementwise."""
from __future__ import annotations

from hlo_opt.api import parse_hlo
from hlo_opt.ir.dimension_numbers import (DotDimensionNumbers, GatherDimensionNumbers,
                                          ScatterDimensionNumbers)
from hlo_opt.rewrite.builder import Builder

TEXT = """\
HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%fused (p: f32[5,3]) -> f32[5,3] {
  %p = f32[5,3]{1,0} parameter(0)
  ROOT %n = f32[5,3]{1,0} negate(f32[5,3]{1,0} %p)
}

ENTRY %e (x: f32[2,4,8], y: f32[2,8,3], t: f32[5,3], i: s32[2,1], u: f32[2,3]) -> f32[2,4,3] {
  %x = f32[2,4,8]{2,1,0} parameter(0)
  %y = f32[2,8,3]{2,1,0} parameter(1)
  %t = f32[5,3]{1,0} parameter(2)
  %i = s32[2,1]{1,0} parameter(3)
  %u = f32[2,3]{1,0} parameter(4)
  %g = f32[2,3]{1,0} gather(f32[5,3]{1,0} %t, s32[2,1]{1,0} %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  %sc = f32[5,3]{1,0} scatter(f32[5,3]{1,0} %t, s32[2,1]{1,0} %i, f32[2,3]{1,0} %u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
  %c = pred[2,3]{1,0} compare(f32[2,3]{1,0} %g, f32[2,3]{1,0} %u), direction=LT
  %f = f32[5,3]{1,0} fusion(f32[5,3]{1,0} %sc), kind=kLoop, calls=%fused
  ROOT %d = f32[2,4,3]{2,1,0} dot(f32[2,4,8]{2,1,0} %x, f32[2,8,3]{2,1,0} %y), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""


def _by_name(module):
    return {i.name: i for c in module.computations for i in c.instructions}


def test_dimension_numbers_read_from_the_attributes():
    insts = _by_name(parse_hlo(TEXT, "m"))
    assert insts["d"].dot_dimension_numbers == DotDimensionNumbers((0,), (2,), (0,), (1,))
    assert insts["g"].gather_dimension_numbers == GatherDimensionNumbers(
        offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=1)
    assert insts["sc"].scatter_dimension_numbers == ScatterDimensionNumbers(
        update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
        index_vector_dim=1)
    assert insts["c"].comparison_direction == "LT"
    assert insts["f"].fusion_kind == "kLoop"
    assert insts["f"].is_elementwise() and insts["c"].is_elementwise()
    assert not insts["d"].is_elementwise() and not insts["g"].is_elementwise()


def test_dot_dimension_numbers_write_xla_order():
    assert DotDimensionNumbers((), (1,), (), (0,)).attrs() == {
        "lhs_contracting_dims": "{1}", "rhs_contracting_dims": "{0}"}
    assert list(DotDimensionNumbers((0,), (2,), (0,), (1,)).attrs()) == [
        "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims"]


def test_a_built_dot_prints_as_the_parsed_one():
    module = parse_hlo(TEXT, "m")
    d = _by_name(module)["d"]
    b = Builder(module.entry)
    lb, lc, rb, rc = d.dot_dimension_numbers.lists()
    built = b.dot(d.operands[0], d.operands[1], lb, lc, rb, rc, "f32")
    assert built.attrs == {k: d.attrs[k] for k in built.attrs}
    assert built.dot_dimension_numbers == d.dot_dimension_numbers
