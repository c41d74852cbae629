"""Live-range interference in one computation, the test copy-insertion removes copies by
(the role of XLA's CopyRemover): :func:`violations` lists every place where two values
that must share a buffer could be live at once.  A copy may go when removing it adds no
entry to the list.

What must share a buffer, and when that is safe (``a`` before ``b``: ``a`` is a strict
ancestor of ``b`` through operands or control edges, so it runs first in every order):

* in-place ops (dynamic-update-slice, scatter, fusions rooted in them, custom-calls with
  operand aliasing) write into their operand's buffer: the operand must not be read-only
  (a constant, an entry parameter not donated through ``input_output_alias``), nor a
  parameter the computation does not own, nor live out of the computation, and every
  other read of it must come before the op;
* a ``while`` runs in the buffers of its init at every element its body writes: same
  conditions, with the while as the op;
* a while body (and the entry, for donated parameters) ends with each written loop
  element back in that element's buffer.  Starting from the parameter's element, the
  chain of in-place updates of it must either produce the root's element, or be dead
  before the instruction that starts the root element's own chain (reading it in the same
  instruction is fine when that instruction can write in place, ``can_share``); the root
  element must not come from a parameter or a constant, nor be returned twice;
* a conditional branch returning a value the conditional does not forward (a phi) must
  return a value it computes, once;
* the entry's result must not be a constant or a non-donated parameter, nor hold one
  value twice.
"""
from __future__ import annotations

from hlo_opt.analysis.dataflow import ROOT, array_leaves, edit_keys
from hlo_opt.analysis.aliasing import can_share, in_place_pairs


def while_body(w):
    attr = w.called_attr
    return w.called[attr.index("body")] if isinstance(attr, tuple) else w.called[-1]


class Roles:
    """Which computations are while bodies / conditional branches, and of what."""

    def __init__(self, module, flow):
        self.module = module
        self.flow = flow
        self.body_of: dict = {}
        self.branch_of: dict = {}
        for comp in module.computations:
            for inst in comp.instructions:
                if inst.opcode == "while":
                    self.body_of.setdefault(while_body(inst), []).append(inst)
                elif inst.opcode == "conditional":
                    for c in inst.called:
                        self.branch_of.setdefault(c, []).append(inst)

    def slots(self, comp) -> list:
        """(parameter, parameter leaf, result leaf) of every loop-carried buffer ``comp``
        must write back: the elements its whiles do not pass through, or the entry's
        donated parameters whose result is not the parameter itself."""
        flow = self.flow
        out = []
        whiles = self.body_of.get(comp)
        if whiles:
            param = comp.parameters[0]
            leaves = [i for i in array_leaves(whiles[0].shape)
                      if any(not flow.passes_through(w, i) for w in whiles)]
            out.extend((param, i, i) for i in leaves)
        if comp is self.module.entry:
            for o, (p, pi) in sorted(flow.aliases.items()):
                if p >= len(comp.parameters):
                    continue
                param = comp.parameters[p]
                if flow.value_at(comp.root, o) != (param, pi):
                    out.append((param, pi, o))
        return out

    def owns(self, comp, value) -> bool:
        """May ``comp`` write into ``value``'s buffer in place (a parameter value is the
        caller's unless it is a slot of ``comp``)?"""
        inst, index = value
        if inst.opcode != "parameter" or inst.parent is not comp:
            return True
        return any(p is inst and pi == index for p, pi, _ in self.slots(comp))


def _in_place_item(flow, roles, comp, e, out) -> None:
    for j, ridx, _ in in_place_pairs(e, flow):
        v = flow.value_at(e.operands[j], ridx)
        if flow.is_read_only(v):
            out.add(("read-only", e, j))
        elif not roles.owns(comp, v):
            out.add(("not-owned", e, j))
        for r, k, idx in flow.readers(v):
            if r is ROOT:
                out.add(("live-out", e, j))
            elif r is e and k == j and idx == ridx:
                continue
            elif not flow.before(r, e):
                out.add(("order", e, j))


def _while_item(flow, roles, comp, w, i, out) -> None:
    v = flow.value_at(w.operands[0], i)
    if flow.is_read_only(v):
        out.add(("while-read-only", w, i))
    elif not roles.owns(comp, v):
        out.add(("while-not-owned", w, i))
    for r, k, idx in flow.readers(v):
        if r is ROOT:
            out.add(("while-live-out", w, i))
        elif r is w and idx == i:
            continue
        elif not flow.before(r, w):
            out.add(("while-order", w, i))


def _successors(flow, value) -> list:
    """Values written in place over ``value``'s buffer."""
    out = []
    for r, k, idx in flow.readers(value):
        if r is ROOT:
            continue
        for j, ridx, oidx in in_place_pairs(r, flow):
            if j == k and ridx == idx:
                out.append(flow.value_at(r, oidx))
    return out


def _chain_start(flow, value, limit: int):
    """Follow in-place updates backwards to the value whose definition starts the
    buffer's chain."""
    cur = value
    for _ in range(limit):
        inst, index = cur
        pairs = [p for p in in_place_pairs(inst, flow) if p[2] == index]
        if not pairs:
            return cur
        j, ridx, _ = pairs[0]
        cur = flow.value_at(inst.operands[j], ridx)
    return cur


def _slot_item(flow, roles, comp, param, pi, o, out) -> None:
    limit = comp.instruction_count() + 1
    chain = [(param, pi)]
    for _ in range(limit):
        succ = _successors(flow, chain[-1])
        if len(succ) > 1:
            out.add(("slot-fork", comp, o))
        if len(succ) != 1 or succ[0] in chain:
            break
        chain.append(succ[0])
    last = chain[-1]
    r = flow.value_at(comp.root, o)
    if any(x is ROOT and idx != o for x, _, idx in flow.readers(r)):
        out.add(("slot-twice", comp, o))
    if r in chain:
        if r != last:
            out.add(("slot-stale", comp, o))
        return
    start = _chain_start(flow, r, limit)
    if start in chain:
        out.add(("slot-fork", comp, o))
        return
    first = start[0]
    if first.opcode == "parameter" or flow.is_read_only(start):
        out.add(("slot-source", comp, o))
        return
    for rd, k, idx in flow.readers(last):
        if rd is ROOT:
            out.add(("slot-live-out", comp, o))
        elif flow.before(rd, first):
            continue
        elif rd is first and (first.opcode == "copy" or
                              can_share(flow, first, k, idx, start[1])):
            continue
        else:
            out.add(("slot-order", comp, o))


def _branch_item(flow, roles, comp, out) -> None:
    for cond in roles.branch_of.get(comp, ()):
        for i in array_leaves(cond.shape):
            if flow.value_at(cond, i) != (cond, i):
                continue  # forwarded, not a phi
            r = flow.value_at(comp.root, i)
            if r[0].opcode == "parameter" or flow.is_read_only(r):
                out.add(("branch-source", comp, i))
            if any(x is ROOT and idx != i for x, _, idx in flow.readers(r)):
                out.add(("branch-twice", comp, i))


def entry_root_problems(flow, comp) -> list:
    """Result leaves of the entry that need a copy: a read-only value (unless it is the
    donated parameter the leaf aliases), or a value already returned at an earlier leaf
    (the copy goes to the leaf that is not donated when one of the two is)."""
    root = comp.root
    aliases = flow.aliases
    seen = {}
    out = []
    for o in array_leaves(root.shape):
        v = flow.value_at(root, o)
        alias = aliases.get(o)
        if flow.is_read_only(v) and not (v[0].opcode == "parameter" and alias ==
                                         (v[0].parameter_number, v[1])):
            out.append(o)
        elif v in seen:
            out.append(seen[v] if o in aliases and seen[v] not in aliases else o)
        seen.setdefault(v, o)
    return out


class Checker:
    """The interference list of each computation, kept per item (an in-place op, a
    while, a loop slot, a branch's results, the entry's results) with what each item's
    check looked at, so that a graph edit re-checks only the items it can change."""

    def __init__(self, flow, roles):
        self.flow = flow
        self.roles = roles
        self.results: dict = {}
        self._seen: dict = {}      # key -> (instructions looked at, ancestry targets)
        self._by_inst: dict = {}
        self._by_target: dict = {}
        self._items: dict = {}

    def items(self, comp) -> list:
        keys = self._items.get(comp)
        if keys is None:
            keys = []
            for inst in comp.instructions:
                if inst.opcode == "while":
                    keys += [("while", comp, inst, i) for i in array_leaves(inst.shape)
                             if not self.flow.passes_through(inst, i)]
                elif in_place_pairs(inst):
                    keys.append(("in-place", comp, inst))
            keys += [("slot", comp, p, pi, o) for p, pi, o in self.roles.slots(comp)]
            if comp in self.roles.branch_of:
                keys.append(("branch", comp))
            if comp is self.roles.module.entry:
                keys.append(("entry", comp))
            self._items[comp] = keys
        return keys

    def _check(self, key) -> frozenset:
        flow, roles = self.flow, self.roles
        out: set = set()
        kind, comp = key[0], key[1]
        if kind == "while":
            _while_item(flow, roles, comp, key[2], key[3], out)
        elif kind == "in-place":
            _in_place_item(flow, roles, comp, key[2], out)
        elif kind == "slot":
            _slot_item(flow, roles, comp, key[2], key[3], key[4], out)
        elif kind == "branch":
            _branch_item(flow, roles, comp, out)
        else:
            out.update(("entry-result", comp, o) for o in entry_root_problems(flow, comp))
        return frozenset(out)

    def evaluate(self, key) -> None:
        self._unindex(key)
        self.flow.record()
        self.results[key] = self._check(key)
        seen = self._seen[key] = self.flow.stop()
        for inst in seen[0]:
            self._by_inst.setdefault(inst, set()).add(key)
        for inst in seen[1]:
            self._by_target.setdefault(inst, set()).add(key)

    def _unindex(self, key) -> None:
        old = self._seen.pop(key, None)
        if old is None:
            return
        for inst in old[0]:
            self._by_inst.get(inst, set()).discard(key)
        for inst in old[1]:
            self._by_target.get(inst, set()).discard(key)

    def violations(self, comp) -> set:
        out = set()
        for key in self.items(comp):
            if key not in self.results:
                self.evaluate(key)
            out |= self.results[key]
        return out

    def affected_by(self, inst, descendants) -> set:
        """Items whose check may change when copy ``inst`` is taken out (its operand
        takes its place in its users, its control edges go): those that looked at what
        changes, or asked about the ancestry of one of its ``descendants``."""
        keys = set()
        for x in edit_keys(inst):
            keys |= self._by_inst.get(x, set())
        for d in descendants:
            keys |= self._by_target.get(d, set())
        return keys

    def saved(self, keys) -> dict:
        return {k: (self.results[k], self._seen[k]) for k in keys if k in self.results}

    def restore(self, saved: dict) -> None:
        for key, (result, seen) in saved.items():
            self._unindex(key)
            self.results[key] = result
            self._seen[key] = seen
            for inst in seen[0]:
                self._by_inst.setdefault(inst, set()).add(key)
            for inst in seen[1]:
                self._by_target.setdefault(inst, set()).add(key)


def violations(flow, roles, comp) -> set:
    """Every interference in ``comp`` (a fresh check of all its items)."""
    return Checker(flow, roles).violations(comp)


__all__ = ["Checker", "Roles", "entry_root_problems", "violations", "while_body"]
