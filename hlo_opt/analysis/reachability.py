"""Reachability queries that stay cheap while a pass rewrites the graph.

XLA builds an HloReachabilityMap (n^2 bits) and rebuilds it after every multi-output
fusion; hlo-opt answers each query with a depth-first search pruned by *levels*
(level = 1 + the largest operand level, so an edge always climbs a level: ``a`` can reach
``b`` only if ``level(a) < level(b)``).  A pass tells the map about new or rewired
instructions with :meth:`update`, which raises the levels of users that must now sit
higher (only as far as needed).  A search that visits more than ``budget`` instructions
answers "reachable", the conservative answer for every caller here (refuse a fusion).
"""
from __future__ import annotations


class Reachability:
    def __init__(self, comp, budget: int = 20_000):
        self.budget = budget
        self.level: dict = {}
        for inst in comp.post_order():
            self.level[inst] = 1 + max((self.level[o] for o in _preds(inst)), default=0)

    def _level(self, inst) -> int:
        lv = self.level.get(inst)
        if lv is None:
            lv = 1 + max((self._level(o) for o in _preds(inst)), default=0)
            self.level[inst] = lv
        return lv

    def update(self, inst) -> None:
        """``inst`` is new or has new operands: fix its level and lift users above it."""
        self.level[inst] = 1 + max((self._level(o) for o in _preds(inst)), default=0)
        work = [inst]
        while work:
            x = work.pop()
            lx = self.level[x]
            for u in _succs(x):
                lu = self.level.get(u)
                if lu is None or lu <= lx:
                    self.level[u] = lx + 1
                    work.append(u)

    def forget(self, inst) -> None:
        self.level.pop(inst, None)

    def reaches(self, a, b) -> bool:
        """Is ``a`` a transitive operand of ``b`` (or ``b`` itself)?"""
        if a is b:
            return True
        la = self._level(a)
        if la >= self._level(b):
            return False
        seen = {b}
        stack = [b]
        visits = 0
        while stack:
            x = stack.pop()
            visits += 1
            if visits > self.budget:
                return True
            for o in _preds(x):
                if o is a:
                    return True
                if o not in seen and self._level(o) > la:
                    seen.add(o)
                    stack.append(o)
        return False

    def connected(self, a, b) -> bool:
        return self.reaches(a, b) or self.reaches(b, a)


def _preds(inst):
    if inst.control_predecessors:
        return list(inst.operands) + list(inst.control_predecessors)
    return inst.operands


def _succs(inst):
    return inst.users
