"""XLA's dump file names (``xla/service/dump.cc``: ``FilenameFor``, ``SanitizeFileName``)
and the parsing of them back (for ``hlo-opt dumps``, on our directories or XLA's)."""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "AFTER_OPTIMIZATION", "AFTER_OPTIMIZATIONS", "BEFORE_OPTIMIZATION", "BEFORE_OPTIMIZATIONS",
    "DEBUG_OPTIONS_SUFFIX", "PASS_STATS_SUFFIX", "DumpName", "between_passes_suffix",
    "filename_for", "parse_dump_name", "sanitize_file_name",
]

BEFORE_OPTIMIZATIONS = "before_optimizations"
AFTER_OPTIMIZATIONS = "after_optimizations"
BEFORE_OPTIMIZATION = "before_optimization"  # hlo-opt --passes (singular)
AFTER_OPTIMIZATION = "after_optimization"
DEBUG_OPTIONS_SUFFIX = "debug_options"
PASS_STATS_SUFFIX = "pass_stats.json"
MAX_FILENAME = 255

_SANITIZE = str.maketrans({"/": "_", "\\": "_", "[": "_", "]": "_", " ": "_",
                           # not XLA's: control bytes (NUL above all) cannot be in a name
                           **{chr(c): "_" for c in range(32) if chr(c) != " "}})


def sanitize_file_name(name: str) -> str:
    """XLA's SanitizeFileName: ``/ \\ [ ]`` and space become ``_``."""
    return name.translate(_SANITIZE)


def filename_for(module_id: int, module_name: str, prefix: str, suffix: str) -> str:
    """``[<prefix>.]module_%04d[.<module_name>].<suffix>``; the module name is dropped when
    the result would exceed 255 characters (XLA's FilenameFor)."""
    head = f"{prefix}." if prefix else ""
    name = f"{head}module_{module_id:04d}"
    if module_name:
        full = f"{name}.{module_name}.{suffix}"
        if len(full.encode("utf-8", "surrogatepass")) <= MAX_FILENAME:  # bytes, as the OS
            return full
    return f"{name}.{suffix}"


def between_passes_suffix(step: int, pipeline: str, after: str, before: str) -> str:
    return f"{step:04d}.{pipeline}.after_{after}.before_{before}"


@dataclass(frozen=True)
class DumpName:
    """A parsed dump file name.  ``kind``: ``pass`` (between passes), ``module`` (before/
    after optimization(s)), ``debug_options``, ``pass_stats`` or ``other``."""

    filename: str
    timestamp: str | None
    module_id: int
    module_name: str
    kind: str
    suffix: str                 # what follows the module name (without the extension)
    extension: str              # "txt", "html", "dot", "top_level.html", "json", ""
    step: int | None = None
    pipeline: str | None = None
    after: str | None = None
    before: str | None = None


_HEAD_RE = re.compile(r"^(?:(?P<ts>\d+)\.)?module_(?P<id>\d{4,})(?:\.(?P<rest>.*))?$")
_PASS_RE = re.compile(r"^(?P<step>\d{4,})\.(?P<pipeline>.+?)\.after_(?P<after>.+?)"
                      r"\.before_(?P<before>.+)$")
_EXTENSIONS = ("top_level.html", "txt", "html", "dot", "json")
_MODULE_SUFFIXES = (BEFORE_OPTIMIZATIONS, AFTER_OPTIMIZATIONS, BEFORE_OPTIMIZATION,
                    AFTER_OPTIMIZATION)


def _split_extension(rest: str) -> tuple[str, str]:
    for ext in _EXTENSIONS:
        if rest.endswith("." + ext):
            return rest[:-len(ext) - 1], ext
    return rest, ""


def parse_dump_name(filename: str, known_names: "set[str] | None" = None) -> DumpName | None:
    """Parse a dump file name; None if it is not ``[ts.]module_NNNN...``.

    Module names may contain dots, so ``known_names`` (module names seen in the directory,
    e.g. from ``before_optimizations`` files) are tried first; otherwise the first
    ``.NNNN.`` step marker splits the name."""
    m = _HEAD_RE.match(filename)
    if not m:
        return None
    ts, module_id, rest = m.group("ts"), int(m.group("id")), m.group("rest") or ""
    body, ext = _split_extension(rest)

    def make(name: str, suffix: str) -> DumpName:
        if suffix in _MODULE_SUFFIXES or suffix.endswith(("_" + AFTER_OPTIMIZATIONS,
                                                          "_" + BEFORE_OPTIMIZATIONS)):
            return DumpName(filename, ts, module_id, name, "module", suffix, ext)
        if suffix == DEBUG_OPTIONS_SUFFIX and not ext:
            return DumpName(filename, ts, module_id, name, "debug_options", suffix, ext)
        if suffix == "pass_stats" and ext == "json":
            return DumpName(filename, ts, module_id, name, "pass_stats", suffix, ext)
        pm = _PASS_RE.match(suffix)
        if pm:
            return DumpName(filename, ts, module_id, name, "pass", suffix, ext,
                            int(pm.group("step")), pm.group("pipeline"), pm.group("after"),
                            pm.group("before"))
        return DumpName(filename, ts, module_id, name, "other", suffix, ext)

    for name in sorted(known_names or (), key=len, reverse=True):
        if body.startswith(name + ".") and len(body) > len(name) + 1:
            return make(name, body[len(name) + 1:])
    pm = re.search(r"(?:^|\.)(\d{4,}\..+?\.after_.+\.before_.+)$", body)
    if pm:
        name = body[:pm.start(1)].rstrip(".")
        return make(name, pm.group(1))
    for suffix in _MODULE_SUFFIXES + (DEBUG_OPTIONS_SUFFIX, "pass_stats"):
        if body == suffix:
            return make("", suffix)
        if body.endswith("." + suffix):
            return make(body[:-len(suffix) - 1], suffix)
    name, _, suffix = body.rpartition(".")
    return make(name, suffix)
