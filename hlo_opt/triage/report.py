"""The ablation report as JSON: its shape is a public interface scripts rely on.

    {"module", "pipeline", "backend", "repeat",
     "baseline": {"time_s", "times_s", "kernels", ...},
     "passes": [{"pass", "occurrence", "status", "time_s", "times_s", "slowdown",
                 "kernels", ..., "error"?}]}

``slowdown`` = ``time_s`` / the baseline's ``time_s``; ``error`` only for ``breaks`` and
``wrong_result``.  Keys beyond those (``input``, ``per_occurrence``, ``seed``, the
bounds, ``paired``; per row ``bytes``, ``invocations``, ``changed``, ``host``,
``device``, ``note`` for ``no_change``) are additions a script may ignore, except one:
a row with ``baseline_time_s`` (timed on another machine than the report's baseline,
or ``--paired``: the baseline timed beside it, ``baseline_times_s``) has its
``slowdown`` against that baseline.  Rows are in pipeline order; a ``no_change`` or
``breaks`` row has ``time_s``/``slowdown`` null and ``times_s`` empty.
"""
from __future__ import annotations

import json

from ..errors import HloError
from ..fileutil import write_atomic

__all__ = ["MARK_STRONG", "MARK_WEAK", "check_resumable", "load_document", "mark",
           "new_document", "table_order", "write_document"]

MARK_WEAK = 1.01  # > 1% slower: marked (the seed's figures 7-8)
MARK_STRONG = 1.05  # > 5% slower: marked strongly (figures 17-18)


def new_document(module_name: str, filename: str, pipeline: str, settings,
                 baseline: dict) -> dict:
    return {"module": module_name, "pipeline": pipeline, "backend": settings.backend,
            "repeat": settings.repeat, "baseline": dict(baseline), "passes": [],
            "input": filename, "per_occurrence": settings.per_occurrence,
            "seed": settings.seed, "abs_error_bound": settings.abs_bound,
            "rel_error_bound": settings.rel_bound, "profile": settings.profile,
            "paired": settings.paired}


def write_document(path: str, document: dict) -> None:
    write_atomic(path, json.dumps(document, indent=1) + "\n")


def load_document(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise HloError(f"{path}: error: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise HloError(f"{path}: error: cannot read ({e})") from None
    except json.JSONDecodeError as e:
        raise HloError(f"{path}:{e.lineno}:{e.colno}: error: not an ablate report "
                       f"({e.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("passes"), list) or \
            not isinstance(doc.get("baseline"), dict):
        raise HloError(f"{path}: error: not an ablate report (no baseline/passes)")
    return doc


def check_resumable(doc: dict, module_name: str, pipeline: str, settings,
                    baseline: dict) -> None:
    """The resumed report must be the same experiment; its baseline the same module."""
    want = {"module": module_name, "pipeline": pipeline, "backend": settings.backend,
            "repeat": settings.repeat, "per_occurrence": settings.per_occurrence,
            "seed": settings.seed, "paired": settings.paired}
    for key, value in want.items():
        if doc.get(key) != value:
            raise HloError(f"--resume: the report is for {key} {doc.get(key)!r}, this sweep "
                           f"has {value!r}; start a new report instead")
    if doc["baseline"].get("kernels") != baseline["kernels"]:
        raise HloError(f"--resume: the report's baseline has {doc['baseline'].get('kernels')}"
                       f" kernels, this run's {baseline['kernels']}: the pipeline changed "
                       "since; start a new report instead")


def _order_key(row: dict):
    status = row["status"]
    if row.get("slowdown") is not None:
        return (0, -row["slowdown"])
    return ({"breaks": 1, "wrong_result": 2, "no_change": 3}.get(status, 4), 0.0)


def table_order(rows: list[dict]) -> list[dict]:
    """Measured rows by slowdown (largest first), then breaks, then no_change."""
    return sorted(rows, key=_order_key)


def mark(row: dict) -> str:
    """'**' for > 5% slower, '*' for > 1%, else ''."""
    s = row.get("slowdown")
    if s is None:
        return ""
    return "**" if s > MARK_STRONG else "*" if s > MARK_WEAK else ""
