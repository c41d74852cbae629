"""``all-gather-broadcast-reorder``: XLA's AllGatherBroadcastReorder
(hlo/transforms/collectives/all_gather_broadcast_reorder.cc).

``all-gather(broadcast(x))`` gathers data that is uniform along the broadcast's new
dimensions; gathering ``x`` and broadcasting afterwards moves less data.  Two cases:

* the gather dimension is one of x's (a broadcast ``dimensions`` entry)::

      bc = f32[5,4,8,128] broadcast(f32[128,5] x), dimensions={3,0}
      ag = f32[5,4,8,256] all-gather(bc), dimensions={3}
    =>
      ag' = f32[256,5] all-gather(x), dimensions={0}
      bc' = f32[5,4,8,256] broadcast(ag'), dimensions={3,0}

* it is one of the uniform dimensions: x gets a leading 1 dimension, is gathered along
  it, broadcast with that dimension in front of the gather dimension, and reshaped back.

Only done when the uniform dimensions (neither broadcast nor gathered) have more than
one element, never when an all-gather in the module constrains its layout; a new
all-gather gets a fresh channel_id when the old one had one.
"""
from __future__ import annotations

import math

from hlo_opt.ir.attributes import int_list_text
from hlo_opt.ir.shape import Shape

from ..dce import control_successor_set, remove_instruction_and_unused_operands
from ._util import contains_layout_constrained, next_channel_id


class AllGatherBroadcastReorder:
    name = "all-gather-broadcast-reorder"

    def run(self, module) -> bool:
        if contains_layout_constrained(module, ("all-gather",)):
            return False
        self.next_channel = next_channel_id(module)
        changed = False
        for comp in list(module.computations):
            self.ctrl = None  # control predecessors in comp, found once
            for inst in comp.post_order():
                if inst.parent is comp and inst.opcode == "all-gather" and \
                        inst.shape.is_array() and len(inst.operands) == 1 and \
                        inst.operands[0].opcode == "broadcast" and self._rewrite(comp, inst):
                    changed = True
        return changed

    def _new_all_gather(self, comp, ag, shape, operand, dim: int):
        new = ag.clone_with([operand], shape=shape)
        if "channel_id" in new.attrs:
            new.attrs["channel_id"] = str(self.next_channel)
            self.next_channel += 1
        new.set_attr("dimensions", (dim,))
        return comp.add_instruction(new)

    def _rewrite(self, comp, ag) -> bool:
        bcast = ag.operands[0]
        x = bcast.operands[0]
        bdims = list(bcast.dimensions)
        ag_dim = ag.dimensions[0]
        non_uniform = set(bdims)
        along_uniform = ag_dim not in non_uniform
        non_uniform.add(ag_dim)
        if math.prod(n for i, n in enumerate(ag.shape.dims) if i not in non_uniform) == 1:
            return False
        et = x.shape.element_type
        if not along_uniform:
            index = bdims.index(ag_dim)
            dims = list(x.shape.dims)
            dims[index] = ag.shape.dims[ag_dim]
            new_ag = self._new_all_gather(comp, ag, Shape(et, dims, None, x.shape.layout), x,
                                          index)
            replacement = comp.add("broadcast", ag.shape, [new_ag], name="broadcast",
                                   attrs={"dimensions": int_list_text(bdims)})
        else:
            rs0 = comp.add("reshape", Shape.array(et, (1,) + x.shape.dims), [x],
                           name="reshape")
            factor = ag.shape.dims[ag_dim] // ag.operands[0].shape.dims[ag_dim]
            new_ag = self._new_all_gather(
                comp, ag, Shape.array(et, (factor,) + x.shape.dims), rs0, 0)
            dims = list(ag.shape.dims)
            dims[ag_dim] = factor
            dims.insert(ag_dim + 1, ag.shape.dims[ag_dim] // factor)
            new_bdims = [ag_dim] + [d + (d > ag_dim) for d in bdims]
            bc = comp.add("broadcast", Shape.array(et, dims), [new_ag], name="broadcast",
                          attrs={"dimensions": int_list_text(new_bdims)})
            replacement = comp.add("reshape", ag.shape, [bc], name="reshape")
        ag.replace_all_uses_with(replacement)
        if self.ctrl is None:
            self.ctrl = control_successor_set(comp)
        remove_instruction_and_unused_operands(comp, ag, ctrl_successors=self.ctrl)
        return True
