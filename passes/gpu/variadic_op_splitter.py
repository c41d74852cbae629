"""``variadic-op-splitter``: XLA's VariadicOpSplitter.

A ``concatenate`` with more than 128 operands would exceed the kernel parameter space
once fused; it is split into concatenates of at most 128 operands whose results are
concatenated (recursively), which is the same array.
"""
from __future__ import annotations

from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.graph import fusible_computations

MAX_PARAMETERS = 128


def _concat(comp, operands, dim, like):
    dims = list(operands[0].shape.dims)
    dims[dim] = sum(o.shape.dims[dim] for o in operands)
    attrs = {"dimensions": "{" + str(dim) + "}"}
    if "metadata" in like.attrs:
        attrs["metadata"] = like.attrs["metadata"]
    return comp.add("concatenate", Shape.array(operands[0].shape.element_type, dims),
                    list(operands), name="concatenate", attrs=attrs)


class VariadicOpSplitter:
    name = "variadic-op-splitter"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for inst in comp.post_order():
                if inst.opcode != "concatenate" or len(inst.operands) <= MAX_PARAMETERS:
                    continue
                dim = inst.dimensions[0]
                operands = list(inst.operands)
                while len(operands) > MAX_PARAMETERS:
                    operands = [_concat(comp, operands[i:i + MAX_PARAMETERS], dim, inst)
                                if len(operands[i:i + MAX_PARAMETERS]) > 1
                                else operands[i]
                                for i in range(0, len(operands), MAX_PARAMETERS)]
                inst.set_operands(operands)
                changed = True
        return changed
