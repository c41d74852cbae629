"""DynamicIndexSplitter (``dynamic-index-splitter``), as
``xla/service/dynamic_index_splitter.cc``.

``dynamic-slice`` / ``dynamic-update-slice`` written with one rank-1 vector of start
indices get one scalar index per dimension (a ``slice`` of the vector, reshaped to a
scalar); on a rank-0 operand the op is replaced by its operand (dynamic-slice) or its
update (dynamic-update-slice).  Ops that already use scalar indices are left alone.
Fusion computations are not visited.
"""
from __future__ import annotations

from hlo_opt.rewrite.builder import Builder
from ._expander_util import non_fusion_computations, replace_instruction, split_index_vector


def _split(comp, op) -> bool:
    is_update = op.opcode == "dynamic-update-slice"
    rank = op.operands[0].shape.rank
    if rank == 0:
        replace_instruction(comp, op, op.operands[1] if is_update else op.operands[0],
                            fresh=False)
        return True
    first = 2 if is_update else 1
    if len(op.operands) <= first:
        return False
    index = op.operands[first]
    if index.shape.is_scalar():
        return False
    b = Builder(comp)
    scalars = split_index_vector(b, index)
    if is_update:
        new = b.dynamic_update_slice(op.operands[0], op.operands[1], scalars)
    else:
        new = b.dynamic_slice(op.operands[0], scalars, op.attr("dynamic_slice_sizes"))
    replace_instruction(comp, op, new)
    return True


def run_dynamic_index_splitter(module) -> bool:
    changed = False
    for comp in non_fusion_computations(module):
        for inst in comp.post_order():
            if inst.opcode in ("dynamic-slice", "dynamic-update-slice") \
                    and inst.parent is comp:
                changed |= _split(comp, inst)
    return changed


class DynamicIndexSplitter:
    name = "dynamic-index-splitter"

    def run(self, module) -> bool:
        return run_dynamic_index_splitter(module)
