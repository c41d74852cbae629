"""What a diff found: per-instruction classes, computation pairs, module header changes."""
from __future__ import annotations

from dataclasses import dataclass, field

UNCHANGED = "unchanged"
CHANGED = "changed"
REMOVED = "removed"
ADDED = "added"

# Kinds of change of a matched pair, in the order they are reported.
KIND_ORDER = ("shape", "layout", "attributes", "operands", "fused computation",
              "called computation", "moved", "control", "root", "metadata")


@dataclass
class Change:
    """A matched pair that differs.  ``details`` holds, per kind: ``shape``/``layout``:
    (old, new) text; ``attributes``: names that differ; ``operands``: slots rewired (or
    ``"count a->b"``); ``moved``: (from computation, to computation)."""

    left: int
    right: int
    kinds: list[str]
    details: dict = field(default_factory=dict)

    def add(self, kind: str, detail=None) -> None:
        if kind not in self.kinds:
            self.kinds.append(kind)
            self.kinds.sort(key=KIND_ORDER.index)
        if detail is not None:
            self.details[kind] = detail


@dataclass
class CompPair:
    """A computation of either side: paired (status unchanged/changed), removed or added."""

    left: int  # -1 when added
    right: int  # -1 when removed
    status: str


@dataclass
class ModuleDiff:
    """The result of :func:`hlo_opt.diff.diff_modules`.

    Instructions are ids into ``left``/``right`` (:class:`~hlo_opt.diff.graph.Side`);
    ``left.insts[i]`` is the Instruction.  ``status_l``/``status_r`` give each one's class.
    """

    left: object
    right: object
    mapping: object
    options: object
    status_l: list[str]
    status_r: list[str]
    changes: dict[int, Change]  # left id -> Change (changed pairs only)
    removed: list[int]
    added: list[int]
    renamed: int
    comps: list[CompPair]
    header: list[str]  # module-level differences ("is_scheduled: true -> <none>")
    notes: list[str] = field(default_factory=list)  # informational (module renamed, ...)
    patterns: list = field(default_factory=list)  # filled by patterns.find_patterns

    @property
    def equal(self) -> bool:
        return not (self.changes or self.removed or self.added or self.header)

    @property
    def unchanged(self) -> int:
        return self.mapping.count - len(self.changes)

    def match_of(self, inst):
        """The instruction on the other side matched to ``inst`` (either side), or None."""
        if inst in self.left.index:
            r = self.mapping.l2r[self.left.index[inst]]
            return self.right.insts[r] if r >= 0 else None
        if inst in self.right.index:
            l = self.mapping.r2l[self.right.index[inst]]
            return self.left.insts[l] if l >= 0 else None
        raise KeyError(f"%{inst.name} is in neither module")

    def status_of(self, inst) -> str:
        if inst in self.left.index:
            return self.status_l[self.left.index[inst]]
        return self.status_r[self.right.index[inst]]

    def change_of(self, inst) -> Change | None:
        if inst in self.left.index:
            return self.changes.get(self.left.index[inst])
        l = self.mapping.r2l[self.right.index[inst]]
        return self.changes.get(l) if l >= 0 else None

    def changed_pairs(self):
        """(left Instruction, right Instruction, Change) for every changed pair."""
        for l, ch in self.changes.items():
            yield self.left.insts[l], self.right.insts[ch.right], ch
