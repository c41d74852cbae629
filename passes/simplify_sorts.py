"""``simplify-sorts``: XLA's SortSimplifier.

A variadic sort whose result is read only through get-tuple-element drops the operands
that neither a user reads nor the comparator looks at; a sort left with one operand
returns a plain array.  The comparator is rebuilt with only the used parameter pairs.
"""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.rules import comp_has_opcode, control_successors, has_opcode, remove_dead


def _shrink_comparator(module, comp: Computation, keep: list[int]) -> Computation:
    from hlo_opt.ir.clone import clone_computation
    new = clone_computation(comp, {}, comp.name + ".simplified")
    params = []
    for new_i, old_i in enumerate(keep):
        for side in (0, 1):
            p = new.parameters[2 * old_i + side]
            p.payload = str(2 * new_i + side)
            params.append(p)
    for p in new.parameters:
        if p not in params:
            assert p.user_count == 0
            p.detach_operands()
            new.unlink(p)  # its name stays taken
            p.parent = None
    new.parameters = params
    for inst in new.instructions:
        inst.parent = new
    module.add_computation(new, before=comp)
    return new


class SortSimplifier:
    name = "simplify-sorts"

    def run(self, module) -> bool:
        changed = False
        if not has_opcode(module, ("sort",)):
            return False
        for comp in list(module.computations):
            if not comp_has_opcode(comp, ("sort",)):
                continue
            for sort in comp.post_order():
                if sort.opcode == "sort" and sort.parent is comp:
                    changed |= self._simplify(module, comp, sort)
        return changed

    def _simplify(self, module, comp, sort) -> bool:
        if not sort.shape.is_tuple() or sort.is_root:
            return False
        used = set()
        for u in sort.users:
            if u.opcode != "get-tuple-element":
                return False
            used.add(u.attr("index"))
        cmp = sort.to_apply
        for i in range(len(sort.operands)):
            if cmp.parameters[2 * i].user_count or cmp.parameters[2 * i + 1].user_count:
                used.add(i)
        if len(used) == len(sort.operands):
            return False
        keep = sorted(used)
        new_cmp = _shrink_comparator(module, cmp, keep)
        ops = [sort.operands[i] for i in keep]
        shape = ops[0].shape if len(ops) == 1 else Shape.tuple([o.shape for o in ops])
        new = comp.add("sort", shape, ops, attrs=dict(sort.attrs), called=[new_cmp],
                       called_attr=sort.called_attr)
        remap = {old: n for n, old in enumerate(keep)}
        ctrl = control_successors(comp)
        for u in list(sort.users):
            if len(ops) == 1:
                u.replace_all_uses_with(new)
                remove_dead(comp, u, ctrl)
            else:
                u.replace_operand_with(sort, new)
                u.set_attr("index", remap[u.attr("index")])
        remove_dead(comp, sort, ctrl)
        if not any(cmp in i.called for c in module.computations for i in c.instructions):
            module.remove_computation(cmp)
        return True
