"""Structural diff of two HLO modules (``hlo-opt diff``).

The two graphs are matched, not their text: names never decide a match, so renamed
instructions line up (XLA's hlo_diff approach).  Public API::

    from hlo_opt.diff import diff_modules, DiffOptions
    d = diff_modules(module_a, module_b, DiffOptions(ignore_metadata=True))
    d.equal, d.status_of(inst), d.match_of(inst), d.changed_pairs(), d.patterns
    hlo_opt.diff.summary.summarize(d) / one_line(d)      counts, the --all line
    hlo_opt.diff.render_text.render_text(d)              plain text (render_rich: colour)
    hlo_opt.diff.render_json.diff_to_dict(d)             the --json report
    hlo_opt.diff.render_html.render_html(d)              the --html page
    hlo_opt.diff.dumpdir.scan(path)                      dump files by module and step

Pipeline: graph (arrays) -> fingerprint -> matcher (exact, propagation, similarity, call
graph) -> classify -> patterns; renderers read the resulting :class:`ModuleDiff`.
"""
from __future__ import annotations

from .options import DiffOptions
from .result import ADDED, CHANGED, REMOVED, UNCHANGED, Change, CompPair, ModuleDiff


def build_side(module, label: str = ""):
    """A module as a fingerprinted :class:`~hlo_opt.diff.graph.Side`."""
    from .fingerprint import fingerprint
    from .graph import Side
    side = Side(module, label)
    fingerprint(side)
    return side


def diff_modules(left, right, options: DiffOptions | None = None, left_label: str = "",
                 right_label: str = "") -> ModuleDiff:
    """Match ``left`` against ``right`` (HloModules) and classify every instruction."""
    import gc

    from .classify import classify
    from .matcher import match_modules
    from .patterns import find_patterns
    options = options or DiffOptions()
    # Millions of small lists and tuples, no cycles: the cyclic GC would rescan the two
    # modules' object graphs over and over (measured: 2x at 100k instructions).
    enabled = gc.isenabled()
    gc.disable()
    try:
        mapping = match_modules(build_side(left, left_label), build_side(right, right_label),
                                options)
        diff = classify(mapping, options)
        diff.patterns = find_patterns(diff)
    finally:
        if enabled:
            gc.enable()
    return diff


__all__ = ["ADDED", "CHANGED", "REMOVED", "UNCHANGED", "Change", "CompPair", "DiffOptions",
           "ModuleDiff", "build_side", "diff_modules"]
