"""The values copy-insertion reasons about, in the spirit of XLA's HloDataflowAnalysis (SSA
form, bitcasts not defining values).

* A *value* is ``(defining instruction, leaf index)``.  tuple, get-tuple-element,
  bitcast, opt-barrier and domain only forward values; a ``while`` forwards the elements
  its body passes through unchanged (XLA's phi elimination, cycles of swapped elements
  included), a ``call`` / ``conditional`` what every callee returns from its parameters;
  everything else defines its results.
* The *readers* of a value: the instructions that read its buffer (found through the
  forwarding positions), with the operand and leaf they read it at, and ``ROOT`` entries
  for the result indices of the computation where it is live out.
* Queries can be recorded (:meth:`Dataflow.record`): what they looked at, so a check
  built on them is redone only when one of those instructions changes.

Which outputs share an operand's buffer is in ``aliasing.py``.
"""
from __future__ import annotations

import re

_FORWARDING = frozenset({"bitcast", "opt-barrier", "domain"})
ROOT = "ROOT"


def subshape(shape, index):
    for k in index:
        shape = shape.tuple_shapes[k]
    return shape


def array_leaves(shape, prefix=()):
    """Leaf indices of the array leaves of ``shape`` (tokens and opaques left out)."""
    if shape.is_tuple():
        out = []
        for k, s in enumerate(shape.tuple_shapes):
            out.extend(array_leaves(s, prefix + (k,)))
        return out
    return [prefix] if shape.is_array() else []


def entry_aliases(module) -> dict:
    """``input_output_alias``: output index -> (parameter number, parameter index)."""
    raw = module.header_attrs.get("input_output_alias", "")
    out = {}
    for m in re.finditer(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}", raw):
        def idx(text):
            return tuple(int(x) for x in text.replace(" ", "").split(",") if x)
        out[idx(m.group(1))] = (int(m.group(2)), idx(m.group(3)))
    return out


def output_to_operand_aliasing(inst) -> list:
    """(operand number, operand index, output index) of a custom-call's aliasing."""
    raw = inst.attrs.get("output_to_operand_aliasing", "")
    out = []
    for m in re.finditer(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*\)", raw):
        def idx(text):
            return tuple(int(x) for x in text.replace(" ", "").split(",") if x)
        out.append((int(m.group(2)), idx(m.group(3)), idx(m.group(1))))
    return out


def fp_key(inst, index=()):
    """What a query looking at ``inst`` (at leaf ``index``) depends on: one element of a
    tuple, or the whole instruction."""
    if inst.opcode == "tuple" and index:
        return (inst, index[0])
    return inst


def edit_keys(inst) -> list:
    """The footprint keys an edit of ``inst`` (its operand slots rewired, it removed)
    can change: it, its operands, each user (a tuple: the slots that read it)."""
    keys = [inst, *inst.operands]
    for user in inst.users:
        if user.opcode == "tuple":
            keys.extend((user, k) for k, o in enumerate(user.operands) if o is inst)
        else:
            keys.append(user)
    return keys


class Dataflow:
    """Values and readers of one module (recomputed on demand; call :meth:`invalidate`
    after editing the graph)."""

    def __init__(self, module):
        self.module = module
        self.callers = module.callers()
        self.aliases = entry_aliases(module)
        self._passthrough: dict = {}
        self.invalidate()

    def invalidate(self) -> None:
        self._values: dict = {}
        self._readers: dict = {}
        self._ancestors: dict = {}
        self._users: dict = {}
        self._operand_slots: dict = {}
        self._fp = None       # instructions looked at since record() (None: not recording)
        self._targets = None  # instructions whose ancestors were asked about

    def record(self) -> None:
        """Start noting what the queries look at (see :meth:`stop`)."""
        self._fp = set()
        self._targets = set()

    def stop(self) -> tuple:
        """(instructions looked at, instructions whose ancestry was used) since
        :meth:`record`: a check built from these queries can only change when one of
        them changes."""
        out = (self._fp, self._targets)
        self._fp = None
        self._targets = None
        return out

    def invalidate_values(self, *edited) -> None:
        """Forget values and readers (cheap to recompute), and the user lists of the
        ``edited`` instructions; keep the ancestor sets."""
        self._values = {}
        self._readers = {}
        for inst in edited:
            self._users.pop(inst, None)
            self._operand_slots.pop(inst, None)

    def forget_ancestry(self, insts) -> dict:
        """Drop the cached ancestor sets of ``insts``; returns them (for
        :meth:`restore_ancestry`)."""
        return {i: self._ancestors.pop(i) for i in insts if i in self._ancestors}

    def restore_ancestry(self, dropped: dict) -> None:
        self._ancestors.update(dropped)

    # ---- values ---------------------------------------------------------------------------
    def value_at(self, inst, index=()):
        key = (inst, index)
        hit = self._values.get(key)
        if hit is None:
            outer = self._fp
            self._fp = {fp_key(inst, index)}
            v = self._value_at(inst, index)
            hit = self._values[key] = (v, self._fp)
            self._fp = outer
        if self._fp is not None:
            self._fp.update(hit[1])
        return hit[0]

    def _value_at(self, inst, index):
        op = inst.opcode
        if op == "tuple":
            if not index:
                return (inst, ())
            return self.value_at(inst.operands[index[0]], index[1:])
        if op == "get-tuple-element":
            return self.value_at(inst.operands[0], (inst.attr("index"),) + index)
        if op in _FORWARDING and inst.operands:
            return self.value_at(inst.operands[0], index)
        if op == "while" and index and self.passes_through(inst, index):
            return self.value_at(inst.operands[0], index)
        if op == "call":
            return self._through_callees(inst, [(inst.called[0], 0)], index)
        if op == "conditional":
            return self._through_callees(
                inst, [(c, k + 1) for k, c in enumerate(inst.called)], index)
        return (inst, index)

    def _through_callees(self, inst, callees, index):
        """The caller's operand value every callee returns at ``index``, if they all
        return the same one from their parameters; else the instruction defines it."""
        found = None
        for comp, first in callees:
            v = self.value_at(comp.root, index)
            if v[0].opcode != "parameter" or v[0].parent is not comp:
                return (inst, index)
            operand = inst.operands[first + v[0].parameter_number]
            outer = self.value_at(operand, v[1])
            if found is not None and outer != found:
                return (inst, index)
            found = outer
        return found if found is not None else (inst, index)

    def passes_through(self, w, index) -> bool:
        """IndicesToCopyForWhile's test: is the loop's value at ``index`` its init value
        (the body returns it unchanged, possibly through a cycle of swapped elements all
        starting from the same value)?"""
        key = (w, index)
        cached = self._passthrough.get(key)
        if cached is None:
            cached = self._passthrough[key] = self._passes_through(w, index)
        return cached

    def _passes_through(self, w, index) -> bool:
        body = w.called[1] if w.called_attr == ("condition", "body") else w.called[-1]
        param = body.parameters[0]
        init = w.operands[0]
        reals, seen, stack = set(), set(), [index]
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            reals.add(self.value_at(init, i))
            r = self.value_at(body.root, i)
            if r[0] is param:
                stack.append(r[1])
            else:
                return False
        return reals == {self.value_at(init, index)}

    def is_read_only(self, value) -> bool:
        inst, index = value
        if inst.opcode == "constant":
            return True
        if inst.opcode != "parameter" or inst.parent is not self.module.entry:
            return False
        return (inst.parameter_number, index) not in set(self.aliases.values())

    # ---- readers ----------------------------------------------------------------------------
    def readers(self, value) -> list:
        """(instruction, operand number, leaf index read) for every read of ``value`` in
        its computation, and (ROOT, None, root index) where it is live out."""
        hit = self._readers.get(value)
        if hit is None:
            outer = self._fp
            self._fp = set()
            found = self._find_readers(value)
            hit = self._readers[value] = (found, self._fp)
            self._fp = outer
        if self._fp is not None:
            self._fp.update(hit[1])
        return hit[0]

    def _find_readers(self, value) -> list:
        out = []
        seen = set()
        stack = [value]
        fp = self._fp
        while stack:
            pos = stack.pop()
            if pos in seen:
                continue
            seen.add(pos)
            inst, idx = pos
            fp.add(fp_key(inst, idx))
            comp = inst.parent
            if comp is not None and comp.root is inst:
                out.append((ROOT, None, idx))
            by_index, others = self._user_index(inst)
            if idx:
                for gte in by_index.get(idx[0], ()):
                    stack.append((gte, idx[1:]))
            for user in others:
                if user.opcode != "tuple":
                    fp.add(user)
                for j in self._slots(user).get(inst, ()):
                    self._follow(user, j, idx, stack, out)
        return out

    def operand_moved(self, user, k: int, old, new) -> None:
        """Keep the operand-number index of ``user`` current after
        ``user.replace_operand(k, new)`` replaced ``old``."""
        cached = self._operand_slots.get(user)
        if cached is None:
            return
        ks = cached.get(old, [])
        if k in ks:
            ks.remove(k)
            if not ks:
                del cached[old]
        cached.setdefault(new, []).append(k)

    def _slots(self, user) -> dict:
        """operand -> the operand numbers it fills in ``user``."""
        cached = self._operand_slots.get(user)
        if cached is None:
            cached = {}
            for j, o in enumerate(user.operands):
                cached.setdefault(o, []).append(j)
            self._operand_slots[user] = cached
        return cached

    def _user_index(self, inst):
        """({tuple index: get-tuple-element users}, other users) of ``inst``."""
        cached = self._users.get(inst)
        if cached is None:
            by_index, others = {}, []
            for user in inst.users:
                if user.opcode == "get-tuple-element":
                    by_index.setdefault(user.attr("index"), []).append(user)
                else:
                    others.append(user)
            cached = self._users[inst] = (by_index, others)
        return cached

    def _follow(self, user, j, idx, stack, out) -> None:
        op = user.opcode
        if op == "tuple":
            stack.append((user, (j,) + idx))
            return
        if op in _FORWARDING:
            stack.append((user, idx))
            return
        out.append((user, j, idx))
        if op == "while" and idx and self.passes_through(user, idx):
            stack.append((user, idx))
        elif op in ("call", "conditional"):
            for k in array_leaves(user.shape):
                if self.value_at(user, k) == self.value_at(user.operands[j], idx):
                    stack.append((user, k))

    # ---- order --------------------------------------------------------------------------------
    def ancestors(self, inst) -> set:
        """Instructions ``inst`` transitively depends on (operands and control
        predecessors), itself excluded."""
        cached = self._ancestors.get(inst)
        if cached is None:
            cached = set()
            stack = list(inst.operands) + list(inst.control_predecessors)
            while stack:
                x = stack.pop()
                if x in cached:
                    continue
                cached.add(x)
                stack.extend(x.operands)
                stack.extend(x.control_predecessors)
            self._ancestors[inst] = cached
        return cached

    def before(self, a, b) -> bool:
        """Does ``a`` execute strictly before ``b`` in every order?"""
        if self._fp is not None:
            self._fp.add(a)
            self._fp.add(b)
        if self._targets is not None:
            self._targets.add(b)
        return a is not b and a in self.ancestors(b)

    def descendants(self, inst) -> set:
        """Instructions that depend on ``inst`` (users, control successors), itself
        included: the only ones whose ancestor sets can hold it."""
        out = {inst}
        stack = [inst]
        while stack:
            x = stack.pop()
            for y in x.users + x.control_successors:
                if y not in out:
                    out.add(y)
                    stack.append(y)
        return out


__all__ = ["Dataflow", "ROOT", "array_leaves", "edit_keys", "entry_aliases", "fp_key",
           "output_to_operand_aliasing", "subshape"]
