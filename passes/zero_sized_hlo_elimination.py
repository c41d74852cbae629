"""``zero_sized_hlo_elimination``: XLA's ZeroSizedHloElimination.

Every instruction without side effects whose result is an array with no elements (and a
static shape) is replaced by an empty constant of its shape; what only fed it goes too.
"""
from __future__ import annotations

import numpy as np

from hlo_opt.ir.literal import Literal

from hlo_opt.rewrite.rules import control_successors, remove_dead


class ZeroSizedHloElimination:
    name = "zero_sized_hlo_elimination"

    def run(self, module) -> bool:
        fusion = {c for comp in module.computations for i in comp.instructions
                  if i.opcode == "fusion" for c in i.called}
        changed = False
        for comp in module.computations:
            if comp in fusion:
                continue
            ctrl = control_successors(comp)
            for inst in comp.post_order():
                s = inst.shape
                if (inst.parent is not comp or inst.has_side_effect() or not s.is_array()
                        or inst.opcode in ("constant", "parameter") or s.num_elements() != 0
                        or s.is_dynamic() or inst.control_predecessors or inst in ctrl):
                    continue
                lit = Literal(s, np.zeros(s.dims, dtype=s.dtype))
                new = comp.add("constant", s, payload=lit.to_text())
                new.cache_literal(lit)
                inst.replace_all_uses_with(new)
                remove_dead(comp, inst, ctrl)
                changed = True
        return changed
