"""hlo-opt ablate's library: statuses, rows, executors (the interpreter as backend)."""
from __future__ import annotations

import pytest

from hlo_opt.errors import HloError
from hlo_opt.flags import DebugOptions
from hlo_opt.passes_api import PipelineFactory
from hlo_opt.triage.ablate import AblateSettings, Sweep, statuses
from hlo_opt.triage.executors import ProcessExecutor, SerialExecutor

from .factories import ExpandFoo, Listed
from .util import gpu_options, sample_text

# test-expand-foo turns the custom-call the interpreter cannot run into an add; algsimp
# removes a0 = p0 + 0; test-only-miscompile then turns the first float add left (the
# expanded Foo) into a subtract; cse merges e1/e2; dce finds nothing left to do.
HLO = """
HloModule ablate

ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  zero = f32[] constant(0)
  bz = f32[8] broadcast(zero), dimensions={}
  a0 = f32[8] add(p0, bz)
  foo = f32[8] custom-call(a0, p1), custom_call_target="Foo"
  e1 = f32[8] exponential(p1)
  e2 = f32[8] exponential(p1)
  m = f32[8] multiply(foo, e1)
  ROOT r = f32[8] subtract(m, e2)
}
"""

FACTORY = Listed(ExpandFoo, "algsimp", "test-only-miscompile", "cse", "dce")
FAST = AblateSettings(repeat=1, warmup=0)


def _sweep(factory=FACTORY, text=HLO, settings=FAST, executor=None, options=None, **kw):
    sweep = Sweep(text, "ablate.hlo", factory, options or DebugOptions(), settings, **kw)
    return sweep, sweep.run(executor)


def test_statuses_and_messages():
    sweep, doc = _sweep()
    rows = {r["pass"]: r for r in doc["passes"]}
    assert [r["pass"] for r in doc["passes"]] == ["test-expand-foo", "algsimp",
                                                  "test-only-miscompile", "cse", "dce"]
    assert rows["test-expand-foo"]["status"] == "breaks"
    assert "custom_call_target \"Foo\" is not supported" in rows["test-expand-foo"]["error"]
    assert rows["algsimp"]["status"] == "wrong_result"  # the miscompile hits a0 instead
    assert rows["test-only-miscompile"]["status"] == "wrong_result"
    assert "out0 f32[8]" in rows["algsimp"]["error"]
    assert rows["cse"]["status"] == "ok" and "error" not in rows["cse"]
    assert rows["dce"]["status"] == "no_change"
    assert rows["dce"]["note"].startswith("not run: the pass changed nothing")
    assert rows["dce"]["time_s"] is None and rows["dce"]["times_s"] == []
    for r in doc["passes"]:
        assert ("error" in r) == (r["status"] in ("breaks", "wrong_result"))
        assert r["invocations"] == 1
    base = doc["baseline"]
    assert rows["cse"]["slowdown"] == pytest.approx(rows["cse"]["time_s"] / base["time_s"])
    assert rows["cse"]["kernels"] == base["kernels"] + 1  # two exponentials again
    assert sweep.invocation_counts()["algsimp"] == (1, 1)


def test_rows_per_occurrence():
    factory = Listed("algsimp", "dce", "algsimp")
    text = """
HloModule occ
ENTRY e {
  p0 = f32[4] parameter(0)
  one = f32[] constant(1)
  b1 = f32[4] broadcast(one), dimensions={}
  ROOT m = f32[4] multiply(p0, b1)
}
"""
    _, by_name = _sweep(factory, text)
    assert [(r["pass"], r["occurrence"], r["invocations"]) for r in by_name["passes"]] == [
        ("algsimp", None, 2), ("dce", None, 1)]
    _, per_occ = _sweep(factory, text, AblateSettings(repeat=1, warmup=0,
                                                      per_occurrence=True))
    got = [(r["occurrence"], r["status"]) for r in per_occ["passes"]]
    # with the first algsimp off, the second does the same work: the same module
    assert got == [("transforms_pipeline/algsimp:0", "no_change"),
                   ("transforms_pipeline/dce:0", "no_change"),
                   ("transforms_pipeline/algsimp:1", "no_change")]
    notes = [r["note"] for r in per_occ["passes"]]
    assert "baseline's (up to names)" in notes[0]
    assert "changed nothing" in notes[1] and "changed nothing" in notes[2]


def test_gpu_pipeline_rows_and_pipeline_names():
    """Through the gpu pipeline: passes whose pipeline shares a name or has a space in
    its name are still switched off alone; renaming passes change nothing real (a module
    with loop fusions: softmax's one __triton fusion keeps its name; the gelu stays out of
    the gemm's epilogue, so that a loop fusion is left)."""
    sweep, doc = _sweep(PipelineFactory(pipeline="gpu"), sample_text("matmul_bias_gelu.hlo"),
                        options=gpu_options(gemm_epilogues=False))
    rows = {r["pass"]: r for r in doc["passes"]}
    by_key = {r.pass_name: r for r in sweep.rows}
    assert by_key["layout-assignment"].filters == ("layout-assignment",)
    assert rows["rename_fusions"]["status"] == "no_change"
    assert "up to names" in rows["rename_fusions"]["note"]
    assert rows["priority-fusion"]["status"] == "ok"
    assert rows["priority-fusion"]["kernels"] > doc["baseline"]["kernels"]
    assert all(r["status"] in ("ok", "no_change") for r in doc["passes"]), \
        [(r["pass"], r.get("error")) for r in doc["passes"] if r["status"] == "breaks"]


def test_jobs_equal_serial():
    _, serial = _sweep(executor=SerialExecutor())
    _, parallel = _sweep(executor=ProcessExecutor(2))

    def facts(doc):
        return [(r["pass"], r["status"], r["kernels"], r["bytes"], r.get("error"))
                for r in doc["passes"]]
    assert facts(parallel) == facts(serial)


def test_baseline_failure_is_a_user_error():
    with pytest.raises(HloError, match="the baseline fails.*test-only-crash"):
        _sweep(Listed("algsimp", "test-only-crash"))
    with pytest.raises(HloError, match="xla_enable_hlo_passes_only"):
        Sweep(HLO, "a.hlo", FACTORY, DebugOptions(xla_enable_hlo_passes_only=["dce"]), FAST)


def test_resume_runs_only_missing_rows():
    _, first = _sweep()
    partial = {**first, "passes": [dict(r) for r in first["passes"][:2]]}
    partial["passes"][0]["error"] = "kept from the first run"
    sweep = Sweep(HLO, "ablate.hlo", FACTORY, DebugOptions(), FAST, resume=partial)
    assert [r.pass_name for r in sweep.pending] == ["test-only-miscompile", "cse", "dce"]
    resumed = sweep.run()
    assert resumed["passes"][0]["error"] == "kept from the first run"
    assert statuses(resumed) == statuses(first)
    with pytest.raises(HloError, match="--resume: the report is for repeat 1"):
        _sweep(settings=AblateSettings(repeat=2, warmup=0), resume=partial)


def test_rows_timed_elsewhere_use_that_machines_baseline(monkeypatch):
    import hlo_opt.triage.ablate as ablate_mod
    import hlo_opt.triage.measure as measure_mod
    sweep = Sweep(HLO, "ablate.hlo", FACTORY, DebugOptions(), FAST)
    monkeypatch.setattr(measure_mod, "host_name", lambda: "elsewhere")
    monkeypatch.setattr(ablate_mod, "_LOCAL_BASELINES", {})
    doc = sweep.run()
    cse = next(r for r in doc["passes"] if r["pass"] == "cse")
    assert cse["host"] == "elsewhere" and doc["baseline"]["host"] != "elsewhere"
    assert cse["baseline_time_s"] > 0
    assert cse["slowdown"] == pytest.approx(cse["time_s"] / cse["baseline_time_s"])
    from io import StringIO

    from rich.console import Console

    from hlo_opt.commands._ablate_table import print_table
    out = StringIO()
    print_table(doc, sweep.invocation_counts(), "serial", 1.0,
                console=Console(file=out, width=200))
    assert "†" in out.getvalue() and "another machine" in out.getvalue()


class _FakeExecutable:
    """What a GPU backend may offer: a kernel count, a device name, profile data."""

    kernel_count = 7
    device_name = "Fake GPU"

    def __init__(self, module):
        from hlo_opt.backends.interpreter import Interpreter
        self.inner = Interpreter(module)

    def run(self, args):
        return self.inner.run(args)

    def run_profiled(self, args):
        return self.inner.run(args), 0.25


def test_measure_uses_what_the_executable_offers(monkeypatch):
    import hlo_opt.backends as backends
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends.interpreter.literals import random_arguments
    from hlo_opt.triage.measure import measure
    monkeypatch.setattr(backends, "compile", lambda module, backend: _FakeExecutable(module))
    module = parse_hlo(HLO.replace('custom-call(a0, p1), custom_call_target="Foo"',
                                   "add(a0, p1)"))
    args = random_arguments(module, 1)
    m = measure(module, "fake", args, repeat=3, profile=True)
    assert m.times_s == [0.25] * 3 and m.kernels == 7 and m.device == "Fake GPU"
    plain = measure(module, "fake", args, repeat=1)
    assert plain.times_s[0] != 0.25 and plain.bytes > 0
    monkeypatch.undo()
    with pytest.raises(HloError, match="has no profile data"):
        measure(module, "interpreter", args, profile=True)


def test_resume_on_another_machine_says_which_baseline(monkeypatch):
    import hlo_opt.triage.measure as measure_mod
    _, first = _sweep()
    partial = {**first, "passes": first["passes"][:1]}
    monkeypatch.setattr(measure_mod, "host_name", lambda: "elsewhere")
    sweep = Sweep(HLO, "ablate.hlo", FACTORY, DebugOptions(), FAST, resume=partial)
    doc = sweep.run()
    cse = next(r for r in doc["passes"] if r["pass"] == "cse")
    assert cse["host"] == "elsewhere" and doc["baseline"]["host"] != "elsewhere"
    assert cse["slowdown"] == pytest.approx(cse["time_s"] / cse["baseline_time_s"])


def test_timed_runs_hold_the_timing_lock():
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends.interpreter.literals import random_arguments
    from hlo_opt.triage import measure as measure_mod

    class Lock:
        held = entered = 0

        def __enter__(self):
            Lock.entered += 1
            Lock.held = 1

        def __exit__(self, *exc):
            Lock.held = 0

    seen = []

    class Probe:
        def __init__(self, module):
            from hlo_opt.backends.interpreter import Interpreter
            self.inner = Interpreter(module)

        def run(self, args):
            seen.append(Lock.held)
            return self.inner.run(args)

    module = parse_hlo("HloModule l\nENTRY e {\n  p = f32[2] parameter(0)\n"
                       "  ROOT n = f32[2] negate(p)\n}\n")
    import hlo_opt.backends as backends
    original = backends.compile
    backends.compile = lambda m, b: Probe(m)
    try:
        measure_mod.measure(module, "probe", random_arguments(module), repeat=2, warmup=1,
                            lock=Lock())
    finally:
        backends.compile = original
    assert Lock.entered == 1 and seen == [1, 1, 1]


def _backend_or_skip(name: str):
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.errors import UnsupportedError
    try:
        compile_module(parse_hlo("HloModule p\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"),
                       name)
    except UnsupportedError as e:
        pytest.skip(f"backend {name} is not available here: {e}")


def test_cpu_backend_gives_the_interpreters_statuses():
    _backend_or_skip("cpu")
    _, interp = _sweep()
    _, cpu = _sweep(settings=AblateSettings(backend="cpu", repeat=1, warmup=0))
    assert statuses(cpu) == statuses(interp)
    assert cpu["backend"] == "cpu" and cpu["baseline"]["device"]


def test_paired_rows_are_compared_with_the_baseline_timed_beside_them():
    sweep, doc = _sweep(settings=AblateSettings(repeat=3, warmup=0, paired=True))
    ran = [r for r in doc["passes"] if r["times_s"]]
    assert ran and doc["paired"] is True
    for r in ran:
        assert len(r["baseline_times_s"]) == 3
        assert r["baseline_time_s"] == pytest.approx(sorted(r["baseline_times_s"])[1])
        assert r["slowdown"] == pytest.approx(r["time_s"] / r["baseline_time_s"])
    with pytest.raises(HloError, match="paired"):
        _sweep(settings=AblateSettings(repeat=3, warmup=0),  # paired resumes only paired
               resume={**doc, "passes": []})


class _ProfileRowsExecutable:
    """The cuda backend's shape: program.kernels, device_info.name, profile() rows."""

    def __init__(self, module):
        from types import SimpleNamespace

        from hlo_opt.backends.interpreter import Interpreter
        self.inner = Interpreter(module)
        self.program = SimpleNamespace(kernels=["k0", "k1", "k2"])
        self.device_info = SimpleNamespace(name="Fake H200")

    def run(self, args):
        return self.inner.run(args)

    def profile(self, args, iterations=1):
        return [{"name": "k0", "kind": "kernel", "time_us": 10.0, "calls": 2},
                {"name": "k1", "kind": "kernel", "time_us": 5.0, "calls": 1}]


def test_measure_reads_the_cuda_backends_profile_rows(monkeypatch):
    import hlo_opt.backends as backends
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends.interpreter.literals import random_arguments
    from hlo_opt.triage.measure import measure
    monkeypatch.setattr(backends, "compile", lambda m, b: _ProfileRowsExecutable(m))
    module = parse_hlo("HloModule c\nENTRY e {\n  p = f32[2] parameter(0)\n"
                       "  ROOT n = f32[2] negate(p)\n}\n")
    m = measure(module, "fake", random_arguments(module), repeat=2, profile=True)
    assert m.times_s == [pytest.approx(25e-6)] * 2
    assert m.kernels == 3 and m.device == "Fake H200" and len(m.outputs) == 1
