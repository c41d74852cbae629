"""cuDNN convolutions (``cudnn_conv.py``) without a GPU: the frontend graphs built from
every plan (where ``nvidia-cudnn-frontend`` is installed), the missing-library and
refused-graph paths, the runtime's choice between cuDNN and the conv kernel (under
cuda-sim, with a host stand-in for cuDNN that runs the numpy model of
``test_conv_plan.py`` on the device pointers it is given), and the autotuner's cuDNN
engine candidates and the backend config they become."""
from __future__ import annotations

import ctypes
import json
import sys

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends.cuda import conv_plan as cp
from hlo_opt.backends.cuda import cudnn_conv
from hlo_opt.backends.cuda.toolchain import MissingToolError
from hlo_opt.ir.types import numpy_dtype
from tests.backends.cuda import test_conv_kernels as ck
from tests.backends.cuda.support import require_gxx
from tests.backends.cuda.test_conv_plan import _convs, _modules, cudnn_model


def _plans():
    out = []
    for name, m in sorted(_modules().items()):
        out += [(name, p) for p in map(cp.conv_plan, _convs(m)) if p is not None]
    return out


def _frontend():
    if not cudnn_conv.cudnn_available():
        print("nvidia-cudnn-frontend is not installed: frontend graph checks skipped")
        pytest.skip("nvidia-cudnn-frontend (import cudnn) not installed")
    return cudnn_conv._cudnn()


# ---- the frontend graphs (no device needed to build them) --------------------------------
def test_every_plan_builds_a_frontend_graph():
    cudnn = _frontend()
    plans = _plans()
    assert len(plans) > 25
    for name, plan in plans:
        g, t = cudnn_conv.build_graph(cudnn, plan)
        out = t["out"]
        assert tuple(out.get_dim()) == plan.result.dims, name
        assert tuple(out.get_stride()) == plan.result.strides, name
        operands = {r for r, d in (("x", plan.x), ("w", plan.w), ("y", plan.y),
                                   ("bias", plan.bias), ("side", plan.side))
                    if d is not None and d.operand is not None}
        assert operands == set(t) - {"out"}, name
        for role in operands:
            desc = getattr(plan, role)
            assert tuple(t[role].get_dim()) == desc.dims, (name, role)
            assert tuple(t[role].get_stride()) == desc.strides, (name, role)


def test_fused_forward_is_one_graph():
    cudnn = _frontend()
    plan = cp.conv_plan(_convs(_modules()["call_side_input_elu"])[0])
    g, _ = cudnn_conv.build_graph(cudnn, plan)
    kinds = [n["type"] if isinstance(n, dict) else str(n) for n in
             json.loads(str(g))["nodes"]]
    assert kinds[0] == "CONV_FPROP" and kinds.count("POINTWISE") >= 4, kinds


def test_no_device_fails_at_once():
    """Without a driver the graph build raises (the runtime then runs the kernel)."""
    _frontend()
    from hlo_opt.backends.cuda.driver import CudaDriverError, probe
    try:
        probe()
    except (CudaDriverError, MissingToolError):
        pass
    else:
        pytest.skip("a CUDA device is present")
    plan = _plans()[0][1]

    class NoDevice:
        stream = 0
    with pytest.raises(Exception):
        conv = cudnn_conv.CudnnConv(NoDevice())
        conv.graph(plan)


def test_missing_frontend_is_a_clear_error(monkeypatch):
    cudnn_conv._cudnn.cache_clear()
    monkeypatch.setitem(sys.modules, "cudnn", None)
    try:
        with pytest.raises(MissingToolError, match="nvidia-cudnn-frontend"):
            cudnn_conv._cudnn()
        assert not cudnn_conv.cudnn_available()
    finally:
        cudnn_conv._cudnn.cache_clear()


def test_excluded_notes():
    plans = dict((p.result.dtype, p) for _, p in _plans())
    assert "TENSOR_CORE" in cudnn_conv.excluded_notes(plans["f32"])
    assert "TENSOR_CORE" not in cudnn_conv.excluded_notes(plans["bf16"])


# ---- engine selection (a stand-in graph) ------------------------------------------------
class _Graph:
    def __init__(self, refuse=()):
        self.refuse = set(refuse)
        self.ran = []

    def build_plan_at_index(self, i):
        if i in self.refuse:
            raise RuntimeError("engine declines")

    def get_workspace_size_plan_at_index(self, i):
        return 64 * i

    def execute_plan_at_index(self, pack, ws, index, handle):
        self.ran.append((index, ws, sorted(pack.values())))


def _conv_with(plan, graph, engines):
    conv = cudnn_conv.CudnnConv.__new__(cudnn_conv.CudnnConv)
    conv.graphs, conv.handle, conv.workspace = {}, None, (1 << 40, 1 << 30)
    cg = cudnn_conv.ConvGraph(graph, {"x": "X", "w": "W", "out": "Y"}, -1, dict(engines))
    conv.graphs[conv._key(plan)] = cg
    for i in cg.engines:
        if conv._build_index(cg, i):
            cg.default = i
            break
    return conv


def test_engine_selection_and_gone_engine():
    import dataclasses
    plan = next(p for n, p in _plans() if n == "cudnn_forward")
    g = _Graph(refuse={0})
    conv = _conv_with(plan, g, {0: (7, ()), 1: (28, ((2, 1),)), 2: (3, ())})
    assert conv.index_of(plan) == 1                         # 0 does not build
    assert [e[:3] for e in conv.engines(plan)] == [(1, 28, ((2, 1),)), (2, 3, ())]
    assert conv.index_of(dataclasses.replace(plan, engine=(3, ()))) == 2
    with pytest.raises(cudnn_conv.EngineGone):
        conv.index_of(dataclasses.replace(plan, engine=(7, ())))   # refused here
    with pytest.raises(cudnn_conv.EngineGone):
        conv.index_of(dataclasses.replace(plan, engine=(99, ())))
    conv.run(plan, [100, 200], 300)
    assert g.ran == [(1, 1 << 40, [100, 200, 300])]


def test_a_refused_graph_is_remembered():
    plan = _plans()[0][1]
    conv = cudnn_conv.CudnnConv.__new__(cudnn_conv.CudnnConv)
    conv.graphs = {}
    calls = []

    def refuse(p):
        calls.append(p)
        raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")
    conv._build = refuse
    for _ in range(2):
        with pytest.raises(RuntimeError, match="NOT_SUPPORTED"):
            conv.graph(plan)
    assert len(calls) == 1


# ---- the runtime: cuDNN where it runs, the kernel where it does not ----------------------
class HostCudnn:
    """cuDNN's stand-in on cuda-sim's host memory: the numpy model on the pointers."""

    def __init__(self, fail=None):
        self.fail = fail
        self.runs = 0

    def run(self, plan, operands, result, index=None, workspace=None):
        if self.fail:
            raise self.fail
        flat = {}
        for desc in (plan.x, plan.w, plan.y, plan.bias, plan.side):
            if desc is not None and desc.operand is not None:
                n = 1 + sum((d - 1) * s for d, s in zip(desc.dims, desc.strides))
                dt = numpy_dtype(desc.dtype)
                raw = ctypes.string_at(operands[desc.operand], n * dt.itemsize)
                flat[desc.operand] = np.frombuffer(raw, dt).astype(np.float64)
        out = cudnn_model(plan, flat).astype(numpy_dtype(plan.result.dtype))
        ctypes.memmove(result, out.tobytes(), out.nbytes)
        self.runs += 1


def _device(exe, conv):
    from hlo_opt.backends.cuda import CudaDeviceAdapter
    sim = exe.device

    class Adapter(type(sim)):
        cudnn_conv = CudaDeviceAdapter.cudnn_conv
        cudnn = CudaDeviceAdapter.cudnn
        _load = CudaDeviceAdapter._load

        def launch(self, k, addrs):
            self.launched.append(k.kind)
            super().launch(k, addrs)

        def memset(self, addr, n):
            ctypes.memset(addr, 0, n)
    dev = Adapter.__new__(Adapter)
    dev.__dict__.update(sim.__dict__)
    dev.launched, dev.d, dev._kernel_only = [], dev, set()
    dev._libs, dev.library_errors = {"cudnn": conv}, {} if conv is not None else {
        "cudnn": "no libcudnn"}
    return dev


def _run(name, conv, runs=2, profile=False):
    from dataclasses import replace
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.interpreter.literals import random_arguments
    require_gxx()
    exe = ck._sim()[name]
    prog = replace(exe.program, library_fallbacks=[])
    dev = _device(exe, conv)
    runner = Runner(prog, dev, profile=profile)
    raw = ck._raw()[name]
    args = random_arguments(raw, 5)
    want = compile_module(raw, "interpreter").run(args)
    for _ in range(runs):
        got = runner.run(args)
        for g, w in zip(got, want):
            g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
            if w.size == 0:
                continue
            tol = 2e-2 if "f16" in name or "bf16" in name else 1e-4
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * max(1, np.abs(w).max()))
    dev.runner = runner
    return dev, prog


@pytest.mark.parametrize("name", ["call_leaky_relu", "cudnn_backward_input",
                                  "cudnn_backward_filter", "cudnn_bias_relu_f16",
                                  "conv_block", "mobilenet_cluster"])
def test_cudnn_runs_the_convolutions(name):
    conv = HostCudnn()
    dev, prog = _run(name, conv)
    assert conv.runs and not [k for k in dev.launched if k.startswith("conv_")], dev.launched
    assert not prog.library_fallbacks


def test_profile_names_cudnn_convolutions_library():
    dev, _ = _run("conv_block", HostCudnn(), profile=True)
    kinds = {r["name"]: r["kind"] for r in dev.runner.profile_rows()}
    assert kinds["cudnn-conv-bias-activation"] == "library", kinds
    assert "kernel" in kinds.values()


def test_layouts_cudnn_does_not_compute_in_stay_with_the_kernel():
    """A side input in another layout than NHWC / NCHW: no plan, the kernel, no note."""
    conv = HostCudnn()
    dev, prog = _run("call_side_input_elu", conv)
    assert not conv.runs and [k for k in dev.launched if k.startswith("conv_")]
    assert not prog.library_fallbacks


def test_without_cudnn_the_kernel_runs_and_says_so_once():
    dev, prog = _run("call_leaky_relu", None, runs=3)
    assert [k for k in dev.launched if k.startswith("conv_")]
    assert len(prog.library_fallbacks) == 1 and "conv kernel" in prog.library_fallbacks[0][1]


def test_a_refused_graph_falls_back_to_the_kernel():
    conv = HostCudnn(fail=RuntimeError("CUDNN_STATUS_NOT_SUPPORTED"))
    dev, prog = _run("cudnn_backward_filter", conv, runs=3)
    assert [k for k in dev.launched if k.startswith("conv_")]
    assert len(prog.library_fallbacks) == 1 and "NOT_SUPPORTED" in prog.library_fallbacks[0][1]


def test_plain_convolutions_and_kernel_choices():
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.conv import with_algorithm
    from hlo_opt.backends.cuda.program import build_program
    krsc = ck.PLAIN["conv2d_nhwc"].replace("w = f32[3,3,4,6]", "w = f32[3,3,4,6]{2,1,0,3}")
    prog = build_program(parse_hlo(krsc), H100)
    (t,) = [t for t in prog.entry.thunks if t.kind == "launch"]
    assert t.spec is not None and t.spec.kind == "fprop"
    assert t.spec.summary().startswith("conv_fprop x f32[2, 4, 9, 9]")
    m = parse_hlo(ck.CALLS["call_relu6"])
    with_algorithm(m.entry.root, 2)          # the autotuner chose the kernel's algorithm 2
    prog = build_program(m, H100)
    assert all(t.spec is None for t in prog.entry.thunks)


# ---- autotuning: cuDNN engines as candidates ---------------------------------------------
def test_engine_candidates_and_the_config_they_write():
    from hlo_opt.autotune.results import AutotuneResult
    from hlo_opt.autotune.serialize import result_from_msg, result_to_msg
    from hlo_opt.backends.cuda.autotune import CudnnConvCandidate
    from passes.gpu.algorithm_pickers import GpuConvAlgorithmPicker
    plan = next(p for n, p in _plans() if n == "call_relu6")
    g = _Graph()
    conv = _conv_with(plan, g, {0: (7, ()), 1: (28, ((2, 1), (3, 0)))})
    cands = [CudnnConvCandidate(conv, plan, *e) for e in conv.engines(plan)]
    assert [c.name for c in cands] == ["cudnn-engine-7", "cudnn-engine-28,2=1,3=0"]
    assert len({c.key for c in cands}) == 2 and cands[1].scratch_bytes == 64

    class Buf:
        def __init__(self, a):
            self.address = a
    cands[1].run([Buf(1), Buf(2), Buf(3), Buf(4)], [Buf(5)], Buf(6))
    assert g.ran[-1] == (1, 6, [1, 2, 5])
    # the cache's round trip keeps the key; the picker writes XLA's frontend algorithm
    r = AutotuneResult(key=cands[1].key, run_time_s=1e-5, scratch_bytes=0)
    assert result_from_msg(result_to_msg(r)).key == cands[1].key
    m = parse_hlo(ck.CALLS["call_relu6"])
    GpuConvAlgorithmPicker().apply(m.entry.root, r)
    algo = json.loads(m.entry.root.attrs["backend_config"])[
        "cudnn_conv_backend_config"]["algorithm"]
    assert algo["is_cudnn_frontend"] is True and algo["algo_id"] == "28"
    assert cp.conv_plan(m.entry.root).engine == (28, ((2, 1), (3, 0)))
    assert not cp.kernel_selected(m.entry.root)


# ---- the device script, its cases on a host stand-in -----------------------------------
def test_device_script_cases_on_a_host_stand_in():
    """scripts/device_libs_cudnn.py: every case planned and within its bounds through the
    stand-in (host memory, the numpy model as cuDNN, no kernel), and without a driver it
    says why and returns."""
    import importlib.util
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.cudnn_conv import ConvGraph
    from tests.conftest import ROOT
    spec = importlib.util.spec_from_file_location(
        "device_libs_cudnn", ROOT / "scripts" / "device_libs_cudnn.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    class HostDevice:
        def __init__(self):
            self.keep = []

        def alloc(self, n):
            b = np.zeros(n + 64, np.uint8)
            self.keep.append(b)
            return b.ctypes.data

        def upload(self, a, data):
            ctypes.memmove(a, bytes(data), len(data))

        def download(self, a, n):
            return ctypes.string_at(a, n)

        def sync(self):
            pass

        def event(self):
            return object()

        def record(self, ev):
            pass

        def elapsed_ms(self, a, b):
            return 1.0

    class Conv(HostCudnn):
        def graph(self, plan):
            return ConvGraph(None, {}, 0, {0: (7, ())})

    def no_kernel(*a):
        raise RuntimeError("no device for the kernel")
    script._kernel = no_kernel
    lines: list = []
    cases = script._cases()
    assert len(cases) >= 15
    for name, inst in cases:
        assert script._case(lines.append, HostDevice(), Conv(), name, inst, H100), lines
    assert sum(ln.lstrip().startswith("PASS") for ln in lines) == len(cases)
    out: list = []
    from hlo_opt.backends.cuda.driver import CudaDriverError, probe
    try:
        probe()
    except (CudaDriverError, MissingToolError):
        script.run(out.append)
        assert "skipped" in out[-1]


def test_provider_offers_kernel_algorithms_then_cudnn_engines():
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.autotune import MAX_CUDNN_ENGINES, CudaProvider

    class Engines:
        def engines(self, plan, limit=None):
            assert plan.engine is None and limit == MAX_CUDNN_ENGINES
            return [(0, 7, (), 0), (3, 28, ((2, 1),), 4096)]
    class Dev:
        def copy(self, dst, src, n):
            raise AssertionError("nothing runs here")
    p = CudaProvider.__new__(CudaProvider)
    p.dev, p.device_info, p._variants, p._keep, p._constants = Dev(), H100, {}, [], None
    p._lt, p._dnn = None, Engines()
    inst = parse_hlo(ck.CALLS["call_relu6"]).entry.root
    assert p.kind_of(inst) == "conv"
    cands = p.candidates(inst)
    names = [c.name for c in cands]
    assert names[0].startswith("conv:algo_id=0") and names[-2:] == [
        "cudnn-engine-7", "cudnn-engine-28,2=1"], names
    assert len({c.key for c in cands}) == len(cands)
    assert cands[-1].scratch_bytes == 4096 and cands[-1].key.get("is_cudnn_frontend")
    p._dnn = False                                   # no cuDNN: the kernel's algorithms
    assert all(n.startswith("conv:") for n in (c.name for c in p.candidates(inst)))


# ---- CUDA graph capture ----------------------------------------------------------------
def test_ready_needs_a_built_engine_and_workspace():
    import dataclasses
    plan = next(p for n, p in _plans() if n == "cudnn_forward")
    conv = _conv_with(plan, _Graph(refuse={0}), {0: (7, ()), 1: (28, ()), 2: (3, ())})
    assert conv.ready(plan)                                   # default: index 1, built
    assert not conv.ready(dataclasses.replace(plan, engine=(3, ())))   # not built yet
    assert not conv.ready(dataclasses.replace(plan, engine=(7, ())))   # refused
    conv.workspace = (1 << 40, 0)
    assert not conv.ready(plan)                               # 64 bytes would be allocated
    assert not conv.ready(next(p for n, p in _plans() if n == "conv_block"))


def _recording_cudnn(exe, ready):
    """cuda-sim's device recording captures (test_graph_capture) with the CUDA adapter's
    cuDNN path and a stand-in whose runs are recorded too; ``ready(conv, plan)``.
    (device, [(capturing, kernel kind)] of every launch)."""
    import types
    from hlo_opt.backends.cuda import CudaDeviceAdapter
    from tests.backends.cuda.test_graph_capture import _recording_device
    dev = _recording_device(exe.device)

    class Deferred(HostCudnn):
        def run(self, *a, **k):
            dev._defer(lambda: HostCudnn.run(self, *a, **k))

        def ready(self, plan):
            return ready(self, plan)
    launched = []
    launch = dev.launch

    def counting(k, addrs):
        launched.append((dev.recording is not None, k.kind))
        launch(k, addrs)
    dev.launch = counting
    dev.cudnn_conv = types.MethodType(CudaDeviceAdapter.cudnn_conv, dev)
    dev.cudnn = types.MethodType(CudaDeviceAdapter.cudnn, dev)
    dev._load = types.MethodType(CudaDeviceAdapter._load, dev)
    dev.memset = lambda addr, n: ctypes.memset(addr, 0, n)
    dev.d, dev._kernel_only = dev, set()
    dev._libs, dev.library_errors = {"cudnn": Deferred()}, {}
    return dev, launched


@pytest.mark.parametrize("ready", [True, False])
def test_captured_runs(ready):
    """conv_block on the recording device: a run captured into a graph records cuDNN once
    the convolution is ready (built on the first, plain run), else the conv kernel; every
    run and replay gives the interpreter's result."""
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.interpreter.literals import random_arguments
    require_gxx()
    exe = ck._sim()["conv_block"]
    dev, launched = _recording_cudnn(exe, lambda conv, plan: ready)
    runner = Runner(exe.program, dev, profile=False)
    raw = ck._raw()["conv_block"]
    args = random_arguments(raw, 2)
    want = compile_module(raw, "interpreter").run(args)
    for _ in range(4):                    # plain, captured, replayed twice
        for g, w in zip(runner.run(args), want):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=1e-4, atol=1e-4)
    assert dev.captures == 1 and dev.replays >= 2 and not runner._capture_failed
    conv_launches = [rec for rec, kind in launched if kind.startswith("conv_")]
    assert conv_launches == ([] if ready else [True])   # the kernel only in the capture
    assert dev._libs["cudnn"].runs == (4 if ready else 1)


LOOP = """HloModule conv_loop
%body (s: (s32[], f32[1,5,5,2], f32[3,3,2,2]{2,1,0,3})) -> (s32[], f32[1,5,5,2], f32[3,3,2,2]{2,1,0,3}) {
  %s = (s32[], f32[1,5,5,2], f32[3,3,2,2]{2,1,0,3}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %x = f32[1,5,5,2] get-tuple-element(%s), index=1
  %w = f32[3,3,2,2]{2,1,0,3} get-tuple-element(%s), index=2
  %c = f32[1,5,5,2] convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT %t = (s32[], f32[1,5,5,2], f32[3,3,2,2]{2,1,0,3}) tuple(%j, %c, %w)
}
%cond (s: (s32[], f32[1,5,5,2], f32[3,3,2,2]{2,1,0,3})) -> pred[] {
  %s = (s32[], f32[1,5,5,2], f32[3,3,2,2]{2,1,0,3}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %p = pred[] compare(%i, %n), direction=LT
}
ENTRY %e (x: f32[1,5,5,2], w: f32[3,3,2,2]{2,1,0,3}) -> f32[1,5,5,2] {
  %x = f32[1,5,5,2] parameter(0)
  %w = f32[3,3,2,2]{2,1,0,3} parameter(1)
  %zero = s32[] constant(0)
  %t = (s32[], f32[1,5,5,2], f32[3,3,2,2]{2,1,0,3}) tuple(%zero, %x, %w)
  %l = (s32[], f32[1,5,5,2], f32[3,3,2,2]{2,1,0,3}) while(%t), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"3"}}
  ROOT %r = f32[1,5,5,2] get-tuple-element(%l), index=1
}
"""


def test_a_loop_body_with_a_convolution_is_captured_after_a_plain_run(monkeypatch):
    """A while body graph (a loop too long for its caller's graph) is captured on the
    loop's second run when its convolution goes through cuDNN: the first, plain run
    builds the cuDNN graph; the capture then records cuDNN, not the kernel."""
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda import runtime
    from hlo_opt.backends.cuda_sim import SimExecutable
    require_gxx()
    monkeypatch.setattr(runtime, "MAX_GRAPH_THUNKS", 4)
    m = parse_hlo(LOOP)
    exe = SimExecutable(m)
    assert [t for cp in exe.program.computations.values() for t in cp.thunks
            if t.spec is not None]                  # the body's convolution has a plan
    dev, launched = _recording_cudnn(exe, lambda c, plan: c.runs > 0)
    r = runtime.Runner(exe.program, dev, profile=False)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((1, 5, 5, 2)).astype(np.float32),
            (rng.standard_normal((3, 3, 2, 2)) * 0.3).astype(np.float32)]
    want = compile_module(m, "interpreter").run(args)
    for n in range(3):
        np.testing.assert_allclose(r.run(args)[0], want[0], rtol=1e-4, atol=1e-5)
        assert dev.captures == (0 if n == 0 else 1)
    assert not [k for _, k in launched if k.startswith("conv_")]
    assert dev._libs["cudnn"].runs == 9 and dev.replays == 6


def test_an_outgrown_workspace_stays_allocated():
    """A bigger workspace does not free the smaller one: a call still queued on the stream
    or a CUDA graph captured before may use it."""
    from hlo_opt.backends.cuda.cudnn_conv import CudnnConv

    class Dev:
        def __init__(self):
            self.next = 0x1000

        def alloc(self, n):
            self.next += n
            return self.next

        def free(self, addr):
            raise AssertionError(f"freed {addr:#x}")

    conv = CudnnConv.__new__(CudnnConv)
    conv.dev, conv.workspace, conv._outgrown = Dev(), (0, 0), []
    small = conv._workspace(100)
    assert conv._workspace(50) == small
    big = conv._workspace(10 << 20)
    assert big != small and conv._outgrown == [small] and conv.workspace[1] >= 10 << 20
