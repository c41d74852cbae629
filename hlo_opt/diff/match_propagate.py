"""Propagation through operands (top-down) and users (bottom-up) of matched pairs.

Top-down: when ``l`` and ``r`` are matched, their operands at the same position are
matched when both are free and have the same opcode (unless all their own operands are
matched already, to other ones: a rewired operand); the walk sees through fusion
boundaries (a fused parameter stands for the fusion's operand, a fusion for its root, a
get-tuple-element of a multi-output fusion for that root tuple's operand) and into called
computations (see match_calls).

Bottom-up: a free user ``u`` of ``l`` that uses ``l`` at operand slot ``k`` is matched to
the only free user of ``r`` with the same opcode using ``r`` at slot ``k`` (ties broken by
identical local fingerprint, then by equal name when names are allowed).

Each pair is expanded once per call: linear in the number of edges.
"""
from __future__ import annotations

from collections import deque

from .mapping import BOTTOM_UP, TOP_DOWN, Mapping
from .match_calls import pair_called


def _resolve(m: Mapping, a: int, b: int):
    """The pair to map for operands ``a`` (left) / ``b`` (right) of a matched pair."""
    left, right = m.left, m.right
    l2r, r2l = m.l2r, m.r2l
    oa, ob = left.opcode[a], right.opcode[b]
    if oa == "parameter" or ob == "parameter":
        # Parameters pair only by number when their computations pair (match_calls);
        # a fused parameter stands for the fusion's operand.
        a2 = left.param_src[a] if oa == "parameter" and left.param_src[a] >= 0 else a
        b2 = right.param_src[b] if ob == "parameter" and right.param_src[b] >= 0 else b
        if (a2 != a or b2 != b) and left.opcode[a2] == right.opcode[b2] \
                and left.opcode[a2] != "parameter" and l2r[a2] < 0 and r2l[b2] < 0:
            return a2, b2
        return None
    if oa == ob:
        return (a, b) if l2r[a] < 0 and r2l[b] < 0 and m.leaf_ok(a, b) \
            and not m.name_conflict(a, b) and _inputs_agree(m, a, b) else None
    fr = right.fused_root(b)
    if fr >= 0 and right.opcode[fr] == oa and l2r[a] < 0 and r2l[fr] < 0:
        return a, fr
    fl = left.fused_root(a)
    if fl >= 0 and left.opcode[fl] == ob and l2r[fl] < 0 and r2l[b] < 0:
        return fl, b
    return None


def _inputs_agree(m: Mapping, a: int, b: int) -> bool:
    """False when every operand of both is matched already and none to its counterpart:
    then ``a`` and ``b`` only share an opcode (their user was rewired to another value).
    (Waiting for free operands to be decided was measured: worse, not better.)"""
    oa, ob = m.left.eff_ops[a], m.right.eff_ops[b]
    if not oa or len(oa) != len(ob):
        return True
    l2r, r2l = m.l2r, m.r2l
    for x, y in zip(oa, ob):
        if l2r[x] == y or l2r[x] < 0 or r2l[y] < 0:
            return True
    return False


def _bottom_up(m: Mapping, l: int, r: int, work, use_names: bool) -> None:
    left, right = m.left, m.right
    l2r, r2l = m.l2r, m.r2l
    free_l = [u for u in left.eff_users[l] if l2r[u] < 0]
    if not free_l:
        return
    index: dict[tuple[str, int], list[int]] = {}
    for w in right.eff_users[r]:
        if r2l[w] >= 0:
            continue
        for k, o in enumerate(right.eff_ops[w]):
            if o == r:
                index.setdefault((right.opcode[w], k), []).append(w)
    if not index:
        return
    groups: dict[tuple[str, int], list[int]] = {}
    for u in free_l:
        try:
            k = left.eff_ops[u].index(l)
        except ValueError:
            continue  # a user of the fusion whose root ``l`` is
        key = (left.opcode[u], k)
        if key in index:
            groups.setdefault(key, []).append(u)
    for key, us in groups.items():
        ws = index[key]
        if len(us) == 1 and len(ws) == 1:
            if m.map(us[0], ws[0], BOTTOM_UP):
                work.append((us[0], ws[0]))
            continue
        # Several users alike: only an identical local fingerprint (then an equal name)
        # found once on each side decides; each group is split once, no pairwise scan.
        by_fp: dict[int, list[int]] = {}
        for w in ws:
            by_fp.setdefault(right.local_fp[w], []).append(w)
        us_by_fp: dict[int, list[int]] = {}
        for u in us:
            us_by_fp.setdefault(left.local_fp[u], []).append(u)
        for fp, us2 in us_by_fp.items():
            ws2 = by_fp.get(fp)
            if not ws2:
                continue
            if len(us2) == 1 and len(ws2) == 1:
                pairs = [(us2[0], ws2[0])]
            elif use_names:
                names = {right.insts[w].name: w for w in ws2}
                pairs = [(u, names[left.insts[u].name]) for u in us2
                         if left.insts[u].name in names]
            else:
                continue
            for u, w in pairs:
                if m.map(u, w, BOTTOM_UP):
                    work.append((u, w))


def propagate(m: Mapping, pairs, use_names: bool) -> int:
    """Expand ``pairs`` (and every pair found on the way); returns how many were added."""
    left, right = m.left, m.right
    l2r, r2l = m.l2r, m.r2l
    before = m.count
    work = deque(pairs)
    while work:
        l, r = work.popleft()
        ol, orr = left.ops[l], right.ops[r]
        for a, b in zip(ol, orr):
            if l2r[a] >= 0 and r2l[b] >= 0:
                continue
            p = _resolve(m, a, b)
            if p is not None and m.map(p[0], p[1], TOP_DOWN):
                work.append(p)
        if left.called[l]:
            new: list = []
            pair_called(m, l, r, new)
            work.extend(new)
        _bottom_up(m, l, r, work, use_names)
    return m.count - before
