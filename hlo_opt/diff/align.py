"""Line up two computations for display: one merged row list, in the right's order.

Rows are ``(tag, l, r)`` with ids into the two Sides (-1 when absent).  Tags: ``same``,
``changed`` (a matched pair), ``removed`` / ``added``, ``moved-out`` (a left instruction
whose match lives in another computation) and ``moved-in``.  A removed left instruction
is placed just before the right row of the first left instruction that follows it.
Linear in the size of the two computations.
"""
from __future__ import annotations

from .result import UNCHANGED, ModuleDiff

SAME, CHANGED, REMOVED, ADDED, MOVED_OUT, MOVED_IN = (
    "same", "changed", "removed", "added", "moved-out", "moved-in")
DIFF_TAGS = frozenset({CHANGED, REMOVED, ADDED, MOVED_OUT, MOVED_IN})


def align(diff: ModuleDiff, cl: int, cr: int) -> list[tuple[str, int, int]]:
    """Rows of computation pair (cl, cr); either may be -1 (a removed / added one)."""
    left, right, m = diff.left, diff.right, diff.mapping
    rows: list[tuple[str, int, int]] = []
    lorder = range(*left.comp_range[cl]) if cl >= 0 else range(0)
    rorder = range(*right.comp_range[cr]) if cr >= 0 else range(0)

    def left_only(x: int) -> tuple[str, int, int] | None:
        y = m.l2r[x]
        if y < 0:
            return (REMOVED, x, -1)
        if right.comp_of[y] != cr:
            return (MOVED_OUT, x, y)
        return None  # shown with its partner

    li = iter(lorder)
    pending = next(li, None)
    for r in rorder:
        l = m.r2l[r]
        if l >= 0 and left.comp_of[l] == cl:
            while pending is not None and pending <= l:
                if pending != l:
                    row = left_only(pending)
                    if row is not None:
                        rows.append(row)
                pending = next(li, None)
            same = diff.status_l[l] == UNCHANGED
            rows.append((SAME if same else CHANGED, l, r))
        elif l >= 0:
            rows.append((MOVED_IN, l, r))
        else:
            rows.append((ADDED, -1, r))
    while pending is not None:
        row = left_only(pending)
        if row is not None:
            rows.append(row)
        pending = next(li, None)
    return rows


def sections(diff: ModuleDiff, only_changed: bool = True):
    """(cl, cr, status) per computation in display order: the right's order, removed left
    computations placed before the next paired one that follows them.  Statuses are the
    CompPair ones (the strings "removed" and "added" equal the row tags)."""
    status = {(c.left, c.right): c.status for c in diff.comps}
    m = diff.mapping
    out = []
    next_l = 0
    n_left = len(diff.left.comps)
    for cr in range(len(diff.right.comps)):
        cl = m.comp_r2l[cr]
        if cl >= 0:
            while next_l <= cl:
                if m.comp_l2r[next_l] < 0:
                    out.append((next_l, -1, REMOVED))
                next_l += 1
            st = status[(cl, cr)]
        else:
            st = ADDED
        out.append((cl, cr, st))
    while next_l < n_left:
        if m.comp_l2r[next_l] < 0:
            out.append((next_l, -1, REMOVED))
        next_l += 1
    if only_changed:
        out = [s for s in out if s[2] != UNCHANGED]
    return out
