"""``simplify-conditional``: the core of XLA's ConditionalSimplifier.

A conditional whose predicate (or branch index) is a constant, or that has a single
branch, is replaced by the chosen branch inlined on its operand (an out-of-range branch
index selects the last branch, as in XLA).  Conditionals whose branches have side effects
are left alone.  (XLA also removes unused outputs and merges duplicate ones; not done.)
"""
from __future__ import annotations

from hlo_opt.rewrite.rules import control_successors, has_opcode, remove_dead
from ._while_util import has_side_effects, inline
from .algsimp.predicates import scalar_value


def chosen_branch(cond):
    """Index of the branch a conditional takes when its selector is constant, else None."""
    n = len(cond.called)
    if n == 1:
        return 0
    sel = cond.operands[0]
    if sel.opcode != "constant" or sel.shape.num_elements() != 1 or sel.literal.elided:
        return None
    v = scalar_value(sel)
    if sel.shape.element_type == "pred":
        return 0 if v else 1  # true_computation, false_computation
    return v if 0 <= v < n else n - 1


class ConditionalSimplifier:
    name = "simplify-conditional"

    def run(self, module) -> bool:
        if not has_opcode(module, ("conditional",)):
            return False
        changed = False
        before = _reachable(module)
        for comp in list(module.computations):
            for c in comp.post_order():
                if c.opcode != "conditional" or c.parent is not comp or c.control_predecessors:
                    continue
                k = chosen_branch(c)
                if k is None or any(has_side_effects(b) for b in c.called):
                    continue
                if c in control_successors(comp):
                    continue
                new = inline(comp, c.called[k], [c.operands[1 + k]])
                c.replace_all_uses_with(new)
                remove_dead(comp, c, control_successors(comp))
                changed = True
        if changed:
            after = _reachable(module)
            for comp in list(module.computations):
                if comp in before and comp not in after:
                    module.remove_computation(comp)
        return changed


def _reachable(module) -> set:
    seen = set()
    stack = [module.entry] if module.entry is not None else []
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        for i in c.instructions:
            stack.extend(i.called)
    return seen
