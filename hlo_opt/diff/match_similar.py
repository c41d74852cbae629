"""Similarity matching of what exact matching and propagation left free.

For each free left instruction, candidates are the free right instructions with the same
opcode next to the images of its matched neighbours: users of its matched operands'
images (also through an unmatched operand, or through an unmatched user of the image:
a bypassed or an inserted instruction), and operands of its matched users' images; all
seen through fusion boundaries.  Smallest neighbour lists first, at most ``SCAN``
entries of each and ``CANDIDATES`` in all: no all-pairs comparison, even around a hub.
The score adds matched operands (by position, weighted most; half a hit through a
bypassed or inserted instruction), matched users, equal shape, equal attributes, the same
computation pair and, when names are allowed, an equal name.  A pair needs some
structural evidence (a matched neighbour) and ``MIN_SCORE``.

Then ``match_leftover`` pairs what is still free inside paired computations when the
bucket is unambiguous: same subgraph fingerprint (in order), or a local fingerprint free
once on each side; leaves and the latter also need to be near the same matched
instruction (within two hops through unmatched ones).
"""
from __future__ import annotations

from .mapping import LEFTOVER, SIMILAR, Mapping

CANDIDATES = 32  # candidates scored per instruction
SCAN = 256  # entries looked at per neighbour list (matched ones included)
NEIGHBOURS = 64
MIN_SCORE = 1.0


def _users_by_opcode(cache: dict, side, r: int) -> dict[str, list[int]]:
    d = cache.get(r)
    if d is None:
        d = {}
        for w in side.eff_users[r]:
            d.setdefault(side.opcode[w], []).append(w)
        cache[r] = d
    return d


def _operand_hits(m: Mapping, l: int, w: int) -> float:
    """Operand slots that agree: 1 when the images match, 0.5 when they match through one
    instruction only one side has (a bypassed no-op, an inserted one)."""
    left, right = m.left, m.right
    l2r, r2l = m.l2r, m.r2l
    hits = 0.0
    for a, b in zip(left.eff_ops[l], right.eff_ops[w]):
        if l2r[a] == b:
            hits += 1
        elif l2r[a] < 0 and any(l2r[x] == b for x in left.eff_ops[a]):
            hits += 0.5
        elif r2l[b] < 0 and any(r2l[y] == a for y in right.eff_ops[b]):
            hits += 0.5
    return hits


def _score(m: Mapping, l: int, w: int, use_names: bool) -> tuple[float, bool]:
    left, right = m.left, m.right
    l2r = m.l2r
    score = 0.0
    eo_l, eo_w = left.eff_ops[l], right.eff_ops[w]
    if eo_l and eo_w:
        score += 3.0 * _operand_hits(m, l, w) / max(len(eo_l), len(eo_w))
    us_l = left.eff_users[l][:NEIGHBOURS]
    us_w = right.eff_users[w]
    if us_l and us_w:
        set_w = set(us_w[:4 * NEIGHBOURS])
        hits = sum(1 for u in us_l if l2r[u] in set_w)
        score += 2.0 * hits / max(len(us_l), min(len(us_w), NEIGHBOURS))
    evidence = score > 0
    if left.shape_fp[l] == right.shape_fp[w]:
        score += 0.5
    if left.attr_fp[l] == right.attr_fp[w]:
        score += 0.5
    if m.same_comp_pair(l, w):
        score += 0.5
    if use_names and left.insts[l].name == right.insts[w].name:
        score += 0.25
    return score, evidence


def match_similar(m: Mapping, use_names: bool) -> list[tuple[int, int]]:
    left, right = m.left, m.right
    l2r, r2l = m.l2r, m.r2l
    cache: dict[int, dict[str, list[int]]] = {}
    new = []
    for l in range(left.n):
        op = left.opcode[l]
        if l2r[l] >= 0 or op == "parameter":
            continue
        pools = []
        for o in left.eff_ops[l]:
            ro = l2r[o]
            # Through an unmatched operand too: the no-op a pass bypassed.
            for x in ((ro,) if ro >= 0 else tuple(l2r[y] for y in left.eff_ops[o])):
                if x >= 0:
                    pool = _users_by_opcode(cache, right, x).get(op)
                    if pool:
                        pools.append(pool)
            if ro >= 0:  # and through an instruction a pass inserted after the image
                for y in right.eff_users[ro][:SCAN]:
                    if r2l[y] < 0:
                        pool = _users_by_opcode(cache, right, y).get(op)
                        if pool:
                            pools.append(pool)
        for u in left.eff_users[l][:NEIGHBOURS]:
            ru = l2r[u]
            if ru < 0:
                continue
            pool = [x for x in right.eff_ops[ru] if right.opcode[x] == op]
            for x in right.ops[ru]:
                fr = right.fused_root(x)
                if fr >= 0 and right.opcode[fr] == op:
                    pool.append(fr)
            if pool:
                pools.append(pool)
        if not pools:
            continue
        pools.sort(key=len)
        seen: set[int] = set()
        best, best_score = -1, MIN_SCORE
        for pool in pools:
            for w in pool[:SCAN]:
                if w in seen or r2l[w] >= 0 or not m.leaf_ok(l, w):
                    continue
                seen.add(w)
                score, evidence = _score(m, l, w, use_names)
                if evidence and score >= best_score and (score > best_score or best < 0):
                    best, best_score = w, score
                if len(seen) >= CANDIDATES:
                    break
            if len(seen) >= CANDIDATES:
                break
        if best >= 0 and m.map(l, best, SIMILAR):
            new.append((l, best))
    return new


def match_leftover(m: Mapping) -> list[tuple[int, int]]:
    """Inside paired computations: equal subgraph fingerprints pair in order (identical
    subgraphs are interchangeable); a local fingerprint free exactly once on each side
    pairs too."""
    new: list[tuple[int, int]] = []
    _pair_buckets(m, m.left.fp, m.right.fp, False, new)
    _pair_buckets(m, m.left.local_fp, m.right.local_fp, True, new)
    return new


def _near(side, i: int, image: list[int]) -> set[int]:
    """Images (other side's ids, via ``image``) of the instructions within two hops of
    ``i``, the second hop only through unmatched ones; users capped."""
    out: set[int] = set()
    for n in side.eff_ops[i] + side.eff_users[i][:NEIGHBOURS]:
        j = image[n]
        if j >= 0:
            out.add(j)
            continue
        for n2 in side.eff_ops[n] + side.eff_users[n][:NEIGHBOURS]:
            j = image[n2]
            if j >= 0:
                out.add(j)
    return out


def _near_right(side, i: int, r2l: list[int]) -> set[int]:
    """The right instructions within two hops of ``i`` (second hop through unmatched)."""
    out: set[int] = set()
    for n in side.eff_ops[i] + side.eff_users[i][:NEIGHBOURS]:
        out.add(n)
        if r2l[n] < 0:
            out.update(side.eff_ops[n])
            out.update(side.eff_users[n][:NEIGHBOURS])
    return out


def _pair_buckets(m: Mapping, key_l: list[int], key_r: list[int], unique_only: bool,
                  new: list) -> None:
    left, right = m.left, m.right
    l2r, r2l = m.l2r, m.r2l
    buckets_l: dict[tuple[int, int], list[int]] = {}
    for i in range(left.n):
        if l2r[i] < 0 and left.opcode[i] != "parameter":
            cr = m.comp_l2r[left.comp_of[i]]
            if cr >= 0:
                buckets_l.setdefault((cr, key_l[i]), []).append(i)
    if not buckets_l:
        return
    buckets_r: dict[tuple[int, int], list[int]] = {}
    for i in range(right.n):
        if r2l[i] < 0 and right.opcode[i] != "parameter":
            key = (right.comp_of[i], key_r[i])
            if key in buckets_l:
                buckets_r.setdefault(key, []).append(i)
    for key, rs in buckets_r.items():
        ls = buckets_l[key]
        if m.use_names and not unique_only:  # identical, same computation, same name
            names = {right.insts[b].name: b for b in rs}
            for a in ls:
                b = names.get(left.insts[a].name)
                if b is not None and r2l[b] < 0 and m.map(a, b, LEFTOVER):
                    new.append((a, b))
            ls = [a for a in ls if l2r[a] < 0]
            rs = [b for b in rs if r2l[b] < 0]
        if unique_only:
            if len(ls) != 1 or len(rs) != 1 or not (
                    _near(left, ls[0], l2r) & _near_right(right, rs[0], r2l)):
                continue
        for a, b in zip(ls, rs):
            if not unique_only and left.height[a] == 1 and (
                    left.eff_users[a] or right.eff_users[b]) and not (
                    _near(left, a, l2r) & _near_right(right, b, r2l)):
                continue  # twin leaves (constant(0)) need a common neighbourhood too
            if left.opcode[a] == right.opcode[b] and m.map(a, b, LEFTOVER):
                new.append((a, b))
