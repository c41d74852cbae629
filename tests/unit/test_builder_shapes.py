"""The rewrite Builder asks shape inference for every result shape: the built shape is the
inferred one with the builder's layout rule, typed attributes it caches match their
text, and invalid operands raise the rule's ShapeError instead of a made-up shape."""
from __future__ import annotations

import pytest

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.shape import Layout, Shape
from hlo_opt.rewrite.builder import Builder
from hlo_opt.shape_inference import ShapeError, infer_shape


def _comp():
    comp = Computation("c")
    p = comp.add_parameter(Shape.array("f32", (4, 6), Layout((0, 1))), "p")
    s = comp.add_parameter(Shape.array("f32", ()), "s")
    h = comp.add_parameter(Shape.array("bf16", (4, 6)), "h")
    return comp, p, s, h


def _built_all(b, p, s, h):
    pred = b.compare(p, p, "LT")
    return [
        b.broadcast(s, (4, 6), ()), b.reshape(p, (24,)), b.transpose(p, (1, 0)),
        b.slice(p, [1, 0], [4, 6], [2, 3]), b.pad(p, s, [(1, 2, 1), (0, 0, 0)]),
        b.concatenate([p, p], 1), b.reverse(p, (0,)), b.unary("negate", p),
        b.convert(p, "s32"), b.binary("add", p, p), pred, b.select(pred, p, p),
        b.clamp(s, p, s), b.dot(p, p, [], [0], [], [0], "f32"), b.iota("s32", (3, 5), 1),
        b.dynamic_slice(p, [b.scalar(0, "s32"), b.scalar(1, "s32")], (2, 3)),
    ]


def test_built_shapes_are_the_inferred_shapes_with_the_default_layout():
    comp, p, s, h = _comp()
    b = Builder(comp)
    for inst in _built_all(b, p, s, h):
        assert inst.shape.layout is None, inst.opcode
        assert inst.shape == infer_shape(inst).without_layout(), inst.opcode
    assert b.copy(p).shape == p.shape  # copy keeps the operand's layout
    t = b.tuple([p, s])
    assert t.shape.tuple_shapes[0] == p.shape
    assert b.gte(t, 0).shape == p.shape


def test_cached_typed_attributes_match_their_text():
    comp, p, s, h = _comp()
    b = Builder(comp)
    for inst in _built_all(b, p, s, h):
        for name in inst.attrs:
            fresh = inst.clone_with(inst.operands)
            assert fresh.attr(name) == inst.attr(name), (inst.opcode, name)


def test_mixed_precision_takes_the_higher_precision_type():
    comp, p, s, h = _comp()
    b = Builder(comp)
    pred = b.compare(p, p, "LT")
    assert b.select(pred, h, p).shape.element_type == "f32"
    assert b.binary("add", h, p).shape.element_type == "f32"


@pytest.mark.parametrize("build", [
    lambda b, p, s: b.slice(p, [0, 0], [5, 6]),        # limit past the dimension
    lambda b, p, s: b.binary("add", p, s),               # no implicit broadcast
    lambda b, p, s: b.reshape(p, (25,)),                 # element count changes
    lambda b, p, s: b.transpose(p, (0, 0)),              # not a permutation
])
def test_invalid_operands_raise_and_leave_no_users(build):
    comp, p, s, h = _comp()
    b = Builder(comp)
    with pytest.raises(ShapeError):
        build(b, p, s)
    assert p.user_count == 0 and s.user_count == 0
    assert b.created == []
