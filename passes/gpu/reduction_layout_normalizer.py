"""``reduction-layout-normalizer``: XLA's ReductionLayoutNormalizer.

A reduce whose input has a non-default layout is rewritten to reduce a bitcast of the
input with the default (row-major) layout and the dimensions in physical order; the
result is bitcast back to the original output shape and layout.  Afterwards every
reduce input has the default layout, which the grouper and splitter rely on.
"""
from __future__ import annotations

from hlo_opt.analysis.layout import minor_to_major
from hlo_opt.ir.shape import Layout, Shape

from hlo_opt.rewrite.graph import add_gte, fusible_computations, replace_and_remove_dead
from ._reduce_util import array, bitcast, make_reduce, maybe_tuple


def normalize(reduce):
    n = len(reduce.operands) // 2
    inputs, inits = reduce.operands[:n], reduce.operands[n:]
    first = inputs[0].shape
    if any(x.shape.effective_layout() != first.effective_layout() for x in inputs):
        return None
    reduced = set(reduce.dimensions)
    out_shapes = list(reduce.shape.tuple_shapes) if reduce.shape.is_tuple() else [reduce.shape]
    new_inputs, new_out = [], []
    new_reduced = None
    unchanged = True
    for x, out in zip(inputs, out_shapes):
        shape = x.shape
        m2m = minor_to_major(shape)
        out_m2m = minor_to_major(out)
        logical_to_physical = {d: len(out_m2m) - 1 - out_m2m.index(d) for d in out_m2m}
        dims, red, kept = [], [], []
        out_layout = [0] * out.rank
        for i in range(shape.rank):
            logical = m2m[shape.rank - 1 - i]
            dims.append(shape.dims[logical])
            if logical in reduced:
                red.append(i)
            else:
                kept.append(shape.dims[logical])
                reduce_logical = logical - sum(1 for r in reduced if r < logical)
                physical = logical_to_physical[reduce_logical]
                out_layout[out.rank - physical - 1] = len(kept) - 1
        new_in_shape = array(shape.element_type, dims)
        new_out_shape = Shape.array(out.element_type, tuple(kept),
                                    Layout(tuple(out_layout)) if out.rank else None)
        if new_in_shape != shape:
            unchanged = False
        new_inputs.append(bitcast(reduce.parent, x, new_in_shape) if new_in_shape != shape else x)
        new_out.append(new_out_shape)
        new_reduced = red
    if unchanged and n == 1:
        return None
    comp = reduce.parent
    new_shape = maybe_tuple(new_out)
    new = make_reduce(comp, new_shape, new_inputs, inits, new_reduced, reduce.to_apply, reduce)
    if new_shape == reduce.shape:
        return new
    if not new_shape.is_tuple():
        return bitcast(comp, new, reduce.shape)
    parts = [bitcast(comp, add_gte(comp, new, i), s) for i, s in enumerate(out_shapes)]
    return comp.add("tuple", reduce.shape, parts, name="tuple")


class ReductionLayoutNormalizer:
    name = "reduction-layout-normalizer"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for inst in comp.post_order():
                if inst.opcode == "reduce" and inst.parent is comp:
                    new = normalize(inst)
                    if new is not None:
                        replace_and_remove_dead(comp, inst, new)
                        changed = True
        return changed
