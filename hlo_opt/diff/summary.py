"""Counts: per class, per kind of change, per opcode, per computation; the one-line form."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .result import ADDED, CHANGED, REMOVED, UNCHANGED, ModuleDiff


@dataclass
class Summary:
    unchanged: int
    changed: int
    removed: int
    added: int
    renamed: int
    kinds: Counter = field(default_factory=Counter)
    by_opcode: dict[str, Counter] = field(default_factory=dict)  # opcode -> class counts
    comps: Counter = field(default_factory=Counter)  # unchanged/changed/removed/added

    @property
    def equal(self) -> bool:
        return not (self.changed or self.removed or self.added)

    def to_dict(self) -> dict:
        return {
            "instructions": {UNCHANGED: self.unchanged, CHANGED: self.changed,
                             REMOVED: self.removed, ADDED: self.added,
                             "renamed": self.renamed},
            "change_kinds": dict(sorted(self.kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
            "by_opcode": {op: {k: c[k] for k in (CHANGED, REMOVED, ADDED) if c[k]}
                          for op, c in sorted(self.by_opcode.items())},
            "computations": {k: self.comps[k] for k in (UNCHANGED, CHANGED, REMOVED, ADDED)},
        }


def summarize(diff: ModuleDiff) -> Summary:
    left, right = diff.left, diff.right
    s = Summary(diff.unchanged, len(diff.changes), len(diff.removed), len(diff.added),
                diff.renamed)
    by_opcode: dict[str, Counter] = {}
    for l, ch in diff.changes.items():
        s.kinds.update(ch.kinds)
        by_opcode.setdefault(left.opcode[l], Counter())[CHANGED] += 1
    for l in diff.removed:
        by_opcode.setdefault(left.opcode[l], Counter())[REMOVED] += 1
    for r in diff.added:
        by_opcode.setdefault(right.opcode[r], Counter())[ADDED] += 1
    s.by_opcode = by_opcode
    s.comps = Counter(c.status for c in diff.comps)
    return s


def one_line(diff: ModuleDiff, patterns: int = 2) -> str:
    """'3 changed, 1 removed, 4 added: 1 x broadcast+maximum folded into fusion; ...'"""
    s = summarize(diff)
    if diff.equal:
        # structurally equal; a pass that only renamed still changed the text (as
        # `hlo-opt dumps` counts it)
        if s.renamed:
            return f"{s.renamed} renamed, structure unchanged"
        return "no change"
    parts = [f"{n} {what}" for n, what in ((s.changed, CHANGED), (s.removed, REMOVED),
                                           (s.added, ADDED)) if n]
    text = ", ".join(parts) if parts else "module attributes changed"
    if diff.patterns and patterns:
        text += ": " + "; ".join(p.text() for p in diff.patterns[:patterns])
        if len(diff.patterns) > patterns:
            text += f"; +{len(diff.patterns) - patterns} more"
    return text
