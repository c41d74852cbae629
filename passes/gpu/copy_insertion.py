"""``copy-insertion``: XLA's CopyInsertion (xla/service/copy_insertion.cc) in its three
steps, over the control-flow computations (entry, while bodies and conditions, branches;
never fused or scalar computations):

1. *Add copies to resolve interference* (AddCopiesToResolveInterference), conservatively:
   for every ``while``, at each loop element its body does not pass through unchanged
   (an element that goes around the loop as it came in, or in a cycle of swapped
   elements that all start as one value, needs nothing): a copy of the init, a copy of
   the body parameter's element (all reads of it read the copy) and a copy of the body
   root's element, with a control edge from the parameter copy to the root copy; for a
   ``conditional``, a copy of every branch root element the conditional does not just
   forward; a copy of the operand of every in-place op (dynamic-update-slice, scatter,
   fusions rooted in them, custom-calls with operand aliasing); and, for parameters
   donated through ``input_output_alias`` whose result is not the parameter, the same
   parameter/root copy pair as for a loop.
2. *Remove unnecessary copies* (RemoveUnnecessaryCopies): every copy added, and every copy
   already there that does not change the layout, is tried in module order until nothing
   changes; it goes if the computation's live-range interference (``_copy_checks``) does
   not get worse without it.  So a body element updated in place keeps no copy, a
   read-only or still-needed init keeps its copy, an element read after its new value is
   computed keeps the parameter copy, one that cannot be computed in place (a reverse)
   keeps the root copy, swapped elements keep both.
3. *Add special-case copies* (AddSpecialCaseCopies): a constant or non-donated entry
   parameter in the entry's result, or one value at two places of it, is copied there.

Tokens are never copied.  Copies are value identities: the module computes the same
thing.  The pass reports a change only when the module text changed.
"""
from __future__ import annotations

from hlo_opt.ir.shape import Shape

from hlo_opt.analysis.dataflow import Dataflow, array_leaves
from hlo_opt.analysis.aliasing import in_place_pairs
from ._copy_checks import Checker, Roles, entry_root_problems, while_body
from hlo_opt.rewrite.graph import add_gte

_CONTROL_FLOW = frozenset({"while", "conditional", "call"})


def control_flow_computations(module) -> list:
    """The entry and the computations it reaches through while, conditional and call
    (not fused or scalar computations), callees first."""
    reached = {module.entry}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        for inst in comp.instructions:
            if inst.opcode in _CONTROL_FLOW:
                for c in inst.called:
                    if c not in reached:
                        reached.add(c)
                        stack.append(c)
    return [c for c in module.computation_post_order() if c in reached]


class _Inserter:
    def __init__(self, module):
        self.module = module
        self.flow = Dataflow(module)
        self.roles = Roles(module, self.flow)
        self.added: list = []        # copies step 1 added
        self.created: list = []      # get-tuple-element / tuple helpers step 1 created
        self._created: set = set()
        self._bodies: set = set()    # while bodies given their copies

    # ---- building blocks ------------------------------------------------------------------
    def _copy(self, comp, x):
        c = comp.add("copy", x.shape, [x], name="copy")
        self.added.append(c)
        return c

    def _gte(self, comp, x, k):
        g = add_gte(comp, x, k)
        self.created.append(g)
        self._created.add(g)
        return g

    def _tuple(self, comp, parts):
        t = comp.add("tuple", Shape.tuple([p.shape for p in parts]), parts, name="tuple")
        self.created.append(t)
        self._created.add(t)
        return t

    def deep_copy(self, comp, x, indices, reuse: bool) -> tuple:
        """``x`` with copies at the leaf ``indices``: (new instruction, {index: copy}).
        A tuple instruction whose only use is being rewritten (``reuse``) is edited in
        place; otherwise tuples are rebuilt from get-tuple-elements."""
        copies = {}

        def rec(inst, prefix, wanted, may_edit):
            if not wanted:
                return inst
            if not inst.shape.is_tuple():
                c = self._copy(comp, inst)
                copies[prefix] = c
                return c
            n = len(inst.shape.tuple_shapes)
            sub = [[w[1:] for w in wanted if w[0] == k] for k in range(n)]
            if inst.opcode == "tuple" and may_edit:
                for k in range(n):
                    op = inst.operands[k]
                    new = rec(op, prefix + (k,), sub[k],
                              op.opcode == "tuple" and op.user_count == 1)
                    if new is not op:
                        inst.replace_operand(k, new)
                return inst
            if inst.opcode == "tuple":
                parts = [rec(inst.operands[k], prefix + (k,), sub[k], False)
                         for k in range(n)]
            else:
                parts = [rec(self._gte(comp, inst, k), prefix + (k,), sub[k], False)
                         for k in range(n)]
            return self._tuple(comp, parts)
        return rec(x, (), list(indices), reuse), copies

    def param_copies(self, comp, param, indices) -> dict:
        """Copy the parameter's ``indices`` leaves; every read of them reads the copy."""
        copies = {}
        gtes: dict = {}
        for index in indices:
            extractors = self._extractors(param, index, gtes)
            src = extractors[0] if extractors else self._build_gte(comp, param, index)
            c = self._copy(comp, src)
            copies[index] = c
            for e in extractors or [src]:
                for user in e.users:
                    if user is not c:
                        user.replace_operand_with(e, c)
                if comp.root is e:
                    comp.root = c
        # users reading the parameter (or a part of it) whole: give them a view with copies
        self._redirect_whole_reads(comp, param, (), copies)
        return copies

    def _extractors(self, inst, index, gtes: dict) -> list:
        """The get-tuple-element chains that take leaf ``index`` out of ``inst``
        (``gtes`` caches each instruction's get-tuple-element users by index)."""
        if not index:
            return [inst]
        by_index = gtes.get(inst)
        if by_index is None:
            by_index = gtes[inst] = {}
            for user in inst.users:
                if user.opcode == "get-tuple-element":
                    by_index.setdefault(user.attr("index"), []).append(user)
        out = []
        for user in by_index.get(index[0], ()):
            out.extend(self._extractors(user, index[1:], gtes))
        return out

    def _build_gte(self, comp, inst, index):
        for k in index:
            inst = self._gte(comp, inst, k)
        return inst

    def _redirect_whole_reads(self, comp, inst, prefix, copies) -> None:
        inside = [i[len(prefix):] for i in copies if i[:len(prefix)] == prefix and
                  len(i) > len(prefix)]
        if not inside:
            return
        for user in inst.users:
            if user.opcode == "get-tuple-element":
                self._redirect_whole_reads(comp, user, prefix + (user.attr("index"),), copies)
                continue
            if user in self._created or (user.opcode == "copy" and
                                         any(user is c for c in copies.values())):
                continue
            view = self._view(comp, inst, prefix, copies)
            user.replace_operand_with(inst, view)
        if comp.root is inst:
            comp.root = self._view(comp, inst, prefix, copies)

    def _view(self, comp, inst, prefix, copies):
        if prefix in copies:
            return copies[prefix]
        if not any(i[:len(prefix)] == prefix for i in copies):
            return inst
        parts = [self._view(comp, self._gte(comp, inst, k), prefix + (k,), copies)
                 for k in range(len(inst.shape.tuple_shapes))]
        return self._tuple(comp, parts)

    def root_copies(self, comp, indices) -> dict:
        root = comp.root
        new, copies = self.deep_copy(comp, root, indices,
                                     root.opcode == "tuple" and root.user_count == 0)
        comp.root = new
        return copies

    # ---- step 1 ------------------------------------------------------------------------------
    def add_copies_for_while(self, comp, w) -> None:
        flow = self.flow
        indices = [i for i in array_leaves(w.shape) if not flow.passes_through(w, i)]
        if not indices:
            return
        init = w.operands[0]
        new_init, _ = self.deep_copy(comp, init, indices,
                                     init.opcode == "tuple" and init.user_count == 1)
        w.replace_operand(0, new_init)
        body = while_body(w)
        if body in self._bodies:
            return  # a body shared by several loops (an unflattened call graph) has them
        self._bodies.add(body)
        pcs = self.param_copies(body, body.parameters[0], indices)
        rcs = self.root_copies(body, indices)
        for i in indices:
            rcs[i].add_control_predecessor(pcs[i])

    def add_copies_for_conditional(self, cond) -> None:
        indices = [i for i in array_leaves(cond.shape)
                   if self.flow.value_at(cond, i) == (cond, i)]
        if not indices:
            return
        for branch in cond.called:
            self.root_copies(branch, indices)

    def add_copies_for_in_place(self, comp, inst) -> None:
        done = set()
        for j, ridx, _ in in_place_pairs(inst):
            if ridx or j in done or not inst.operands[j].shape.is_array():
                continue
            done.add(j)
            inst.replace_operand(j, self._copy(comp, inst.operands[j]))

    def add_copies_for_aliased_io(self) -> None:
        entry = self.module.entry
        slots = self.roles.slots(entry)
        if not slots:
            return
        pcs = {}
        for param, pi, o in slots:
            pcs[o] = self.param_copies(entry, param, [pi])[pi]
        rcs = self.root_copies(entry, [o for _, _, o in slots])
        for o, pc in pcs.items():
            rcs[o].add_control_predecessor(pc)

    def add_copies(self, comps) -> None:
        for comp in comps:
            for inst in comp.post_order():
                if inst.opcode == "while":
                    self.add_copies_for_while(comp, inst)
                elif inst.opcode == "conditional":
                    self.add_copies_for_conditional(inst)
                else:
                    self.add_copies_for_in_place(comp, inst)
        if self.module.entry is not None:
            self.add_copies_for_aliased_io()
        self.flow.invalidate()

    # ---- step 2 ------------------------------------------------------------------------------
    def try_remove(self, c, checker) -> bool:
        """Take copy ``c`` out if that adds no interference; else leave the graph as it
        was."""
        for comp in [c.parent, *[s.parent for s in self.roles.branch_of.get(c.parent, ())]]:
            if comp not in self._checked:
                checker.violations(comp)  # every item of the computations checked once
                self._checked.add(comp)
        descendants = self.flow.descendants(c)
        keys = checker.affected_by(c, descendants)
        saved = checker.saved(keys)
        comp = c.parent
        src = c.operands[0]
        uses = [(u, k) for u in c.users for k, o in enumerate(u.operands) if o is c]
        was_root = comp.root is c
        preds = list(c.control_predecessors)
        succs = list(c.control_successors)
        for u, k in uses:
            u.replace_operand(k, src)
            self.flow.operand_moved(u, k, c, src)
        if was_root:
            comp.root = src
        c.control_predecessors = []
        for s in succs:
            s.control_predecessors = [p for p in s.control_predecessors if p is not c]
        c.set_operands([])
        edited = [c, src]
        self.flow.invalidate_values(*edited)
        dropped = self.flow.forget_ancestry(descendants)
        for key in keys:
            checker.evaluate(key)
        if all(checker.results[k] <= saved[k][0] for k in keys if k in saved):
            comp.remove_instruction(c)
            return True
        c.set_operands([src])
        for u, k in uses:
            u.replace_operand(k, c)
            self.flow.operand_moved(u, k, src, c)
        if was_root:
            comp.root = c
        c.control_predecessors = preds
        for s in succs:
            s.add_control_predecessor(c)
        self.flow.invalidate_values(*edited)
        self.flow.forget_ancestry(descendants)
        self.flow.restore_ancestry(dropped)
        checker.restore(saved)
        return False

    def remove_unnecessary_copies(self, comps) -> None:
        added = set(self.added)
        existing = set()
        for comp in comps:
            for inst in comp.instructions:
                if inst.opcode == "copy" and inst.shape == inst.operands[0].shape and \
                        not inst.shape.is_tuple() and inst not in added:
                    existing.add(inst)
        # the copies just added go first, so a copy an earlier run left stays (the pass
        # is idempotent); then the ones that were there before
        every = [i for comp in self.module.computations for i in comp.instructions]
        order = [i for i in every if i in added] + [i for i in every if i in existing]
        checker = Checker(self.flow, self.roles)
        self._checked = set()
        changed = True
        while changed:
            changed = False
            for c in order:
                if c.parent is not None and self.try_remove(c, checker):
                    changed = True
            order = [c for c in order if c.parent is not None]

    # ---- step 3 ------------------------------------------------------------------------------
    def add_special_case_copies(self) -> None:
        entry = self.module.entry
        if entry is None:
            return
        self.flow.invalidate()
        indices = entry_root_problems(self.flow, entry)
        if indices:
            self.root_copies(entry, sorted(set(indices)))
            self.flow.invalidate()

    def cleanup(self) -> None:
        """Drop helper tuples that rebuild what they take apart, then dead helpers."""
        for t in [x for x in self.created if x.opcode == "tuple" and x.parent is not None]:
            src = _whole_source(t)
            if src is not None:
                t.replace_all_uses_with(src)
        for x in reversed(self.created):
            comp = x.parent
            if comp is not None and x.user_count == 0 and comp.root is not x:
                comp.remove_instruction(x)


def _whole_source(t):
    """``x`` when tuple ``t`` is tuple(gte(x, 0), ..., gte(x, n-1)) over all of x."""
    src = None
    for k, op in enumerate(t.operands):
        if op.opcode != "get-tuple-element" or op.attr("index") != k:
            return None
        if src is None:
            src = op.operands[0]
        elif op.operands[0] is not src:
            return None
    if src is None or not src.shape.is_tuple() or \
            len(src.shape.tuple_shapes) != len(t.operands):
        return None
    return src


class CopyInsertion:
    name = "copy-insertion"

    def run(self, module) -> bool:
        if module.entry is None:
            return False
        comps = control_flow_computations(module)
        before = {c: c.to_text() for c in comps}
        ins = _Inserter(module)
        ins.add_copies(comps)
        ins.remove_unnecessary_copies(comps)
        ins.add_special_case_copies()
        ins.cleanup()
        return any(before[c] != c.to_text() for c in comps)


__all__ = ["CopyInsertion", "control_flow_computations"]
