"""HloDCE (``dce``): remove dead instructions and dead computations.

As XLA's default ``HloDCE()`` (``xla/hlo/transforms/simplifiers/hlo_dce.cc``) with
``remove_cross_partition_collective_ops=false`` and no call-graph analysis:

- computations are visited callers-first from the entry; in each, dead roots (no users, not
  the root, not a parameter, no control edges, no side effect) are removed together with
  the operands that become dead;
- unused outputs of multi-output fusions (a tuple fused root read only through
  get-tuple-element) are dropped from the fusion, and then the fused parameters nothing
  reads any more (with the fusion's matching operands);
- computations no longer reachable from the entry are removed.

Side effects follow ``HloInstruction::HasSideEffect``: the opcode's own effect, or any
called computation holding a side-effecting instruction.  The helpers here
(:func:`has_side_effect`, :func:`remove_instruction_and_unused_operands`, ...) are shared
by the other simplifiers.
"""
from __future__ import annotations

from hlo_opt.ir.opcodes import SIDE_EFFECT_POSSIBLE
from hlo_opt.ir.shape import Shape


class SideEffects:
    """``HasSideEffect`` with a per-computation cache (valid while computations are not
    edited to add side effects, i.e. for one pass run)."""

    def __init__(self):
        self._comp: dict = {}

    def computation(self, comp) -> bool:
        cached = self._comp.get(comp)
        if cached is None:
            self._comp[comp] = False  # recursion guard (call graphs are acyclic anyway)
            cached = False
            maybe = SIDE_EFFECT_POSSIBLE
            for i in comp.iter_instructions():  # any(self.instruction(i) ...), inlined
                if i.opcode in maybe and i.has_side_effect_no_recurse():
                    cached = True
                    break
                if i.called and any(self.computation(c) for c in i.called):
                    cached = True
                    break
            self._comp[comp] = cached
        return cached

    def instruction(self, inst) -> bool:
        if inst.has_side_effect_no_recurse():
            return True
        return any(self.computation(c) for c in inst.called)


def has_side_effect(inst) -> bool:
    return inst.has_side_effect()


def control_successor_set(comp) -> set:
    """Instructions of ``comp`` that are some instruction's control predecessor."""
    out = set()
    for inst in comp.iter_instructions():
        if inst.control_predecessors:
            out.update(inst.control_predecessors)
    return out


def _detach(comp, inst) -> None:
    """Remove ``inst`` (no users, not root, no control successors) in O(operands)."""
    comp.remove_instruction(inst)


def remove_instruction_and_unused_operands(comp, inst, effects: SideEffects | None = None,
                                           ctrl_successors: set | None = None) -> int:
    """XLA's RemoveInstructionAndUnusedOperands: remove dead ``inst`` and, transitively,
    operands left without users that are safely removable.  Returns how many went."""
    effects = effects or SideEffects()
    if ctrl_successors is None:
        ctrl_successors = control_successor_set(comp)
    removed = 0
    stack = [inst]
    while stack:
        cur = stack.pop()
        if cur.parent is not comp or cur.user_count or cur is comp.root:
            continue
        operands = list(dict.fromkeys(cur.operands))
        preds = cur.control_predecessors
        _detach(comp, cur)
        removed += 1
        if preds:
            ctrl_successors.clear()
            ctrl_successors.update(control_successor_set(comp))
        for op in operands:
            if (op.user_count == 0 and op is not comp.root and op.opcode != "parameter"
                    and not op.control_predecessors and op not in ctrl_successors
                    and not effects.instruction(op)):
                stack.append(op)
    return removed


def can_remove(inst, comp, effects: SideEffects, ctrl_successors: set) -> bool:
    """XLA's CanRemoveInstruction for the default DCE configuration."""
    if inst.parent is not comp or inst.user_count or inst is comp.root:
        return False
    if inst.opcode == "parameter":
        return False
    if inst.control_predecessors or inst in ctrl_successors:
        return False
    if inst.opcode == "custom-call" and inst.attr("custom_call_target", "") == "Sharding":
        src = inst.operands[0] if inst.operands else None
        if src is not None and (src is comp.root or src.opcode == "parameter"
                                or src.user_count != 1):
            return False
    if effects.instruction(inst):
        return False
    return True


def _remove_dead_roots(comp, effects: SideEffects) -> bool:
    root = comp.root
    for inst in comp.iter_instructions():
        if not inst.user_count and inst is not root and inst.opcode != "parameter":
            break
    else:
        return False  # nothing unused: nothing can_remove() would take
    ctrl = control_successor_set(comp)
    changed = False
    for inst in reversed(comp.post_order()):
        if can_remove(inst, comp, effects, ctrl):
            remove_instruction_and_unused_operands(comp, inst, effects, ctrl)
            changed = True
    return changed


def _remove_unused_fusion_outputs(fusion, effects: SideEffects, ctrl: set,
                                  callers: dict) -> bool:
    """XLA's RemoveMultiOutputFusionsUnusedOutputs for one fusion instruction."""
    fused = fusion.called[0]
    root = fused.root
    if (root.opcode != "tuple" or "sharding" in root.attrs
            or "output_to_operand_aliasing" in fusion.attrs or fusion.control_predecessors
            or fusion in ctrl or fusion.fusion_kind == "kCustom" or fusion.is_root
            or not fusion.user_count or callers.get(fused, 0) != 1):
        return False
    parent = fusion.parent
    users = fusion.users
    if any(u.opcode != "get-tuple-element" or u.control_predecessors or u in ctrl
           for u in users):
        return False
    used = {u.attr("index") for u in users}
    for i, op in enumerate(root.operands):
        if i not in used and effects.instruction(op):
            used.add(i)
    if len(used) == len(root.operands):
        return False
    kept = sorted(used)
    shapes = [fusion.shape.tuple_shapes[i] for i in kept]
    fusion.shape = shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
    if len(kept) > 1:
        new_index = {old: new for new, old in enumerate(kept)}
        for gte in users:
            gte.set_attr("index", new_index[gte.attr("index")])
        new_root = fused.add("tuple", fusion.shape, [root.operands[i] for i in kept])
        fused.root = new_root
    else:
        for gte in users:
            gte.replace_all_uses_with(fusion)
            if gte.user_count == 0 and gte is not parent.root:
                _detach(parent, gte)
        fused.root = root.operands[kept[0]]
    remove_instruction_and_unused_operands(fused, root, effects)
    return True


def call_counts(module) -> dict:
    """computation -> number of instructions calling it (call sites)."""
    counts: dict = {}
    for comp in module.computations:
        for inst in comp.iter_instructions():
            for callee in inst.called:
                counts[callee] = counts.get(callee, 0) + 1
    return counts


def _remove_dead_fused_parameters(fused, fusion) -> bool:
    """XLA's RemoveDeadParameters for a fused computation: a parameter without users (an
    output dropped above may leave one) is removed, the later ones renumbered, and the
    fusion instruction loses the matching operand."""
    dead = [p for p in fused.parameters if not p.user_count and p is not fused.root
            and not p.control_predecessors and not p.control_successors]
    if (not dead or fusion.parent is None or len(fusion.operands) != len(fused.parameters)
            or "output_to_operand_aliasing" in fusion.attrs):
        return False
    dead_numbers = set()
    for p in sorted(dead, key=lambda p: -p.parameter_number):  # last first: numbers hold
        dead_numbers.add(fused.remove_parameter(p))
    fusion.set_operands([op for i, op in enumerate(fusion.operands) if i not in dead_numbers])
    return True


def run_dce_on_computation(comp, effects: SideEffects, callers: dict,
                           fusion_of: dict | None = None) -> bool:
    changed = False
    fusions = [i for i in comp.iter_instructions() if i.opcode == "fusion" and i.called]
    if fusions:
        ctrl = control_successor_set(comp)
        for inst in fusions:
            if inst.parent is comp:
                changed |= _remove_unused_fusion_outputs(inst, effects, ctrl, callers)
            if fusion_of is not None and callers.get(inst.called[0], 0) == 1:
                fusion_of[inst.called[0]] = inst
    changed |= _remove_dead_roots(comp, effects)
    fusion = fusion_of.get(comp) if fusion_of else None
    if fusion is not None:
        changed |= _remove_dead_fused_parameters(comp, fusion)
    return changed


def run_dce(module) -> bool:
    effects = SideEffects()
    callers = call_counts(module)
    changed = False
    reached = {module.entry}
    agenda = [module.entry]
    fusion_of: dict = {}
    while agenda:
        comp = agenda.pop()
        changed |= run_dce_on_computation(comp, effects, callers, fusion_of)
        for inst in comp.iter_instructions():
            for callee in inst.called:
                if callee not in reached:
                    reached.add(callee)
                    agenda.append(callee)
    for comp in [c for c in module.computations if c not in reached]:
        module.remove_computation(comp)
        changed = True
    return changed


class HloDCE:
    name = "dce"

    def run(self, module) -> bool:
        return run_dce(module)
