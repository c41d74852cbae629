"""Exact-subgraph matching: identical subgraphs (equal fingerprints), tallest first.

A fingerprint that occurs once on each side maps the whole subgraph below it (operands and
called computations, walked in parallel).  Fingerprints that occur several times are
ambiguous; equal names break the tie when names are allowed, the rest is left to the
propagation matchers, which see the context.

Two passes: first inside computation pairs already known (the entries, identical
computations), so that a constant shared by several users stays with its computation;
then across computations, which is how an instruction moved into a new fusion finds its
old self.  Linear: every node is walked at most once.
"""
from __future__ import annotations

from .mapping import EXACT, Mapping
from .match_calls import seed_comp_pair


def map_subgraph(m: Mapping, l: int, r: int, by: str = EXACT) -> None:
    left, right = m.left, m.right
    stack = [(l, r)]
    while stack:
        a, b = stack.pop()
        if m.l2r[a] >= 0 or m.r2l[b] >= 0 or left.opcode[a] != right.opcode[b]:
            continue
        if left.opcode[a] == "parameter" or not m.leaf_ok(a, b) or m.name_conflict(a, b):
            continue  # parameters pair by number with their computations (match_calls)
        m.map(a, b, by)
        oa, ob = left.ops[a], right.ops[b]
        if len(oa) == len(ob):
            stack.extend(zip(oa, ob))
        ca, cb = left.called[a], right.called[b]
        if ca and len(ca) == len(cb):
            for x, y in zip(ca, cb):
                if seed_comp_pair(m, x, y, None, roots=False) or m.comp_l2r[x] == y:
                    stack.append((left.comp_root[x], right.comp_root[y]))


def _exact_pass(m: Mapping, scoped: bool, use_names: bool) -> None:
    left, right = m.left, m.right
    by_key_l: dict = {}
    by_key_r: dict = {}
    lfp, rfp = left.fp, right.fp
    if scoped:
        comp_l2r, lcomp = m.comp_l2r, left.comp_of
        for i in range(left.n):
            cr = comp_l2r[lcomp[i]]
            if cr >= 0 and m.l2r[i] < 0:
                by_key_l.setdefault((cr, lfp[i]), []).append(i)
        rcomp = right.comp_of
        for i in range(right.n):
            if m.r2l[i] < 0:
                key = (rcomp[i], rfp[i])
                if key in by_key_l:
                    by_key_r.setdefault(key, []).append(i)
    else:
        for i in range(left.n):
            if m.l2r[i] < 0:
                by_key_l.setdefault(lfp[i], []).append(i)
        for i in range(right.n):
            if m.r2l[i] < 0 and rfp[i] in by_key_l:
                by_key_r.setdefault(rfp[i], []).append(i)
    # Leaves (constants, iotas) are matched through their users, never on their own: a
    # constant(0) free once on each side is no evidence that it is the same one.
    common = sorted((-left.height[ls[0]], ls[0], key) for key, ls in by_key_l.items()
                    if key in by_key_r and left.height[ls[0]] > 1)
    for _, _, key in common:
        ls = [i for i in by_key_l[key] if m.l2r[i] < 0]
        rs = [i for i in by_key_r[key] if m.r2l[i] < 0]
        if not ls or not rs:
            continue
        if len(ls) == 1 and len(rs) == 1:
            map_subgraph(m, ls[0], rs[0])
        elif use_names:
            names = {right.insts[i].name: i for i in rs}
            for i in ls:
                j = names.get(left.insts[i].name)
                if j is not None and m.r2l[j] < 0:
                    map_subgraph(m, i, j)


def match_exact(m: Mapping, use_names: bool) -> None:
    _exact_pass(m, True, use_names)
    _exact_pass(m, False, use_names)
