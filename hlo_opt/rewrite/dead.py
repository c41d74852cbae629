"""Removing dead instructions (XLA's RemoveInstructionAndUnusedOperands), shared by the
rewrite engine, the builder and the graph edits."""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction


def removable(inst: Instruction, ctrl_succ: set) -> bool:
    return (inst.parent is not None and inst.user_count == 0 and not inst.is_root
            and inst.opcode != "parameter" and not inst.control_predecessors
            and inst not in ctrl_succ and not inst.control_successors
            and not inst.has_side_effect())


def remove_dead(comp: Computation, inst: Instruction, ctrl_succ: set) -> int:
    """Remove ``inst`` if unused, then operands that became unused (XLA's
    RemoveInstructionAndUnusedOperands).  Returns how many were removed."""
    removed = 0
    stack = [inst]
    while stack:
        i = stack.pop()
        if not removable(i, ctrl_succ) or i.parent is not comp:
            continue
        ops = list(dict.fromkeys(i.operands))
        _remove(comp, i, bool(ctrl_succ))
        removed += 1
        stack.extend(ops)
    return removed


def _remove(comp: Computation, inst: Instruction, has_ctrl: bool) -> None:
    comp.remove_instruction(inst)  # O(1): the IR keeps control edges both ways
