"""Recording pass invocations: what ran, in which pipeline, and whether it changed the
module; optionally the module text after each changing invocation (the snapshots a dump
would write), so that a bisection never optimizes a prefix twice."""
from __future__ import annotations

from dataclasses import dataclass

from ..pipeline import PassInvocation, PipelineRunner

__all__ = ["InvocationLog", "PassRow", "optimize_with", "plan_rows"]


class InvocationLog:
    """A :class:`~hlo_opt.pipeline.PipelineRunner` observer.

    ``invocations[i]`` / ``changed[i]``: the i-th leaf pass run and its report;
    ``current``: the invocation running now (the one that raised, after a failure);
    ``snapshots`` (when asked for): invocation index -> module text after it, for every
    invocation that changed the module."""

    def __init__(self, snapshots: bool = False):
        self.invocations: list[PassInvocation] = []
        self.changed: list[bool] = []
        self.current: PassInvocation | None = None
        self.snapshots: dict[int, str] | None = {} if snapshots else None

    def before_pass(self, invocation: PassInvocation, module) -> None:
        self.current = invocation

    def after_pass(self, invocation: PassInvocation, module, changed: bool) -> None:
        self.invocations.append(invocation)
        self.changed.append(bool(changed))
        self.current = None
        if changed and self.snapshots is not None:
            self.snapshots[invocation.index] = module.to_text()


def optimize_with(factory, module, options, observer=None) -> bool:
    """Run the pipeline ``factory(options)`` on ``module`` in place (verifying after every
    changing pass, honouring the pass filters and fuel in ``options``)."""
    pipeline = factory(options)
    return PipelineRunner(options, observer=observer).run(pipeline, module)


@dataclass(frozen=True)
class PassRow:
    """One ablation row: a pass name (all its invocations) or one ``pipeline/name:N``
    occurrence, with the ``--xla_disable_hlo_passes`` entries that switch it off and what
    the baseline run saw of it."""

    pass_name: str
    occurrence: str | None
    filters: tuple[str, ...]
    invocations: int
    changed: int

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.pass_name, self.occurrence)


def plan_rows(log: InvocationLog, per_occurrence: bool = False) -> list[PassRow]:
    """The rows of a sweep, in the order the baseline first ran them.

    By name, a pass is switched off by its bare name, or, where a pipeline has the same
    name (a bare name switches off a whole pipeline of that name too, as XLA's filter
    does), by one ``pipeline/name`` entry per pipeline it ran in.  Per occurrence, the
    entry is ``pipeline/name:N``; a fixpoint's iterations, and pipelines that run several
    times, share it (XLA's grammar).  Filter entries cannot hold whitespace: under a
    pipeline whose name has some, the global ``name:N`` occurrences stand in."""
    pipelines = {p for inv in log.invocations for p in inv.pipeline_path}
    order: list[tuple] = []
    stats: dict[tuple, list] = {}
    for inv, changed in zip(log.invocations, log.changed):
        parent = inv.pipeline_path[-1] if inv.pipeline_path else ""
        spaced = any(c.isspace() for c in parent)
        if per_occurrence:
            key = (inv.pass_name, inv.occurrence)
            entry = f"{inv.pass_name}:{inv.global_occurrence}" if spaced else inv.occurrence
        else:
            key = (inv.pass_name, None)
            if inv.pass_name not in pipelines:
                entry = inv.pass_name
            elif spaced:
                entry = f"{inv.pass_name}:{inv.global_occurrence}"
            else:
                entry = f"{parent}/{inv.pass_name}"
        s = stats.get(key)
        if s is None:
            s = stats[key] = [[], 0, 0]
            order.append(key)
        if entry not in s[0]:
            s[0].append(entry)
        s[1] += 1
        s[2] += int(changed)
    return [PassRow(name, occ, tuple(stats[(name, occ)][0]), stats[(name, occ)][1],
                    stats[(name, occ)][2]) for name, occ in order]
