"""The matching pipeline: one call from two Sides to a Mapping.

1. the entries pair, and computations identical on both sides (a fingerprint found once
   on each side); their parameters pair by number;
2. exact-subgraph matching (match_exact), tallest identical subgraphs first;
3. the roots of paired computations pair; top-down and bottom-up propagation
   (match_propagate), which also pairs called computations (match_calls);
4. rounds of similarity matching (match_similar), unambiguous leftovers, and computations
   paired by vote, each followed by propagation, until a round finds nothing;
5. one more propagation that may pair leaves across computations (a constant that moved
   into a fusion with its only user; earlier, such a pair is usually a clone).
"""
from __future__ import annotations

from .graph import Side
from .mapping import Mapping
from .match_calls import finalize_comp_pairs, pair_identical_comps, seed_comp_pair, seed_roots
from .match_exact import match_exact
from .match_propagate import propagate
from .match_similar import match_leftover, match_similar
from .options import DiffOptions

MAX_ROUNDS = 6


def match_modules(left: Side, right: Side, options: DiffOptions) -> Mapping:
    m = Mapping(left, right)
    use_names = m.use_names = not options.ignore_names
    seed_comp_pair(m, left.entry, right.entry, None, roots=False)
    pair_identical_comps(m)
    match_exact(m, use_names)
    for cl, cr in enumerate(m.comp_l2r):
        if cr >= 0:
            seed_roots(m, cl, cr)
    propagate(m, list(m.pairs()), use_names)
    for _ in range(MAX_ROUNDS):
        before = m.count
        propagate(m, match_similar(m, use_names), use_names)
        propagate(m, match_leftover(m), use_names)
        work: list = []
        finalize_comp_pairs(m, work)
        propagate(m, work, use_names)
        if m.count == before:
            break
    m.cross_leaves = True
    propagate(m, list(m.pairs()), use_names)
    return m
