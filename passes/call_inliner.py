"""CallInliner (``call-inliner``): replace each ``call`` by a copy of its callee
(``xla/service/call_inliner.cc``).

Computations are visited callees first, so nested calls are flattened bottom-up.  A call
is inlined unless it carries a ``backend_config``, sits in an async computation, or has the
frontend attribute ``inlineable="false"``.  Cloned instructions keep their names (made
unique in the module) and metadata; control edges inside the callee are kept, and the
call's own control predecessors and successors are relayed to the inlined body.
Afterwards ``dce`` removes the computations that are no longer called, as XLA does.
"""
from __future__ import annotations

import re

from hlo_opt.ir.instruction import Instruction

from .dce import control_successor_set, run_dce
from .flatten_call_graph import clone_into_module

_NOT_INLINEABLE_RE = re.compile(r'\binlineable\s*=\s*"false"')


def _async_computations(module) -> set:
    out = set()
    for comp in module.computations:
        for inst in comp.iter_instructions():
            if inst.opcode.startswith("async-"):
                out.update(inst.called)
    return out


def is_inlineable(inst, async_comps: set) -> bool:
    if inst.opcode != "call" or len(inst.called) != 1:
        return False
    if "backend_config" in inst.attrs or inst.parent in async_comps:
        return False
    fa = inst.attrs.get("frontend_attributes", "")
    return not (fa and _NOT_INLINEABLE_RE.search(fa))


def inline_call(call, ctrl_successors: set | None = None) -> dict:
    """Inline one ``call``; returns callee instruction -> new instruction.

    ``ctrl_successors``: the caller's instructions that are someone's control predecessor
    (computed when None; kept up to date when given)."""
    outer = call.parent
    if ctrl_successors is None:
        ctrl_successors = control_successor_set(outer)
    callee = call.called[0]
    mapping: dict = {}
    for inst in callee.post_order():
        if inst.opcode == "parameter":
            mapping[inst] = call.operands[inst.parameter_number]
            continue
        called = inst.called
        if inst.opcode == "fusion" and called and outer.module is not None:
            # each fusion owns its fused computation (XLA clones it with the fusion)
            called = [clone_into_module(outer.module, c) for c in called]
        clone = Instruction(inst.opcode, inst.shape, [mapping[o] for o in inst.operands],
                            dict(inst.attrs), inst.name, inst.payload, called,
                            inst.called_attr)
        clone.cache_literal(inst.cached_literal)
        outer.add_instruction(clone, inst.name)
        clone.control_predecessors = [mapping[p] for p in inst.control_predecessors
                                      if mapping[p].parent is outer]
        for p in call.control_predecessors:
            if p not in clone.control_predecessors:
                clone.add_control_predecessor(p)
        ctrl_successors.update(clone.control_predecessors)
        mapping[inst] = clone
    new_root = mapping[callee.root]
    if call in ctrl_successors:
        for user in outer.iter_instructions():
            if call in user.control_predecessors:
                user.control_predecessors = [new_root if p is call else p
                                             for p in user.control_predecessors]
        ctrl_successors.add(new_root)
    call.replace_all_uses_with(new_root)
    call.control_predecessors = []
    if call.user_count == 0 and call is not outer.root:
        outer.remove_instruction(call)
    return mapping


def run_call_inliner(module) -> bool:
    async_comps = _async_computations(module)
    changed = False
    for comp in module.computation_post_order():
        ctrl = None
        for inst in comp.post_order():
            if inst.parent is comp and is_inlineable(inst, async_comps):
                if ctrl is None:
                    ctrl = control_successor_set(comp)
                inline_call(inst, ctrl)
                changed = True
    if changed:
        run_dce(module)
    return changed


class CallInliner:
    name = "call-inliner"

    def run(self, module) -> bool:
        return run_call_inliner(module)
