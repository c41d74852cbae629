"""CUDA graph capture in the CUDA runtime, checked under cuda-sim with a device that
records instead of running while it captures (as a real stream capture does) and replays
the record as the graph: an entry of launches, copies and cuBLASLt calls becomes one graph
after its first run, a while body with a known trip count one graph per loop; results stay
the interpreter's, and nothing in a captured region synchronizes or moves data to or from
the host (a real capture would fail there)."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import load
from tests.backends.cuda.support import require_gxx
from tests.conftest import ROOT, SAMPLES


def _recording_device(sim_device):
    class Recording(type(sim_device)):
        recording = None
        captures = 0
        replays = 0

        def _defer(self, fn):
            if self.recording is None:
                fn()
            else:
                self.recording.append(fn)

        def launch(self, k, addrs):
            self._defer(lambda: super(Recording, self).launch(k, addrs))

        def copy(self, dst, src, n):
            self._defer(lambda: super(Recording, self).copy(dst, src, n))

        def library_call(self, runner, thunk, frame):
            self._defer(lambda: super(Recording, self).library_call(runner, thunk, frame))

        def cublaslt(self):
            return object()

        def _host_only(self, what):
            if self.recording is not None:
                raise AssertionError(f"{what} inside a stream capture")

        def sync(self):
            self._host_only("sync")

        def upload(self, addr, data):
            self._host_only("upload")
            super().upload(addr, data)

        def download(self, addr, n):
            self._host_only("download")
            return super().download(addr, n)

        def begin_capture(self):
            assert self.recording is None
            self.recording = []

        def end_capture(self):
            graph, self.recording = self.recording, None
            self.captures += 1
            return graph

        def launch_graph(self, graph):
            self.replays += 1
            for fn in graph:
                fn()

    dev = Recording.__new__(Recording)
    dev.__dict__.update(sim_device.__dict__)
    return dev


# captures: the entry's graph (second run); with a known-trip-count loop also the loop
# body's graph on the first, plain run. From then on a run is one graph launch: the
# loops are unrolled into the entry's graph.
@pytest.mark.parametrize("path, captures", [
    (ROOT / "benchmarks" / "xla_gpu_modules" / "mlp_train_step.hlo", 1),
    (SAMPLES / "while_loop.hlo", 2),
    (ROOT / "benchmarks" / "xla_gpu_modules" / "scan.hlo", 2)], ids=lambda p: getattr(p, "stem", p))
def test_graphs_replay_the_interpreter_results(path, captures):
    require_gxx()
    from hlo_opt import passes_api
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.cuda_sim import SimExecutable
    from hlo_opt.backends.interpreter.literals import random_arguments
    from hlo_opt.flags import DebugOptions
    raw = load(str(path))
    m = passes_api.optimize(raw.clone(), DebugOptions.from_sources([]), pipeline="gpu")
    exe = SimExecutable(m)
    dev = _recording_device(exe.device)
    runner = Runner(exe.program, dev, profile=False)
    # small inputs: the scan is a tanh recurrence of 100 steps, chaotic at full scale
    args = [a * 0.05 if a.dtype.kind == "f" else a for a in random_arguments(raw, 1)]
    want = compile_module(raw, "interpreter").run(args)
    for run in range(4):                  # plain, captured, replayed twice
        before = dev.replays
        got = runner.run(args)
        if run >= 2:
            assert dev.replays == before + 1      # the whole run: one graph launch
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=1e-4, atol=1e-5)
    assert dev.captures == captures and dev.replays >= 2


def test_a_failed_capture_falls_back_to_plain_thunks():
    """A capture that fails (a call that refuses stream capture) turns graphs off for the
    runner; the run still completes with the interpreter's results."""
    require_gxx()
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.cuda_sim import SimExecutable
    m = load(str(SAMPLES / "while_loop.hlo"))
    exe = SimExecutable(m)
    dev = _recording_device(exe.device)

    def refuse(*a):  # the stream leaves capture mode; nothing recorded ran
        dev.recording = None
        raise RuntimeError("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
    dev.end_capture = refuse
    runner = Runner(exe.program, dev, profile=False)
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    want = compile_module(m, "interpreter").run([x])
    for _ in range(3):
        np.testing.assert_array_equal(runner.run([x])[0], want[0])
    assert runner._capture_failed


def test_a_loop_too_long_to_unroll_replays_its_body_graph(monkeypatch):
    """Past MAX_GRAPH_THUNKS the loop stays out of the entry's graph: its body is one graph
    replayed once per iteration (10 for the sample's known trip count)."""
    require_gxx()
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda import runtime
    from hlo_opt.backends.cuda_sim import SimExecutable
    monkeypatch.setattr(runtime, "MAX_GRAPH_THUNKS", 20)
    m = load(str(SAMPLES / "while_loop.hlo"))
    exe = SimExecutable(m)
    dev = _recording_device(exe.device)
    r = runtime.Runner(exe.program, dev, profile=False)
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    want = compile_module(m, "interpreter").run([x])
    for _ in range(3):
        before = dev.replays
        np.testing.assert_array_equal(r.run([x])[0], want[0])
        assert dev.replays == before + 10
    assert dev.captures == 1


MERGE_SORT = """HloModule merge_sort_graph

cmp {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  p2 = s32[] parameter(2)
  p3 = s32[] parameter(3)
  ROOT c = pred[] compare(p0, p1), direction=GT
}

ENTRY e {
  x = f32[3,6000] parameter(0)
  y = f32[3,6000] floor(x)
  v = s32[3,6000] iota(), iota_dimension=1
  s = (f32[3,6000], s32[3,6000]) sort(y, v), dimensions={1}, is_stable=true, to_apply=cmp
  k = f32[3,6000] get-tuple-element(s), index=0
  t = (f32[3,9], s32[3,9]) topk(x), k=9, largest=false
  tv = f32[3,9] get-tuple-element(t), index=0
  ti = s32[3,9] get-tuple-element(t), index=1
  i = s32[3,6000] get-tuple-element(s), index=1
  ROOT r = (f32[3,6000], s32[3,6000], f32[3,9], s32[3,9]) tuple(k, i, tv, ti)
}
"""


def test_a_merge_sort_is_launches_in_one_graph():
    """Rows of 6000 keys: the merge sort's launches (tiles, merge pass, outputs; scratch in
    __device__ arrays, nothing from the host) are captured with the rest of the entry and
    replayed; results stay the interpreter's, bit for bit."""
    require_gxx()
    from hlo_opt import parse_hlo
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.cuda_sim import SimExecutable
    m = parse_hlo(MERGE_SORT)
    exe = SimExecutable(m)
    kinds = [k.kind for k in exe.program.kernels]
    assert "sort_merge" in kinds and "topk_merge" in kinds, kinds
    dev = _recording_device(exe.device)
    runner = Runner(exe.program, dev, profile=False)
    x = (np.random.default_rng(3).standard_normal((3, 6000)) * 4).astype(np.float32)
    want = compile_module(m, "interpreter").run([x])
    for run in range(4):                  # plain, captured, replayed twice
        before = dev.replays
        got = runner.run([x])
        if run >= 2:
            assert dev.replays == before + 1
        assert len(got) == len(want) == 4
        for g, w in zip(got, want):
            assert np.asarray(g).tobytes() == np.asarray(w).tobytes()
    assert dev.captures == 1
