"""The runner's observer: the occurrence it reports for an invocation is the filter entry
that switches exactly that invocation (and its fixpoint siblings) off."""
from __future__ import annotations

import dataclasses

from hlo_opt.flags import DebugOptions
from hlo_opt.passes_api import PipelineFactory
from hlo_opt.text.parser import parse_hlo
from hlo_opt.triage.invocations import InvocationLog, optimize_with, plan_rows

from .util import sample_text


def _log(text, options, pipeline="optimization"):
    log = InvocationLog()
    optimize_with(PipelineFactory(pipeline=pipeline), parse_hlo(text), options, log)
    return log


def test_reported_occurrences_are_what_the_filter_matches():
    text = sample_text("layer_norm.hlo")
    base = _log(text, DebugOptions())
    occurrences = list(dict.fromkeys(inv.occurrence for inv in base.invocations))
    assert "simplification/algsimp:0" in occurrences
    for occ in occurrences[::3]:
        log = _log(text, dataclasses.replace(DebugOptions(), xla_disable_hlo_passes=[occ]))
        assert occ not in {inv.occurrence for inv in log.invocations}, occ
        first = next(i for i, inv in enumerate(base.invocations) if inv.occurrence == occ)
        before = [(inv.occurrence, inv.iteration) for inv in base.invocations[:first]]
        assert [(inv.occurrence, inv.iteration) for inv in log.invocations[:first]] == before


def test_rows_by_name_and_by_occurrence():
    log = _log(sample_text("layer_norm.hlo"), DebugOptions(), pipeline="gpu")
    by_name = {r.pass_name: r for r in plan_rows(log)}
    assert by_name["algsimp"].invocations == sum(
        inv.pass_name == "algsimp" for inv in log.invocations)
    assert by_name["layout-assignment"].filters == ("layout-assignment",)
    per_occ = plan_rows(log, per_occurrence=True)
    assert sum(r.invocations for r in per_occ) == len(log.invocations)
    spaced = next(r for r in per_occ if r.pass_name == "layout-assignment")
    # the pipeline "layout assignment" has a space, which filter entries cannot hold
    assert spaced.occurrence == "layout assignment/layout-assignment:0"
    assert spaced.filters == ("layout-assignment:0",)
