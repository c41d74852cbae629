"""The one-to-one mapping between left and right instructions (and computations)."""
from __future__ import annotations

from .graph import Side

# Which matcher made a pair (reported in --json as "matched_by").
EXACT = "exact-subgraph"
SEED = "call-graph"
TOP_DOWN = "top-down"
BOTTOM_UP = "bottom-up"
SIMILAR = "similarity"
LEFTOVER = "leftover"


class Mapping:
    """``l2r[l]`` / ``r2l[r]`` are -1 while unmatched; computations likewise."""

    def __init__(self, left: Side, right: Side):
        self.left = left
        self.right = right
        self.l2r = [-1] * left.n
        self.r2l = [-1] * right.n
        self.by = [""] * left.n
        self.comp_l2r = [-1] * len(left.comps)
        self.comp_r2l = [-1] * len(right.comps)
        self.count = 0
        # Leaves (constants, iotas) across computations that are not partners are usually
        # clones (a constant copied into a fusion); they are matched last (matcher).
        self.cross_leaves = False
        self.use_names = False  # set by the matcher: names may break ties
        self._names: tuple[dict, dict] | None = None

    def map(self, l: int, r: int, by: str) -> bool:
        if self.l2r[l] >= 0 or self.r2l[r] >= 0:
            return False
        self.l2r[l] = r
        self.r2l[r] = l
        self.by[l] = by
        self.count += 1
        return True

    def pair_comps(self, cl: int, cr: int) -> bool:
        if self.comp_l2r[cl] >= 0 or self.comp_r2l[cr] >= 0:
            return False
        self.comp_l2r[cl] = cr
        self.comp_r2l[cr] = cl
        return True

    def same_comp_pair(self, l: int, r: int) -> bool:
        return self.comp_l2r[self.left.comp_of[l]] == self.right.comp_of[r]

    def leaf_ok(self, l: int, r: int) -> bool:
        """False for a leaf pair across non-partner computations, until the last pass."""
        return self.cross_leaves or self.left.height[l] > 1 or self.same_comp_pair(l, r)

    def pairs(self):
        for l, r in enumerate(self.l2r):
            if r >= 0:
                yield l, r

    def name_conflict(self, l: int, r: int) -> bool:
        """With names allowed, True when ``l`` and ``r`` differ by name although one of
        them has a free, locally identical namesake on the other side: that pair is the
        better one (CSE kept one of two twins: keep each twin with its own name)."""
        if not self.use_names:
            return False
        left, right = self.left, self.right
        name_l, name_r = left.insts[l].name, right.insts[r].name
        if name_l == name_r:
            return False
        if self._names is None:
            self._names = ({inst.name: i for i, inst in enumerate(left.insts)},
                           {inst.name: i for i, inst in enumerate(right.insts)})
        by_l, by_r = self._names
        r2 = by_r.get(name_l)
        if r2 is not None and self.r2l[r2] < 0 and right.local_fp[r2] == left.local_fp[l]:
            return True
        l2 = by_l.get(name_r)
        return l2 is not None and self.l2r[l2] < 0 and left.local_fp[l2] == right.local_fp[r]
