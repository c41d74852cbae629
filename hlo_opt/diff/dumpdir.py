"""Dump directories: XLA's file names parsed into (module, step, pass) and paired.

Names (xla/service/dump.cc ``FilenameFor``; see reference/xla_conventions.md §2)::

    [<timestamp>.]module_0000.<name>.0003.<pipeline>.after_<pass>.before_<next>.txt
    [<timestamp>.]module_0000.<name>.before_optimizations.txt   (also ..._optimization)
    [<timestamp>.]module_0000.<name>.after_optimizations.txt

Module names may contain dots, so a name is parsed from the right.  Files sort by module
id, then step; the before/after-optimizations dumps sort first / last.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_PASS_RE = re.compile(
    r"^(?:\d+\.)?module_(?P<id>\d+)(?:\.(?P<name>.+?))?\.(?P<step>\d{4,})\.(?P<pipeline>[^.]+)"
    r"\.after_(?P<after>[^.]+)\.before_(?P<before>[^.]+)\.txt$")
_STAGE_RE = re.compile(
    r"^(?:\d+\.)?module_(?P<id>\d+)(?:\.(?P<name>.+?))?\."
    r"(?P<stage>before_optimizations?|after_optimizations?)\.txt$")

BEFORE_STEP = -1
AFTER_STEP = 1 << 30


@dataclass(frozen=True)
class DumpFile:
    path: Path
    module_id: int
    module_name: str
    step: int  # BEFORE_STEP / AFTER_STEP for the whole-module dumps
    pipeline: str = ""
    after: str = ""  # the pass this dump comes after ("" for whole-module dumps)
    before: str = ""  # the pass that runs next

    @property
    def label(self) -> str:
        if self.step == BEFORE_STEP:
            return "before_optimizations"
        if self.step == AFTER_STEP:
            return "after_optimizations"
        return f"{self.step:04d} {self.pipeline}.after_{self.after}"

    @property
    def is_pass_dump(self) -> bool:
        return BEFORE_STEP < self.step < AFTER_STEP


def parse_dump_name(name: str, directory: Path | None = None) -> DumpFile | None:
    """The parts of a dump file name, or None when it is not an HLO text dump."""
    path = (directory / name) if directory is not None else Path(name)
    m = _PASS_RE.match(name)
    if m:
        return DumpFile(path, int(m["id"]), m["name"] or "", int(m["step"]), m["pipeline"],
                        m["after"], m["before"])
    m = _STAGE_RE.match(name)
    if m:
        step = BEFORE_STEP if m["stage"].startswith("before") else AFTER_STEP
        return DumpFile(path, int(m["id"]), m["name"] or "", step)
    return None


def scan(directory: Path) -> dict[int, list[DumpFile]]:
    """module id -> its dump files in order (module ids ascending)."""
    files: dict[int, list[DumpFile]] = {}
    for entry in directory.iterdir():
        if not entry.is_file():
            continue
        f = parse_dump_name(entry.name, directory)
        if f is not None:
            files.setdefault(f.module_id, []).append(f)
    for lst in files.values():
        lst.sort(key=lambda f: (f.step, f.path.name))
    return dict(sorted(files.items()))


def select_modules(files: dict[int, list[DumpFile]], which: str | None
                   ) -> dict[int, list[DumpFile]]:
    """Keep the modules whose id (``3`` or ``0003``) or name equals ``which``."""
    if not which:
        return files
    return {mid: lst for mid, lst in files.items()
            if (which.isdigit() and int(which) == mid) or lst[0].module_name == which}


# XLA's pipeline markers: dumps "after pipeline-start" / "after pipeline-end" are the module
# between pipelines, not the work of a pass
_MARKERS = ("pipeline-start", "pipeline-end")


def consecutive_pairs(files: list[DumpFile]) -> list[tuple[DumpFile, DumpFile]]:
    """Every consecutive pair of per-pass dumps (the before/after-optimizations pair when
    there are no per-pass dumps); XLA's pipeline-start/end marker dumps start rows (the
    module before a pipeline's first pass) but are no rows of their own."""
    per_pass = [f for f in files if f.is_pass_dump]
    if len(per_pass) >= 2:
        return [(a, b) for a, b in zip(per_pass, per_pass[1:]) if b.after not in _MARKERS]
    if len(per_pass) == 1:
        whole = [f for f in files if f.step == BEFORE_STEP] + per_pass + \
            [f for f in files if f.step == AFTER_STEP]
        return list(zip(whole, whole[1:]))
    return list(zip(files, files[1:]))


def pass_pairs(files: list[DumpFile], pass_name: str) -> list[tuple[DumpFile, DumpFile]]:
    """(dump before, dump after) for every run of ``pass_name`` (``name`` or
    ``pipeline.name``) in one module.  Before is the previous dump in step order, since
    passes that change nothing may not be dumped."""
    ordered = [f for f in files if f.is_pass_dump]
    if not ordered:
        return []
    first = [f for f in files if f.step == BEFORE_STEP]
    out = []
    for k, f in enumerate(ordered):
        if f.after == pass_name or f"{f.pipeline}.{f.after}" == pass_name:
            prev = ordered[k - 1] if k > 0 else (first[0] if first else None)
            if prev is not None:
                out.append((prev, f))
    return out


def passes_in(files: list[DumpFile]) -> list[str]:
    seen: dict[str, None] = {}
    for f in files:
        if f.is_pass_dump:
            seen[f.after] = None
    return list(seen)


def between(prev: DumpFile, cur: DumpFile) -> str:
    """What ran between two dumps: ``pass`` or ``first .. last`` when passes that changed
    nothing were not dumped."""
    if not cur.is_pass_dump:
        return cur.label
    if prev.is_pass_dump and prev.before and prev.before != cur.after:
        return f"{prev.before} .. {cur.after}"
    return cur.after
