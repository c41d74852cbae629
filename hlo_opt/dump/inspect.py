"""Reading a dump directory back (ours or XLA's: the names are the same) into a per-module
timeline of passes, for ``hlo-opt dumps``.

With a ``pass_stats.json`` the timeline is every pass run (timing, counts, histogram
deltas).  Without one, it is rebuilt from the per-pass text files: instruction and fusion
counts come from a line scan (no full parse, so multi-GB XLA dumps stay cheap), and
"changed" means the text differs from the previous dump of that module.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field

from .naming import parse_dump_name
from .stats import FORMAT

__all__ = ["ModuleTimeline", "TimelineEntry", "count_instructions", "read_dump_dir"]

_INST_LINE_RE = re.compile(r"^[ \t]*(?:ROOT[ \t]+)?%?[A-Za-z_$][\w.\-$]*[ \t]*=[ \t]*(.*)$",
                           re.M)
_OPCODE_RE = re.compile(r"(?:^|[\s)}\]])([a-z][a-z0-9\-]*)\(")


@dataclass
class TimelineEntry:
    step: int | None
    pipeline: str
    pass_name: str
    next_pass: str | None
    changed: bool | None
    iteration: int
    instructions_before: int | None
    instructions_after: int | None
    fusions_before: int | None
    fusions_after: int | None
    wall_ms: float | None
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {("pass" if k == "pass_name" else k): v for k, v in asdict(self).items()}


@dataclass
class ModuleTimeline:
    module_id: int
    module_name: str
    source: str                       # "pass_stats.json" or "files"
    entries: list[TimelineEntry]
    totals: dict | None = None
    total_ms: float | None = None
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"module_id": self.module_id, "module": self.module_name,
                "source": self.source, "total_ms": self.total_ms, "totals": self.totals,
                "entries": [e.to_json() for e in self.entries], "files": list(self.files)}


def count_instructions(text: str) -> tuple[int, int]:
    """(instructions, fusions) in HLO text, by a line scan."""
    from ..ir.opcodes import OPCODES
    instructions = fusions = 0
    for m in _INST_LINE_RE.finditer(text):
        for om in _OPCODE_RE.finditer(m.group(1)):
            op = om.group(1)
            if op in OPCODES:
                instructions += 1
                fusions += op == "fusion"
                break
    return instructions, fusions


def _names(directory: str) -> list:
    try:
        files = sorted(os.listdir(directory))
    except FileNotFoundError:
        from ..errors import HloError
        raise HloError(f"{directory}: error: no such directory") from None
    except NotADirectoryError:
        from ..errors import HloError
        raise HloError(f"{directory}: error: not a directory") from None
    # XLA also writes per-module sub-directories (module_0001.jit_f/ ...): not dump files
    files = [f for f in files if not os.path.isdir(os.path.join(directory, f))]
    first = [parse_dump_name(f) for f in files]
    known = {d.module_name for d in first
             if d is not None and d.kind in ("module", "pass_stats", "debug_options")
             and d.module_name}
    return [d for d in (parse_dump_name(f, known) for f in files) if d is not None]


def read_dump_dir(directory: str) -> list[ModuleTimeline]:
    """One :class:`ModuleTimeline` per module found in ``directory``, by module id."""
    groups: dict[tuple[int, str], list] = {}
    names = _names(directory)
    named = {d.module_id: d.module_name for d in names if d.module_name}
    for d in names:  # a file without the module name belongs to that id's module
        groups.setdefault((d.module_id, d.module_name or named.get(d.module_id, "")),
                          []).append(d)
    out = []
    for (module_id, name), names in sorted(groups.items()):
        stats = [d for d in names if d.kind == "pass_stats"]
        timeline = None
        if stats:
            timeline = _from_stats(directory, stats[0].filename, module_id, name)
        if timeline is None:
            timeline = _from_files(directory, names, module_id, name)
        timeline.files = sorted(d.filename for d in names)
        out.append(timeline)
    return out


def _from_stats(directory: str, filename: str, module_id: int, name: str):
    try:
        with open(os.path.join(directory, filename), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None
    entries = []
    for r in doc.get("passes", []):
        files = [os.path.basename(p) for p in r.get("dump_files", [])]
        entries.append(TimelineEntry(
            r.get("dump_step"), r.get("pipeline", ""), r.get("pass", ""), None,
            r.get("changed"), r.get("iteration", 0), r.get("instructions_before"),
            r.get("instructions_after"), r.get("fusions_before"), r.get("fusions_after"),
            r.get("wall_ms"), files))
    return ModuleTimeline(module_id, name, "pass_stats.json", entries, doc.get("totals"),
                          doc.get("total_ms"))


def _from_files(directory: str, names: list, module_id: int, name: str) -> ModuleTimeline:
    def read(fn: str) -> str:
        with open(os.path.join(directory, fn), encoding="utf-8", errors="replace") as f:
            return f.read()

    before = [d for d in names if d.kind == "module" and d.extension == "txt"
              and d.suffix.startswith("before_optimization")]
    prev_text = read(before[0].filename) if before else None
    prev_counts = count_instructions(prev_text) if prev_text is not None else (None, None)
    entries = []
    per_pass = sorted((d for d in names if d.kind == "pass" and d.extension == "txt"),
                      key=lambda d: d.step)
    for d in per_pass:
        text = read(d.filename)
        counts = count_instructions(text)
        if d.after == "pipeline-start":
            changed = None
        else:
            changed = None if prev_text is None else text != prev_text
        entries.append(TimelineEntry(d.step, d.pipeline, d.after, d.before, changed, 0,
                                     prev_counts[0], counts[0], prev_counts[1], counts[1],
                                     None, [d.filename]))
        prev_text, prev_counts = text, counts
    return ModuleTimeline(module_id, name, "files", entries)

