"""Where the parser read each instruction: ``file:line:col`` for later errors.

The parser fills one :class:`SourceMap` per module (``module.source``) with the offset
of every instruction's name; the verifier and passes ask ``location(inst)`` when they
report a problem.  Lines are counted only then, so parsing pays one dict entry per
instruction.  Instructions made later (by passes, by clone) have no location.
"""
from __future__ import annotations

import bisect


class SourceMap:
    __slots__ = ("text", "filename", "base_line", "offsets", "_line_starts")

    def __init__(self, text: str, filename: str, base_line: int, offsets: dict):
        self.text = text
        self.filename = filename
        self.base_line = base_line
        self.offsets = offsets  # Instruction -> offset of its name in text
        self._line_starts: list[int] | None = None

    def line_col(self, offset: int) -> tuple[int, int]:
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            i = find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        k = bisect.bisect_right(self._line_starts, offset) - 1
        return k + 1 + self.base_line, offset - self._line_starts[k] + 1

    def location(self, inst) -> str | None:
        """``file:line:col`` of ``inst``'s name, or None when it was not parsed here."""
        offset = self.offsets.get(inst)
        if offset is None:
            return None
        line, col = self.line_col(offset)
        return f"{self.filename}:{line}:{col}"


def location_of(inst) -> str | None:
    """``file:line:col`` where ``inst`` was written, when its module was parsed."""
    comp = inst.parent
    module = comp.module if comp is not None else None
    source = getattr(module, "source", None)
    return source.location(inst) if source is not None else None
