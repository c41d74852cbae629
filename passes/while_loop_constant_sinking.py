"""``while-loop-constant-sinking``: XLA's WhileLoopConstantSinking.

For a loop-invariant element (the body passes ``get-tuple-element(param, i)`` straight to
root operand ``i``) whose init value is a constant, the body's other uses of that element
and the condition's uses read a clone of the constant instead, so later passes can fold
through it.  The element itself stays (simplify-while-loops removes it once it is dead).
A body or condition shared with another caller is first cloned for this loop (as XLA
does), when there is something to sink.
"""
from __future__ import annotations

from hlo_opt.ir.clone import clone_computation
from hlo_opt.ir.instruction import Instruction

from hlo_opt.rewrite.rules import has_opcode
from ._while_util import _called_index, while_body, while_cond


def _clone_constant(comp, c: Instruction) -> Instruction:
    if c.opcode == "broadcast":
        op = _clone_constant(comp, c.operands[0])
        return comp.add("broadcast", c.shape, [op], attrs=dict(c.attrs))
    new = comp.add("constant", c.shape, payload=c.payload)
    new.cache_literal(c.cached_literal)
    return new


class WhileLoopConstantSinking:
    name = "while-loop-constant-sinking"

    def __init__(self, sink_broadcast_of_constants: bool = False,
                 sink_only_scalar_constants: bool = False):
        self.sink_broadcast_of_constants = sink_broadcast_of_constants
        self.sink_only_scalar_constants = sink_only_scalar_constants

    def _sinkable(self, v: Instruction) -> bool:
        if v.opcode == "constant":
            ok = not v.literal.elided
        else:
            ok = (self.sink_broadcast_of_constants and v.opcode == "broadcast"
                  and v.operands[0].opcode == "constant")
        return ok and (not self.sink_only_scalar_constants or v.shape.rank == 0)

    def run(self, module) -> bool:
        if not has_opcode(module, ("while",)):
            return False
        callers: dict = {}
        for comp in module.computations:
            for i in comp.instructions:
                for c in i.called:
                    callers[c] = callers.get(c, 0) + 1
        changed = False
        for comp in module.computation_post_order():
            for w in comp.instructions:
                if w.opcode != "while" or w.operands[0].opcode != "tuple":
                    continue
                body, cond = while_body(w), while_cond(w)
                if callers.get(body) != 1 or callers.get(cond) != 1 or body is cond:
                    if not self._anything_to_sink(w, body):
                        continue
                    body = self._own(module, comp, w, "body", callers)
                    cond = self._own(module, comp, w, "condition", callers)
                changed |= self._sink(w, body, cond)
        return changed

    def _anything_to_sink(self, w, body) -> bool:
        root = body.root
        if root.opcode != "tuple":
            return False
        init = w.operands[0]
        return any(g.opcode == "get-tuple-element" and root.operands[g.attr("index")] is g
                   and self._sinkable(init.operands[g.attr("index")])
                   for g in body.parameters[0].users)

    @staticmethod
    def _own(module, comp, w, attr: str, callers: dict):
        """``w``'s own copy of its ``attr`` computation (cloned when another caller, or
        the loop's other computation, shares it)."""
        k = _called_index(w, attr)
        c = w.called[k]
        other = w.called[1 - k] if len(w.called) == 2 else None
        if callers.get(c) == 1 and c is not other:
            return c
        new = clone_computation(c, {}, name=c.name + ".clone")
        module.add_computation(new, before=comp)
        called = list(w.called)
        called[k] = new
        w.called = called
        callers[c] = callers.get(c, 1) - 1
        callers[new] = 1
        return new

    def _sink(self, w, body, cond) -> bool:
        init = w.operands[0]
        root = body.root
        if root.opcode != "tuple":
            return False
        changed = False
        bparam = body.parameters[0]
        invariant = [g for g in bparam.users if g.opcode == "get-tuple-element"
                     and root.operands[g.attr("index")] is g]
        for g in invariant:
            idx = g.attr("index")
            value = init.operands[idx]
            if not self._sinkable(value):
                continue
            others = [u for u in g.users if u is not root]
            if others or any(o is g for i, o in enumerate(root.operands) if i != idx):
                c = _clone_constant(body, value)
                for u in others:
                    u.replace_operand_with(g, c)
                for i, o in enumerate(root.operands):
                    if o is g and i != idx:
                        root.replace_operand(i, c)
                changed = True
            for cg in [u for u in cond.parameters[0].users
                       if u.opcode == "get-tuple-element" and u.attr("index") == idx]:
                if cg.user_count or cg.is_root:
                    c = _clone_constant(cond, value)
                    cg.replace_all_uses_with(c)
                    changed = True
        return changed
