"""``reduction-dimension-grouper``: XLA's ReductionDimensionGrouper.

Adjacent reduced dimensions of a reduce are merged through a bitcast of its inputs
(``reduce(f32[4,8,16], dims={1,2})`` -> ``reduce(bitcast f32[4,128], dims={1})``), so the
reduction emitter sees at most one reduced dimension per run.  Runs after the layout
normalizer: inputs with non-default layouts are left alone.
"""
from __future__ import annotations

from hlo_opt.analysis.layout import has_default_layout

from hlo_opt.rewrite.graph import fusible_computations, replace_and_remove_dead
from ._reduce_util import array, bitcast, make_reduce


def group(reduce):
    n = len(reduce.operands) // 2
    inputs, inits = reduce.operands[:n], reduce.operands[n:]
    reduced = set(reduce.dimensions)
    if any(not has_default_layout(x.shape) for x in inputs):
        return None
    shape = inputs[0].shape
    new_dims, new_reduced = [], []
    changed = False
    carry = 1
    for d in range(shape.rank):
        if d in reduced and d + 1 < shape.rank and d + 1 in reduced:
            changed = True
            carry *= shape.dims[d]
            continue
        if d in reduced:
            new_dims.append(carry * shape.dims[d])
            new_reduced.append(len(new_dims) - 1)
            carry = 1
        else:
            new_dims.append(shape.dims[d])
    if not changed:
        return None
    comp = reduce.parent
    grouped = [bitcast(comp, x, array(x.shape.element_type, new_dims)) for x in inputs]
    return make_reduce(comp, reduce.shape, grouped, inits, new_reduced, reduce.to_apply, reduce)


class ReductionDimensionGrouper:
    name = "reduction-dimension-grouper"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for inst in comp.post_order():
                if inst.opcode == "reduce" and inst.parent is comp:
                    new = group(inst)
                    if new is not None:
                        replace_and_remove_dead(comp, inst, new)
                        changed = True
        return changed
