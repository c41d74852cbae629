"""Fewer garbage-collector runs while passes rewrite a large graph.

The pipeline runner holds :func:`relaxed_gc` for a whole run; passes that rewrite many
instructions hold it too, for when they run on their own.

A fusion pass (or CSE) allocates many long-lived objects: every fusion clones
instructions into a new fused computation.  With CPython's default thresholds
(700 allocations per young collection, a full collection every 100 young ones, subject to
the 25% rule) the collector then traverses the whole module again and again; at 30k
instructions that was a third of ``priority-fusion``'s time and grew faster than the
module.  Within :func:`relaxed_gc` young collections wait for ``MIN_GEN0_THRESHOLD``
allocations instead (so full ones are rarer in proportion); the thresholds in force are
restored on exit.  Nothing else changes: garbage is still collected, only less often.
"""
from __future__ import annotations

import contextlib
import gc

MIN_GEN0_THRESHOLD = 20_000


@contextlib.contextmanager
def relaxed_gc():
    old = gc.get_threshold()
    if old[0] == 0 or old[0] >= MIN_GEN0_THRESHOLD:  # collection off, or relaxed already
        yield
        return
    gc.set_threshold(MIN_GEN0_THRESHOLD, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
