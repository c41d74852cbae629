"""Per-pass statistics: one record per pass run and per-pass totals, as JSON
(``module_%04d.<name>.pass_stats.json`` next to the dumps, or ``--stats FILE``).

The opcode histogram is recomputed only after passes that changed the module, so
collecting stats costs one linear walk per *changing* pass.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["FORMAT", "PassRecord", "PassStats", "format_summary_text", "opcode_histogram"]

FORMAT = "hlo-opt-pass-stats/1"


def opcode_histogram(module) -> Counter:
    hist: Counter = Counter()
    for comp in module.computations:
        hist.update(inst.opcode for inst in comp.iter_instructions())
    return hist


@dataclass
class PassRecord:
    index: int
    pipeline_path: list[str]
    pass_name: str
    iteration: int
    changed: bool
    wall_ms: float
    instructions_before: int
    instructions_after: int
    fusions_before: int
    fusions_after: int
    opcode_delta: dict[str, int]
    dump_step: int | None = None
    dump_files: list[str] = field(default_factory=list)

    @property
    def pipeline(self) -> str:
        return "/".join(self.pipeline_path)

    def to_json(self) -> dict:
        return {"index": self.index, "pipeline": self.pipeline,
                "pipeline_path": list(self.pipeline_path), "pass": self.pass_name,
                "iteration": self.iteration, "changed": self.changed,
                "wall_ms": round(self.wall_ms, 4),
                "instructions_before": self.instructions_before,
                "instructions_after": self.instructions_after,
                "fusions_before": self.fusions_before, "fusions_after": self.fusions_after,
                "opcode_delta": dict(sorted(self.opcode_delta.items())),
                "dump_step": self.dump_step, "dump_files": list(self.dump_files)}


class _Snapshot:
    __slots__ = ("hist", "instructions")

    def __init__(self, hist: Counter, instructions: int):
        self.hist = hist
        self.instructions = instructions


class PassStats:
    """Collects :class:`PassRecord` s for one module (fed by the pipeline runner)."""

    def __init__(self, module_name: str = "", module_id: int = 0, pipeline: str = ""):
        self.module_name = module_name
        self.module_id = module_id
        self.pipeline = pipeline
        self.records: list[PassRecord] = []
        self.skipped: list[dict] = []
        self.dumps: list[dict] = []
        self.total_ms: float | None = None
        self.autotune: dict | None = None   # the autotuning session's counters, if any
        self._hist: Counter | None = None

    # -- runner hooks --
    def begin(self, module) -> _Snapshot:
        if self._hist is None:
            self._hist = opcode_histogram(module)
        return _Snapshot(self._hist, module.instruction_count())

    def end(self, snapshot: _Snapshot, module, path, pass_name: str, iteration: int,
            changed: bool, wall_ms: float) -> PassRecord:
        after = opcode_histogram(module) if changed else snapshot.hist
        self._hist = after
        delta = {}
        if after is not snapshot.hist:
            for op in set(after) | set(snapshot.hist):
                d = after.get(op, 0) - snapshot.hist.get(op, 0)
                if d:
                    delta[op] = d
        record = PassRecord(len(self.records), list(path), pass_name, iteration, changed,
                            wall_ms, snapshot.instructions, module.instruction_count(),
                            snapshot.hist.get("fusion", 0), after.get("fusion", 0), delta)
        self.records.append(record)
        return record

    def skip(self, path, pass_name: str, reason: str) -> None:
        self.skipped.append({"pipeline": "/".join(path), "pass": pass_name, "reason": reason})

    def note_dump(self, step: int, pipeline: str, after: str, before: str, files: list[str],
                  record: PassRecord | None) -> None:
        self.dumps.append({"step": step, "pipeline": pipeline, "after": after,
                           "before": before, "files": list(files),
                           "record": record.index if record is not None else None})
        if record is not None:
            record.dump_step = step
            record.dump_files = list(files)

    def invalidate(self) -> None:
        """Forget the cached histogram (call after changing the module outside a runner)."""
        self._hist = None

    # -- results --
    def totals(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for r in self.records:
            t = out.setdefault(r.pass_name, {"invocations": 0, "total_ms": 0.0, "changed": 0})
            t["invocations"] += 1
            t["total_ms"] += r.wall_ms
            t["changed"] += int(r.changed)
        for t in out.values():
            t["total_ms"] = round(t["total_ms"], 4)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["total_ms"]))

    def to_json(self) -> dict:
        return {"format": FORMAT, "module": self.module_name, "module_id": self.module_id,
                "pipeline": self.pipeline,
                "total_ms": round(self.total_ms, 4) if self.total_ms is not None else None,
                "passes": [r.to_json() for r in self.records],
                "totals": self.totals(), "skipped": list(self.skipped),
                "dumps": list(self.dumps),
                **({"autotune": self.autotune} if self.autotune is not None else {})}

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"


def format_summary_text(stats: PassStats) -> str:
    """A plain-text per-pass summary (for callers without a terminal renderer)."""
    lines = [f"pass summary for {stats.module_name} ({stats.pipeline}):",
             f"  {'pass':<32} {'runs':>5} {'changed':>8} {'ms':>10}"]
    for name, t in stats.totals().items():
        lines.append(f"  {name:<32} {t['invocations']:>5} {t['changed']:>8} "
                     f"{t['total_ms']:>10.2f}")
    if stats.records:
        first, last = stats.records[0], stats.records[-1]
        lines.append(f"  instructions {first.instructions_before} -> "
                     f"{last.instructions_after}, fusions {first.fusions_before} -> "
                     f"{last.fusions_after}")
    if stats.autotune is not None:
        lines.append("  " + autotune_summary_line(stats.autotune))
    return "\n".join(lines) + "\n"


def autotune_summary_line(a: dict) -> str:
    failed = ", ".join(f"{k} {v}" for k, v in a.get("failed_candidates", {}).items())
    return (f"autotuning: {a['tuned']} instruction(s) tuned, {a['cache_hits']} from cache, "
            f"{a['measurements']} candidate(s) measured in {a['tuning_ms'] / 1000.0:.3f} s"
            + (f"; failed candidates: {failed}" if failed else ""))
