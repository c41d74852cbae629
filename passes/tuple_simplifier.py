"""TupleSimplifier (``tuple-simplifier``), as ``xla/hlo/transforms/simplifiers/tuple_simplifier.cc``:

- ``get-tuple-element(... get-tuple-element(tuple(a0, ..., an), i) ..., j)`` is replaced by
  the element the chain selects (the tuple goes once its last use does);
- ``tuple(get-tuple-element(x, 0), ..., get-tuple-element(x, n-1))`` over the whole of ``x``
  (same shape ignoring layout) is replaced by ``x``.

A replacement never drops a sharding the old instruction carried (``preserve_sharding``),
and control edges are relayed the way XLA's RelayControlDependenciesSafely does.
"""
from __future__ import annotations

from hlo_opt.rewrite.rules import comp_has_opcode
from .dce import control_successor_set, remove_instruction_and_unused_operands


def _latest_non_gte_ancestor_and_index(inst):
    index = []
    cur = inst
    while cur.opcode == "get-tuple-element":
        index.append(cur.attr("index"))
        cur = cur.operands[0]
    index.reverse()
    return cur, index


def _whole_tuple_source(tup):
    """``x`` if ``tup`` is tuple(gte(x, 0), ..., gte(x, n-1)) covering all of x."""
    top = None
    for i, op in enumerate(tup.operands):
        if op.opcode != "get-tuple-element" or op.attr("index") != i:
            return None
        if top is None:
            top = op.operands[0]
            if not top.shape.same_dims_and_type(tup.shape):
                return None
        elif op.operands[0] is not top:
            return None
    return top


class _Replacer:
    """ReplaceInstruction(old, new, preserve_sharding=true) with control-edge relaying."""

    def __init__(self, comp):
        self.comp = comp
        self.ctrl = control_successor_set(comp)

    def _successors(self, inst):
        return [u for u in self.comp.iter_instructions() if inst in u.control_predecessors]

    def replace(self, old, new) -> bool:
        if old is new:
            return False
        sharding = old.attrs.get("sharding")
        if sharding is not None and new.attrs.get("sharding") != sharding:
            return False
        if old.control_predecessors or old in self.ctrl:
            self._relay(old, new)
        old.replace_all_uses_with(new)
        if old.user_count == 0 and old is not self.comp.root:
            remove_instruction_and_unused_operands(self.comp, old, ctrl_successors=self.ctrl)
        return True

    def _relay(self, old, new) -> None:
        successors = self._successors(old)
        preds = list(old.control_predecessors)
        targets = old.users if old.user_count else successors
        for pred in preds:
            for t in targets:
                if t is not pred and pred not in t.control_predecessors:
                    t.add_control_predecessor(pred)
        for succ in successors:
            succ.control_predecessors = [p for p in succ.control_predecessors if p is not old]
            if succ is not new and new not in succ.control_predecessors:
                succ.add_control_predecessor(new)
        old.control_predecessors = []
        self.ctrl = control_successor_set(self.comp)


_TUPLE_OPS = frozenset(("tuple", "get-tuple-element"))


def run_tuple_simplifier(module, exclude_entry_computation: bool = False) -> bool:
    changed = False
    for comp in list(module.computations):
        if exclude_entry_computation and comp is module.entry:
            continue
        if not comp_has_opcode(comp, _TUPLE_OPS):
            continue  # nothing to simplify: skip the post order
        replacer = _Replacer(comp)
        for inst in comp.post_order():
            if inst.parent is not comp:
                continue
            if inst.opcode == "tuple":
                if not inst.operands:
                    continue
                top = _whole_tuple_source(inst)
                if top is not None:
                    changed |= replacer.replace(inst, top)
                continue
            if inst.opcode != "get-tuple-element":
                continue
            ancestor, index = _latest_non_gte_ancestor_and_index(inst)
            replacement = ancestor
            for i in index:
                if replacement.opcode != "tuple":
                    replacement = None
                    break
                replacement = replacement.operands[i]
            if replacement is not None:
                changed |= replacer.replace(inst, replacement)
    return changed


class TupleSimplifier:
    name = "tuple-simplifier"

    def __init__(self, exclude_entry_computation: bool = False):
        self.exclude_entry_computation = exclude_entry_computation

    def run(self, module) -> bool:
        return run_tuple_simplifier(module, self.exclude_entry_computation)
