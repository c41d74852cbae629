"""The ablation sweep (the seed's per-pass-disable experiment, in one call).

A baseline: the module through the whole pipeline, compiled and run ``repeat`` times on
seeded inputs.  Then one row per pass (or per ``pipeline/name:N`` occurrence) with that
pass switched off by ``--xla_disable_hlo_passes``, each a fresh optimization, compile and
run on the same inputs.  A row's status:

- ``ok``: it ran; ``slowdown`` = its median time / the baseline's;
- ``no_change``: nothing to run: the pass changed nothing in the baseline run, or the
  module came out of the pipeline identical to the baseline's (later passes did the
  same work); ``note`` says which;
- ``breaks``: verifier, a pass, compile or run failed without the pass (``error``);
- ``wrong_result``: it ran, but an output differs from the baseline's beyond the error
  bounds (XLA's rule, as ``run --compare``) (``error``).

Rows are independent: :func:`run_row` is what a worker process or Ray task runs, given
the :class:`SweepContext` (module text, pipeline factory, options, settings and the
baseline's reference outputs).  A row measured on another machine than the baseline is
compared with a baseline measured on that machine, and says so (``baseline_time_s``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

from ..errors import HloError
from ..flags import DebugOptions
from .invocations import InvocationLog, PassRow, optimize_with, plan_rows
from .measure import Measurement, measure, median

__all__ = ["AblateSettings", "Reference", "Sweep", "SweepContext", "run_row"]

STATUSES = ("ok", "no_change", "breaks", "wrong_result")


@dataclass(frozen=True)
class AblateSettings:
    backend: str = "interpreter"
    repeat: int = 3
    warmup: int = 1
    seed: int = 42
    abs_bound: float = 1e-3
    rel_bound: float = 1e-3
    profile: bool = False
    per_occurrence: bool = False
    paired: bool = False  # time the baseline beside every row and compare with that


@dataclass(frozen=True)
class Reference:
    """The baseline as the rows need it."""

    outputs: list = field(repr=False)
    optimized_text: str = field(default="", repr=False)  # the baseline's optimized module
    kernels: int = 0
    bytes: float = 0.0
    time_s: float = 0.0
    host: str = ""
    device: str = ""


@dataclass(frozen=True)
class SweepContext:
    """Everything a worker needs, sent once per worker (it pickles)."""

    module_text: str
    filename: str
    factory: object
    options: DebugOptions
    settings: AblateSettings
    reference: Reference


# ---- one row ------------------------------------------------------------------------------

def _parse(ctx: SweepContext):
    from ..text.parser import parse_hlo
    return parse_hlo(ctx.module_text, ctx.filename)


def _arguments(ctx: SweepContext, module):
    from ..backends.interpreter.literals import random_arguments
    return random_arguments(module, ctx.settings.seed)


def _failure(e: BaseException) -> str:
    """One message for a failure: the error, with the notes naming the pass."""
    if isinstance(e, HloError):
        return str(e)
    notes = "; ".join(getattr(e, "__notes__", ()) or ())
    return f"internal error: {type(e).__name__}: {e}" + (f" ({notes})" if notes else "")


_LOCAL_BASELINES: dict = {}


def _baseline_here(ctx: SweepContext, host: str, device: str) -> float:
    """The baseline's median time measured on this machine (once per process)."""
    key = (ctx.module_text, repr(ctx.factory), host, device)
    cached = _LOCAL_BASELINES.get(key)
    if cached is None:
        module = _parse(ctx)
        args = _arguments(ctx, module)
        optimize_with(ctx.factory, module, ctx.options)
        s = ctx.settings
        m = measure(module, s.backend, args, s.repeat, s.warmup, s.profile)
        cached = _LOCAL_BASELINES[key] = m.time_s
    return cached


_BASELINE_FINGERPRINTS: dict = {}
_BASELINE_EXECUTABLES: dict = {}


def _baseline_executable(ctx: SweepContext):
    """The baseline's optimized module compiled here (once per process), for --paired."""
    from ..backends import compile as compile_module
    from ..text.parser import parse_hlo
    key = (ctx.reference.optimized_text, ctx.settings.backend)
    exe = _BASELINE_EXECUTABLES.get(key)
    if exe is None:
        module = parse_hlo(ctx.reference.optimized_text, "<baseline>")
        module.config = module.config.replace(debug_options=ctx.options)
        exe = _BASELINE_EXECUTABLES[key] = compile_module(module, ctx.settings.backend)
    return exe


def _structure(text: str) -> int:
    """The structural fingerprint of a module text (names left out; this process only)."""
    from ..pipeline import module_fingerprint
    from ..text.parser import parse_hlo
    return module_fingerprint(parse_hlo(text, "<optimized>"))


def _same_as_baseline(ctx: SweepContext, module) -> bool:
    """Whether ``module`` is the baseline's optimized module up to names (both sides
    fingerprinted from their printed text, in this process)."""
    text = ctx.reference.optimized_text
    fp = _BASELINE_FINGERPRINTS.get(text)
    if fp is None:
        fp = _BASELINE_FINGERPRINTS[text] = _structure(text)
    return _structure(module.to_text()) == fp


def row_document(row: PassRow, status: str, *, measurement: Measurement | None = None,
                 reference: Reference | None = None, error: str | None = None,
                 note: str | None = None, baseline_time_s: float | None = None) -> dict:
    """A row of the JSON document (see :mod:`hlo_opt.triage.report` for the shape).
    A row with ``baseline_time_s`` is compared with that baseline (timed on its own
    machine, or beside it with ``--paired``), not with the report's."""
    doc = {"pass": row.pass_name, "occurrence": row.occurrence, "status": status,
           "time_s": None, "times_s": [], "slowdown": None, "kernels": None,
           "bytes": None, "invocations": row.invocations, "changed": row.changed,
           "host": None, "device": None}
    if measurement is not None and measurement.pair_times_s:
        baseline_time_s = median(measurement.pair_times_s)
    if measurement is not None:
        base = baseline_time_s if baseline_time_s is not None else reference.time_s
        t = measurement.time_s
        doc.update(time_s=t, times_s=list(measurement.times_s),
                   slowdown=(t / base) if base and base > 0 else None,
                   kernels=measurement.kernels, bytes=measurement.bytes,
                   host=measurement.host, device=measurement.device)
        if baseline_time_s is not None:
            doc["baseline_time_s"] = baseline_time_s
        if measurement.pair_times_s:
            doc["baseline_times_s"] = list(measurement.pair_times_s)
    elif status == "no_change" and reference is not None:
        doc.update(kernels=reference.kernels, bytes=reference.bytes)
    if error is not None:
        doc["error"] = error
    if note is not None:
        doc["note"] = note
    return doc


def run_row(ctx: SweepContext, row: PassRow, timing_lock=None) -> dict:
    """Optimize with ``row``'s pass switched off, compile, run, compare: one row.
    ``timing_lock``: held over the timed runs (workers on one machine share it)."""
    s = ctx.settings
    ref = ctx.reference
    options = dataclasses.replace(
        ctx.options,
        xla_disable_hlo_passes=list(ctx.options.xla_disable_hlo_passes) + list(row.filters))
    try:
        module = _parse(ctx)
        args = _arguments(ctx, module)
        optimize_with(ctx.factory, module, options)
    except Exception as e:  # noqa: BLE001 - a row records its failure, the sweep goes on
        return row_document(row, "breaks", error=f"optimization failed: {_failure(e)}")
    if _same_as_baseline(ctx, module):
        return row_document(row, "no_change", reference=ref,
                            note="not run: the optimized module is the baseline's (up to names)")
    try:
        pair = _baseline_executable(ctx) if s.paired else None
        m = measure(module, s.backend, args, s.repeat, s.warmup, s.profile, timing_lock,
                    pair)
    except Exception as e:  # noqa: BLE001
        return row_document(row, "breaks", error=f"backend {s.backend}: {_failure(e)}")
    baseline_here = None
    if not s.paired and (m.host, m.device) != (ref.host, ref.device):
        baseline_here = _baseline_here(ctx, m.host, m.device)
    problem = _compare(ctx, module, m.outputs)
    status = "wrong_result" if problem else "ok"
    return row_document(row, status, measurement=m, reference=ref, error=problem,
                        baseline_time_s=baseline_here)


def _compare(ctx: SweepContext, module, outputs) -> str | None:
    """None when every output matches the baseline's within the bounds, else why not."""
    from ..backends.interpreter.literals import compare_results, result_shapes
    s = ctx.settings
    try:
        shapes = result_shapes(_parse(ctx))
        rows = compare_results(outputs, ctx.reference.outputs, shapes, s.abs_bound,
                               s.rel_bound)
    except HloError as e:
        return f"outputs differ from the baseline's: {e}"
    bad = [r for r in rows if not r.ok]
    if not bad:
        return None
    parts = [f"out{r.index} {r.shape}: {r.mismatches} element(s) beyond the bounds "
             f"(max abs error {r.max_abs:.3g}, max rel error {r.max_rel:.3g})"
             + (f"; {r.note}" if r.note else "") for r in bad]
    return "outputs differ from the baseline's: " + "; ".join(parts)


# ---- the sweep ---------------------------------------------------------------------------

class Sweep:
    """A baseline and its rows.  ``Sweep(...).run(executor, on_row)`` fills
    ``document`` (the JSON report) row by row; rows already in a resumed document are
    kept and not run again."""

    def __init__(self, module_text: str, filename: str, factory, options: DebugOptions,
                 settings: AblateSettings, *, pipeline_label: str = "",
                 resume: dict | None = None):
        from ..text.parser import parse_hlo
        from .report import check_resumable, new_document
        if settings.repeat < 1:
            raise HloError("--repeat must be at least 1")
        if options.xla_enable_hlo_passes_only:
            raise HloError("ablate switches passes off with --xla_disable_hlo_passes; it "
                           "cannot be combined with --xla_enable_hlo_passes_only")
        self.settings = settings
        module = parse_hlo(module_text, filename)
        self.module_name = module.name
        from ..backends.interpreter.literals import random_arguments
        args = random_arguments(module, settings.seed)
        log = InvocationLog()
        try:
            optimize_with(factory, module, options, observer=log)
        except Exception as e:  # noqa: BLE001 - reported as the user's problem to fix
            raise HloError(f"{filename}: the baseline fails, nothing to compare with: "
                           f"{_failure(e)}") from None
        try:
            m = measure(module, settings.backend, args, settings.repeat, settings.warmup,
                        settings.profile)
        except HloError as e:
            raise HloError(f"{filename}: the baseline fails on backend "
                           f"{settings.backend}: {e}") from None
        self.log = log
        self.rows = plan_rows(log, settings.per_occurrence)
        baseline = {"time_s": m.time_s, "times_s": list(m.times_s), "kernels": m.kernels,
                    "bytes": m.bytes, "host": m.host, "device": m.device}
        label = pipeline_label or getattr(factory, "label", "") or "pipeline"
        if resume is not None:
            check_resumable(resume, self.module_name, label, settings, baseline)
            self.document = resume
            self.document["passes"] = [r for r in resume.get("passes", [])
                                       if r.get("status") in STATUSES]
            stored = self.document["baseline"]
            same_machine = (stored.get("host"), stored.get("device")) == (m.host, m.device)
            ref_time = stored["time_s"] if same_machine else m.time_s
            ref_machine = (stored.get("host"), stored.get("device")) if same_machine \
                else (m.host, m.device)
        else:
            self.document = new_document(self.module_name, filename, label, settings,
                                         baseline)
            ref_time, ref_machine = m.time_s, (m.host, m.device)
        self.reference = Reference(m.outputs, module.to_text(), m.kernels, m.bytes,
                                   ref_time, *ref_machine)
        self.context = SweepContext(module_text, filename, factory, options, settings,
                                    self.reference)
        done = {(r["pass"], r.get("occurrence")) for r in self.document["passes"]}
        self.pending = [r for r in self.rows if r.key not in done]

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def done(self) -> int:
        return len(self.document["passes"])

    def invocation_counts(self) -> dict[str, tuple[int, int]]:
        """pass name -> (invocations, of which changed) in the baseline (figure 3)."""
        out: dict[str, list[int]] = {}
        for inv, changed in zip(self.log.invocations, self.log.changed):
            c = out.setdefault(inv.pass_name, [0, 0])
            c[0] += 1
            c[1] += int(changed)
        return {k: (v[0], v[1]) for k, v in out.items()}

    def run(self, executor=None, on_row: Callable[[dict], None] | None = None) -> dict:
        """Run the pending rows (``executor``: see :mod:`hlo_opt.triage.executors`;
        None runs them here, one after the other); ``on_row`` sees each finished row
        after it joined the document.  Returns the document, rows in pipeline order."""
        to_run: list[PassRow] = []
        for row in self.pending:
            if row.changed == 0:
                self._add(row_document(row, "no_change", reference=self.reference,
                                       note="not run: the pass changed nothing in the baseline"),
                          on_row)
            else:
                to_run.append(row)
        self.pending = to_run
        docs = executor.map(self.context, to_run) if executor is not None else \
            (run_row(self.context, row) for row in to_run)
        for doc in docs:
            self._add(doc, on_row)
        self.pending = []
        self._order()
        return self.document

    def _add(self, doc: dict, on_row) -> None:
        base = self.document["baseline"]
        if doc.get("host") and "baseline_time_s" not in doc and \
                (doc["host"], doc["device"]) != (base.get("host"), base.get("device")):
            # resumed on another machine: say which baseline the slowdown is against
            doc["baseline_time_s"] = self.reference.time_s
        self.document["passes"].append(doc)
        if on_row is not None:
            on_row(doc)

    def _order(self) -> None:
        rank = {row.key: i for i, row in enumerate(self.rows)}
        self.document["passes"].sort(
            key=lambda r: rank.get((r["pass"], r.get("occurrence")), len(rank)))


def statuses(document: dict) -> dict[tuple, str]:
    """(pass, occurrence) -> status, for comparing two sweeps."""
    return {(r["pass"], r.get("occurrence")): r["status"] for r in document["passes"]}
