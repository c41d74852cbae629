"""Computations are matched through the call graph.

The entries pair first.  Whenever two calling instructions are matched (fusion with fusion,
reduce with reduce, while with while), their called computations pair positionally and
seed the instruction matching inside them: parameters by number, root with root.
Computations still unpaired at the end pair by majority vote of their matched
instructions (XLA hlo_diff's "main matched computation"), then, when names are allowed,
by equal name.
"""
from __future__ import annotations

from collections import Counter

from .mapping import SEED, Mapping


def seed_comp_pair(m: Mapping, cl: int, cr: int, work: list | None = None,
                   roots: bool = True) -> bool:
    """Pair computations ``cl``/``cr``; map their parameters (and roots).  New instruction
    pairs are appended to ``work``."""
    if not m.pair_comps(cl, cr):
        return False
    left, right = m.left, m.right
    for a, b in zip(left.comp_params[cl], right.comp_params[cr]):
        if a >= 0 and b >= 0 and m.map(a, b, SEED) and work is not None:
            work.append((a, b))
    if roots:
        seed_roots(m, cl, cr, work)
    return True


def seed_roots(m: Mapping, cl: int, cr: int, work: list | None = None) -> None:
    a, b = m.left.comp_root[cl], m.right.comp_root[cr]
    if a >= 0 and b >= 0 and m.left.opcode[a] == m.right.opcode[b] and m.map(a, b, SEED) \
            and work is not None:
        work.append((a, b))


def pair_called(m: Mapping, l: int, r: int, work: list | None) -> None:
    """Matched callers ``l``/``r``: pair what they call, in order."""
    cl_list, cr_list = m.left.called[l], m.right.called[r]
    if not cl_list or len(cl_list) != len(cr_list):
        return
    for cl, cr in zip(cl_list, cr_list):
        seed_comp_pair(m, cl, cr, work)


def pair_identical_comps(m: Mapping) -> None:
    """Computations whose fingerprint occurs once on each side pair at once."""
    left, right = m.left, m.right
    count_l = Counter(left.comp_fp)
    by_fp_r: dict[int, list[int]] = {}
    for cr, fp in enumerate(right.comp_fp):
        by_fp_r.setdefault(fp, []).append(cr)
    for cl, fp in enumerate(left.comp_fp):
        rs = by_fp_r.get(fp)
        if count_l[fp] == 1 and rs is not None and len(rs) == 1:
            seed_comp_pair(m, cl, rs[0], None, roots=False)


def finalize_comp_pairs(m: Mapping, work: list | None = None) -> None:
    """Pair the computations left unpaired by majority vote of matched instructions."""
    left, right = m.left, m.right
    votes: Counter = Counter()
    for l, r in m.pairs():
        cl, cr = left.comp_of[l], right.comp_of[r]
        if m.comp_l2r[cl] < 0 and m.comp_r2l[cr] < 0:
            votes[(cl, cr)] += 1
    for (cl, cr), v in sorted(votes.items(), key=lambda kv: (-kv[1], kv[0])):
        size_l = _body_size(left, cl)
        size_r = _body_size(right, cr)
        if 2 * v > min(size_l, size_r):
            seed_comp_pair(m, cl, cr, work)
    if m.use_names:  # last resort: a computation still alone on both sides, same name
        by_name = {c.name: cr for cr, c in enumerate(right.comps) if m.comp_r2l[cr] < 0}
        for cl, comp in enumerate(left.comps):
            cr = by_name.get(comp.name)
            if m.comp_l2r[cl] < 0 and cr is not None:
                seed_comp_pair(m, cl, cr, work)


def _body_size(side, ci: int) -> int:
    """Instructions of a computation other than its parameters."""
    start, end = side.comp_range[ci]
    return end - start - sum(1 for p in side.comp_params[ci] if p >= 0)
