"""``reduction-splitter``: XLA's ReductionSplitter (run to a fixed point).

A reduce over several non-adjacent dimensions that the reduction emitter cannot handle
in one go is split: first reduce the largest of those dimensions, then the rest
(``ignore_small_dims``: not when the largest is at most 8).  Needs default layouts and
grouped dimensions (the normalizer and grouper run first).
"""
from __future__ import annotations

from hlo_opt.analysis.layout import has_default_layout

from hlo_opt.rewrite.graph import fusible_computations, replace_and_remove_dead
from ._reduce_util import array, make_reduce
from hlo_opt.analysis.gpu.reduction import is_reduction_from_or_to_contiguous_dimensions


def split(reduce, ignore_small_dims: bool = True):
    if is_reduction_from_or_to_contiguous_dimensions(reduce):
        return None
    dims = list(reduce.dimensions)
    if len(dims) < 2 or reduce.shape.is_tuple():
        return None
    operand = reduce.operands[0]
    if not has_default_layout(operand.shape):
        return None
    shape = operand.shape
    max_size, max_dim = 0, 0
    for d in dims:
        if shape.dims[d] > max_size:
            max_size, max_dim = shape.dims[d], d
    if ignore_small_dims and max_size <= 8:
        return None
    comp = reduce.parent
    pre_dims = [s for i, s in enumerate(shape.dims) if i != max_dim]
    pre = make_reduce(comp, array(reduce.shape.element_type, pre_dims), [operand],
                      [reduce.operands[1]], [max_dim], reduce.to_apply, reduce)
    final_dims = [d - 1 if d > max_dim else d for d in dims if d != max_dim]
    return make_reduce(comp, reduce.shape, [pre], [reduce.operands[1]], final_dims,
                       reduce.to_apply, reduce)


class ReductionSplitter:
    name = "reduction-splitter"

    def __init__(self, ignore_small_dims: bool = True):
        self.ignore_small_dims = ignore_small_dims

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for inst in comp.post_order():
                if inst.opcode == "reduce" and inst.parent is comp:
                    new = split(inst, self.ignore_small_dims)
                    if new is not None:
                        replace_and_remove_dead(comp, inst, new)
                        changed = True
        return changed
