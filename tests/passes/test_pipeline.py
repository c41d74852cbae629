"""The pass framework: Pipeline, Fixpoint, filters, verification, no-change checks, stats."""
from __future__ import annotations

import logging

import pytest

from hlo_opt.errors import HloVerifyError, PassError
from hlo_opt.flags import DebugOptions
from hlo_opt.ir.shape import Shape
from hlo_opt.dump.stats import PassStats
from hlo_opt.pipeline import (Fixpoint, Pipeline, PipelineRunner, module_fingerprint,
                              run_pipeline)
from hlo_opt.passes_api import build_pipeline

from tests.support.harness import load_text

HLO = """
HloModule m

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %a = f32[4] add(%p, %p)
  ROOT %r = f32[4] negate(%a)
}
"""


def module():
    return load_text(HLO)


class AddConstant:
    """Adds a dead constant each run (a real change) and reports it ``changes`` times."""

    def __init__(self, name="adder", changes=10**9, honest=True):
        self.name = name
        self.changes = changes
        self.honest = honest
        self.runs = 0

    def run(self, m) -> bool:
        self.runs += 1
        if self.runs > self.changes:
            return False
        m.entry.add("constant", Shape.array("f32", ()), payload=str(self.runs))
        return self.honest


class Noop:
    def __init__(self, name="noop"):
        self.name = name
        self.runs = 0

    def run(self, m) -> bool:
        self.runs += 1
        return False


class Toggle:
    """Adds a constant, then removes it, forever: a cycle of two module states."""

    name = "toggle"

    def __init__(self):
        self.inst = None

    def run(self, m) -> bool:
        if self.inst is None:
            self.inst = m.entry.add("constant", Shape.array("f32", ()), payload="7")
        else:
            m.entry.remove_instruction(self.inst)
            self.inst = None
        return True


class Breaker:
    """Changes the root to a wrong shape (the verifier must catch it)."""

    name = "breaker"

    def run(self, m) -> bool:
        m.entry.root.shape = Shape.array("f32", (5,))
        return True


class Recorder:
    """A verifier stand-in that records when it was called."""

    def __init__(self):
        self.calls = 0

    def __call__(self, m):
        self.calls += 1


# ---- pipelines ---------------------------------------------------------------------------

def test_passes_option_builds_transforms_pipeline_in_order():
    pipe = build_pipeline(passes="dce,cse,dce")
    assert pipe.name == "transforms_pipeline"
    assert [p.name for p in pipe.items] == ["dce", "cse", "dce"]
    assert pipe.items[0] is not pipe.items[2]


def test_unknown_pass_is_xla_error():
    with pytest.raises(PassError, match=r"^INVALID_ARGUMENT: Pass nonexistent not found\.$"):
        build_pipeline(passes="dce,nonexistent")
    with pytest.raises(PassError, match="Pass  not found"):
        build_pipeline(passes="dce,,cse")  # XLA splits on ',' without skipping empties


def test_unknown_pipeline_lists_known_ones():
    with pytest.raises(PassError, match="Pipeline nope not found. Known pipelines: .*optimization"):
        build_pipeline(pipeline="nope")


def test_leaves_and_nesting():
    a, b, c = Noop("a"), Noop("b"), Noop("c")
    pipe = Pipeline("outer", [a, Pipeline("inner", [b]), Fixpoint(c)])
    assert [(path, p.name) for path, p in pipe.leaves()] == [
        (("outer",), "a"), (("outer", "inner"), "b"), (("outer",), "c")]
    assert Fixpoint(c).name == "c" and not Fixpoint(c).is_pipeline
    assert Fixpoint(Pipeline("fx", [a])).is_pipeline


def test_pipeline_runs_every_pass_once_and_reports_change():
    m = module()
    a, n = AddConstant(changes=1), Noop()
    assert run_pipeline(Pipeline("p", [n, a, n]), m, verifier=None)
    assert a.runs == 1 and n.runs == 2


# ---- fixpoint ----------------------------------------------------------------------------

def test_fixpoint_runs_until_no_change():
    m = module()
    a = AddConstant(changes=3)
    assert run_pipeline(Pipeline("p", [Fixpoint(a)]), m, verifier=None)
    assert a.runs == 4  # three changing runs, one that changes nothing


def test_fixpoint_limit_warns_and_reports_no_change(caplog):
    m = module()
    a = AddConstant()
    with caplog.at_level(logging.WARNING, logger="hlo_opt.pipeline"):
        changed = run_pipeline(Pipeline("p", [Fixpoint(a)]), m, verifier=None)
    assert a.runs == 25  # XLA's default limit
    assert changed is False
    assert "Unexpectedly high number of iterations (25)" in caplog.text
    assert "'adder'" in caplog.text


def test_fixpoint_custom_limit_and_no_lie_under_verify_no_change(caplog):
    m = module()
    a = AddConstant()
    with caplog.at_level(logging.WARNING, logger="hlo_opt.pipeline"):
        changed = run_pipeline(Pipeline("p", [Fixpoint(a, max_iterations=3)]), m,
                               verifier=None, verify_no_change=True)
    assert a.runs == 3
    assert changed is True  # reporting "no change" would trip the no-change check


def test_fixpoint_limit_crash_flag():
    opts = DebugOptions(xla_unsupported_crash_on_hlo_pass_fix_max_iterations=True)
    with pytest.raises(PassError, match="Unexpectedly high number of iterations 2"):
        run_pipeline(Pipeline("p", [Fixpoint(AddConstant(), 2)]), module(), opts,
                     verifier=None)


def test_fixpoint_cycle_detection(caplog):
    opts = DebugOptions(xla_hlo_pass_fix_detect_cycles=True)
    with caplog.at_level(logging.WARNING, logger="hlo_opt.pipeline"):
        run_pipeline(Pipeline("p", [Fixpoint(Toggle(), 5)]), module(), opts, verifier=None)
    assert "Cycle detected when running toggle on iteration 2" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hlo_opt.pipeline"):
        run_pipeline(Pipeline("p", [Fixpoint(Toggle(), 5)]), module(), verifier=None)
    assert "Cycle detected" not in caplog.text


def test_fixpoint_of_pipeline_records_iterations():
    stats = PassStats("m")
    a = AddConstant(changes=2)
    pipe = Pipeline("outer", [Fixpoint(Pipeline("simp", [Noop("n"), a]))])
    run_pipeline(pipe, module(), verifier=None, stats=stats)
    assert [(r.pass_name, r.iteration, r.changed) for r in stats.records] == [
        ("n", 0, False), ("adder", 0, True), ("n", 1, False), ("adder", 1, True),
        ("n", 2, False), ("adder", 2, False)]
    assert stats.records[1].pipeline == "outer/simp"


# ---- verification ------------------------------------------------------------------------

def test_verifier_at_start_and_after_changing_passes_only():
    rec = Recorder()
    run_pipeline(Pipeline("p", [Noop(), AddConstant(changes=1), Noop(), AddConstant(changes=0)]),
                 module(), verifier=rec)
    assert rec.calls == 2  # pipeline-start + the one pass that changed


def test_verifier_failure_names_pass_and_instruction():
    with pytest.raises(PassError) as info:
        run_pipeline(Pipeline("p", [Noop(), Breaker()]), module())
    msg = str(info.value)
    assert msg.endswith("Failed after breaker")
    assert "%r" in msg and "f32[5]" in msg
    assert isinstance(info.value.__cause__, HloVerifyError)


def test_verifier_failure_at_pipeline_start():
    m = module()
    m.entry.root.shape = Shape.array("f32", (5,))
    with pytest.raises(PassError, match=r"Failed after pipeline-start$"):
        run_pipeline(Pipeline("p", [Noop()]), m)


def test_verify_no_change_catches_a_silent_change():
    liar = AddConstant(name="liar", honest=False)
    with pytest.raises(PassError, match=r"Pass 'liar' in pipeline 'p' reported that it did "
                                        r"not change the HLO but the module fingerprint"):
        run_pipeline(Pipeline("p", [liar]), module(), verifier=None, verify_no_change=True)
    # without the check the lie goes unnoticed, as in XLA's default mode
    assert run_pipeline(Pipeline("p", [AddConstant(honest=False)]), module(),
                        verifier=None) is False


def test_noop_change_flag():
    class Claims:
        name = "claims"

        def run(self, m):
            return True

    opts = DebugOptions(xla_unsupported_crash_on_hlo_pass_noop_change=True)
    with pytest.raises(PassError, match="reported that it changed the HLO"):
        run_pipeline(Pipeline("p", [Claims()]), module(), opts, verifier=None)


def test_internal_errors_keep_traceback_and_name_the_pass():
    class Buggy:
        name = "buggy"

        def run(self, m):
            raise KeyError("oops")

    with pytest.raises(KeyError) as info:
        run_pipeline(Pipeline("outer", [Buggy()]), module(), verifier=None)
    assert any("while running HLO pass 'buggy' in pipeline 'outer'" in n
               for n in info.value.__notes__)


# ---- filters -----------------------------------------------------------------------------

def _run_with(opts, pipe):
    stats = PassStats("m")
    PipelineRunner(opts, verifier=None, stats=stats).run(pipe, module())
    return stats


def test_disable_by_name_and_occurrence():
    a1, a2, b = Noop("a"), Noop("a"), Noop("b")
    stats = _run_with(DebugOptions(xla_disable_hlo_passes=["a:1"]), Pipeline("p", [a1, b, a2]))
    assert a1.runs == 1 and b.runs == 1 and a2.runs == 0
    assert stats.skipped == [{"pipeline": "p", "pass": "a",
                              "reason": "disabled by --xla_disable_hlo_passes"}]
    a1, b = Noop("a"), Noop("b")
    _run_with(DebugOptions(xla_disable_hlo_passes=["a"]), Pipeline("p", [a1, b]))
    assert a1.runs == 0 and b.runs == 1


def test_disable_scoped_to_pipeline_and_whole_pipeline():
    outer_a, inner_a, inner_b = Noop("a"), Noop("a"), Noop("b")
    pipe = Pipeline("top", [outer_a, Pipeline("inner", [inner_a, inner_b])])
    _run_with(DebugOptions(xla_disable_hlo_passes=["inner/a"]), pipe)
    assert (outer_a.runs, inner_a.runs, inner_b.runs) == (1, 0, 1)
    outer_a, inner_a, inner_b = Noop("a"), Noop("a"), Noop("b")
    pipe = Pipeline("top", [outer_a, Pipeline("inner", [inner_a, inner_b])])
    _run_with(DebugOptions(xla_disable_hlo_passes=["inner"]), pipe)
    assert (outer_a.runs, inner_a.runs, inner_b.runs) == (1, 0, 0)


def test_enable_only_enters_sub_pipelines():
    a, b_outer, b_inner, c = Noop("a"), Noop("b"), Noop("b"), Noop("c")
    pipe = Pipeline("top", [a, b_outer, Fixpoint(Pipeline("inner", [b_inner, c]))])
    stats = _run_with(DebugOptions(xla_enable_hlo_passes_only=["b"]), pipe)
    assert (a.runs, b_outer.runs, b_inner.runs, c.runs) == (0, 1, 1, 0)
    assert {s["pass"] for s in stats.skipped} == {"a", "c"}


def test_enable_only_pipeline_scoped_occurrence():
    first, second = Noop("b"), Noop("b")
    pipe = Pipeline("top", [Pipeline("inner", [first, second])])
    _run_with(DebugOptions(xla_enable_hlo_passes_only=["inner/b:1"]), pipe)
    assert (first.runs, second.runs) == (0, 1)


def test_disable_by_pass_id():
    # ids: 1 is the pipeline-start pseudo-pass, then one per pass, as XLA numbers them
    a, b = Noop("a"), Noop("b")
    _run_with(DebugOptions(xla_disable_hlo_passes=["@3"]), Pipeline("p", [a, b]))
    assert (a.runs, b.runs) == (1, 0)


def test_disable_all_runs_nothing():
    a = AddConstant()
    rec = Recorder()
    assert PipelineRunner(DebugOptions(xla_disable_all_hlo_passes=True),
                          verifier=rec).run(Pipeline("p", [a]), module()) is False
    assert a.runs == 0 and rec.calls == 0


def test_both_filters_rejected():
    opts = DebugOptions()
    opts.xla_disable_hlo_passes = ["a"]
    opts.xla_enable_hlo_passes_only = ["b"]
    with pytest.raises(PassError, match="Cannot set both"):
        PipelineRunner(opts)


# ---- stats, progress, fingerprint -----------------------------------------------------

def test_stats_records_counts_and_deltas():
    stats = PassStats("m", 0, "p")
    m = module()
    run_pipeline(Pipeline("p", [AddConstant(changes=1), Noop()]), m, verifier=None, stats=stats)
    first, second = stats.records
    assert (first.instructions_before, first.instructions_after) == (3, 4)
    assert first.opcode_delta == {"constant": 1}
    assert first.changed and not second.changed
    assert second.opcode_delta == {} and second.instructions_before == 4
    assert first.wall_ms >= 0
    totals = stats.totals()
    assert totals["adder"]["invocations"] == 1 and totals["adder"]["changed"] == 1
    doc = stats.to_json()
    assert doc["passes"][0]["pass"] == "adder" and doc["format"] == "hlo-opt-pass-stats/1"


def test_progress_events():
    events = []
    pipe = Pipeline("top", [Noop("a"), Pipeline("inner", [Noop("b")]), Fixpoint(AddConstant(changes=1))])
    PipelineRunner(verifier=None, progress=events.append).run(pipe, module())
    assert [(e.index, e.total, e.pass_name, e.pipeline_path) for e in events] == [
        (1, 3, "a", ("top",)), (2, 3, "b", ("top", "inner")), (3, 3, "adder", ("top",)),
        (4, 3, "adder", ("top",))]
    assert events[-1].iteration == 1


def test_fingerprint():
    m = module()
    fp = module_fingerprint(m)
    assert module_fingerprint(m.clone()) == fp
    m.entry.instructions[1].name = "renamed"  # names do not matter
    assert module_fingerprint(m) == fp
    m.entry.root.attrs["metadata"] = '{op_name="x"}'
    assert module_fingerprint(m) != fp
    m2 = module()
    m2.entry.add("constant", Shape.array("f32", ()), payload="1")
    assert module_fingerprint(m2) != fp
    m3 = module()
    m3.entry.root.operands[0].opcode = "subtract"
    assert module_fingerprint(m3) != fp


def test_a_fixpoints_dump_step_goes_to_the_iteration_that_changed(tmp_path):
    from hlo_opt.dump.writer import DumpConfig, DumpDirectory, ModuleDumper
    options = DebugOptions.from_sources([f"--xla_dump_to={tmp_path}",
                                         "--xla_dump_hlo_pass_re=.*"])
    m = module()
    stats = PassStats(m.name)
    dumper = ModuleDumper(DumpDirectory(DumpConfig.from_options(options)), 0, options)
    a = AddConstant(changes=2)
    PipelineRunner(options, verifier=None, dumper=dumper, stats=stats).run(
        Pipeline("p", [Fixpoint(a)]), m)
    rows = [r for r in stats.records if r.pass_name == "adder"]
    assert [r.changed for r in rows] == [True, True, False]
    dumped = [r for r in rows if r.dump_step is not None]
    assert len(dumped) == 1 and dumped[0].changed and dumped[0].iteration == 1
