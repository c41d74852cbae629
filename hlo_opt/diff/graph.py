"""One side of a diff: a module flattened into integer-indexed arrays.

Instructions of every computation are numbered callees-first, operands before users, so a
single forward sweep sees every operand (and every called computation) before its user.
The matchers work on these arrays only; nothing here is quadratic.

"Effective" edges see through fusion and call boundaries: inside a computation that has a
single ``fusion``/``call`` caller, a use of ``parameter(k)`` is also a use of the caller's
operand ``k``, and the users of the caller are also users of the called root.  That is what
lets an instruction of the entry be matched to the same instruction after a pass moved it
into a fusion.
"""
from __future__ import annotations

from ..ir.attributes import COMPACT_ATTRS
from ..ir.module import HloModule
from ..ir.opcodes import CALLED_COMPUTATION_ATTRS

INLINED_CALLERS = ("fusion", "call")
_SKIP_ATTRS = frozenset(CALLED_COMPUTATION_ATTRS) | {"metadata", "control-predecessors"}


class Side:
    """A module as arrays indexed by instruction id (0..n-1) and computation id."""

    def __init__(self, module: HloModule, label: str = ""):
        self.module = module
        self.label = label or module.filename
        comps = module.computation_post_order()
        self.comps = comps
        self.comp_id = {c: i for i, c in enumerate(comps)}
        insts = []
        comp_of: list[int] = []
        self.comp_range: list[tuple[int, int]] = []
        for ci, comp in enumerate(comps):
            start = len(insts)
            insts.extend(_print_order(comp))
            comp_of.extend([ci] * (len(insts) - start))
            self.comp_range.append((start, len(insts)))
        self.insts = insts
        self.comp_of = comp_of
        self.n = n = len(insts)
        index = {inst: i for i, inst in enumerate(insts)}
        self.index = index
        self.opcode = [inst.opcode for inst in insts]
        self.ops = [[index[o] for o in inst.operands] for inst in insts]
        users: list[list[int]] = [[] for _ in range(n)]
        for i, ops in enumerate(self.ops):
            for o in ops:
                lst = users[o]
                if not lst or lst[-1] != i:
                    users[o].append(i)
        self.users = users
        comp_id = self.comp_id
        self.called = [[comp_id[c] for c in inst.called if c in comp_id] for inst in insts]
        self.comp_root = [index[c.root] if c.root is not None else -1 for c in comps]
        self.comp_params = [[index[p] if p is not None else -1 for p in c.parameters]
                            for c in comps]
        self.callers: list[list[int]] = [[] for _ in comps]
        for i, cs in enumerate(self.called):
            for c in cs:
                self.callers[c].append(i)
        self.entry = comp_id[module.entry] if module.entry in comp_id else len(comps) - 1
        self.is_root = [False] * n
        for r in self.comp_root:
            if r >= 0:
                self.is_root[r] = True
        self._effective_edges()
        self._fuse_kind()

    # ---- effective edges through fusion / call boundaries -----------------------------
    def _effective_edges(self) -> None:
        n = self.n
        self.param_src = [-1] * n  # parameter inside an inlined callee -> caller operand
        self.inline_caller = [-1] * len(self.comps)  # comp -> its only fusion/call caller
        for ci in range(len(self.comps) - 1, -1, -1):  # callers before callees
            callers = self.callers[ci]
            if len(callers) != 1 or self.opcode[callers[0]] not in INLINED_CALLERS:
                continue
            caller = callers[0]
            self.inline_caller[ci] = caller
            cops = self.ops[caller]
            for k, p in enumerate(self.comp_params[ci]):
                if p >= 0 and k < len(cops):
                    src = cops[k]
                    self.param_src[p] = self.param_src[src] if self.param_src[src] >= 0 else src
        eff_ops = self.ops
        eff_users = self.users
        changed_ops: dict[int, list[int]] = {}
        extra_users: dict[int, list[int]] = {}
        for p in range(n):
            src = self.param_src[p]
            if src < 0:
                continue
            for u in self.users[p]:
                lst = changed_ops.get(u)
                if lst is None:
                    lst = changed_ops[u] = list(self.ops[u])
                for k, o in enumerate(self.ops[u]):
                    if o == p:
                        lst[k] = src
                extra_users.setdefault(src, []).append(u)
        for ci, caller in enumerate(self.inline_caller):
            root = self.comp_root[ci]
            if caller >= 0 and root >= 0 and self.users[caller]:
                extra_users.setdefault(root, []).extend(self.users[caller])
        if changed_ops:
            eff_ops = list(eff_ops)
            for u, lst in changed_ops.items():
                eff_ops[u] = lst
        if extra_users:
            eff_users = list(eff_users)
            for o, extra in extra_users.items():
                merged = list(self.users[o])
                seen = set(merged)
                for u in extra:
                    if u not in seen:
                        seen.add(u)
                        merged.append(u)
                eff_users[o] = merged
        self.eff_ops = eff_ops
        self.eff_users = eff_users

    def _fuse_kind(self) -> None:
        """comp id -> 'fused' when a fusion calls it, else 'called' / 'entry' / 'unused'."""
        kind = []
        for ci, callers in enumerate(self.callers):
            if ci == self.entry:
                kind.append("entry")
            elif any(self.opcode[c] == "fusion" for c in callers):
                kind.append("fused")
            elif callers:
                kind.append("called")
            else:
                kind.append("unused")
        self.comp_kind = kind

    # ---- helpers ----------------------------------------------------------------------
    def name(self, i: int) -> str:
        return self.insts[i].name

    def comp_name(self, ci: int) -> str:
        return self.comps[ci].name

    def fused_root(self, i: int) -> int:
        """The instruction inside an inlined callee that produces the value of ``i``: the
        root of the computation a single-output fusion/call ``i`` inlines, or, for
        ``get-tuple-element(fusion), index=k`` of a multi-output one, the root tuple's
        operand k; else -1."""
        op = self.opcode[i]
        if op == "get-tuple-element":
            caller = self.ops[i][0]
            root = self._inlined_root(caller)
            if root < 0 or self.opcode[root] != "tuple":
                return -1
            k = self.insts[i].attrs.get("index", "")
            if not k.isdigit() or int(k) >= len(self.ops[root]):
                return -1
            return self.ops[root][int(k)]
        if op not in INLINED_CALLERS:
            return -1
        root = self._inlined_root(i)
        return root if root >= 0 and self.opcode[root] != "tuple" else -1

    def _inlined_root(self, i: int) -> int:
        if self.opcode[i] not in INLINED_CALLERS or len(self.called[i]) != 1:
            return -1
        ci = self.called[i][0]
        return self.comp_root[ci] if self.inline_caller[ci] == i else -1


def _print_order(comp) -> list:
    """``comp.post_order()`` (the printing order), computed in one pass when the stored
    order already has operands first (always, for parsed text): post_order returns the
    stored order then."""
    order = comp.instructions
    seen: set = set()
    add = seen.add
    for inst in order:
        for o in inst.operands:
            if o not in seen:
                return comp.post_order()
        if inst.control_predecessors:
            for o in inst.control_predecessors:
                if o not in seen:
                    return comp.post_order()
        add(inst)
    return order


def attr_items(inst) -> tuple:
    """Attributes that carry meaning for matching: no metadata, no computation names."""
    attrs = inst.attrs
    if not attrs:
        return ()
    called = inst.called_attr
    items = [(k, v.replace(" ", "") if k in COMPACT_ATTRS else v) for k, v in attrs.items()
             if k not in _SKIP_ATTRS and k != called]
    if len(items) > 1:
        items.sort()
    return tuple(items)
