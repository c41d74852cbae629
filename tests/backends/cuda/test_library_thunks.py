"""The CUDA runtime's library thunks for fft, cholesky and triangular-solve, without a GPU:
cuda-sim's host memory stands in for the device and numpy models of cuFFT / cuSOLVER /
cuBLAS (the plan tests' models) for the libraries, so the program's wiring (which steps
become library thunks, the addresses, batch offsets, potrf's info output, zeroed
workspaces, graph capturability) and the host fallback when a library is missing or
refuses a plan are checked against the interpreter.  The real bindings are checked as far
as a machine without a driver allows (they load or fail with a clear error)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends.cuda.fft_plan import FftPlan
from hlo_opt.backends.cuda.libraries import capturable, run_library_call
from hlo_opt.backends.cuda.solver_plan import CholeskyPlan, TrsmPlan
from hlo_opt.ir.types import numpy_dtype
from tests.backends.cuda.support import require_gxx
from tests.backends.cuda.test_fft_plan import cufft_model
from tests.backends.cuda.test_solver_plan import potrf_model, trsm_model

MODULE = """HloModule libs
ENTRY e {
  a = f32[3,6,6]{2,1,0} parameter(0)
  b = f32[3,6,2]{2,1,0} parameter(1)
  x = c64[2,8,8]{2,1,0} parameter(2)
  r = f64[4,16]{1,0} parameter(3)
  c = f32[3,6,6]{2,1,0} cholesky(a), lower=true
  t = f32[3,6,2]{2,1,0} triangular-solve(c, b), left_side=true, lower=true, transpose_a=TRANSPOSE
  u = f32[3,2,6]{2,1,0} transpose(b), dimensions={0,2,1}
  v = f32[3,2,6]{2,1,0} triangular-solve(c, u), left_side=false, lower=true, transpose_a=NO_TRANSPOSE
  f = c64[2,8,8]{2,1,0} fft(x), fft_type=IFFT, fft_length={8,8}
  g = c128[4,9]{1,0} fft(r), fft_type=RFFT, fft_length={16}
  h = f64[4,16]{1,0} fft(g), fft_type=IRFFT, fft_length={16}
  ROOT o = (f32[3,6,2], f32[3,2,6], c64[2,8,8], f64[4,16], f32[3,6,6]) tuple(t, v, f, h, c)
}"""


def _array(addr: int, count: int, dtype) -> np.ndarray:
    dt = np.dtype(dtype)
    buf = (ctypes.c_char * (count * dt.itemsize)).from_address(addr)
    return np.frombuffer(buf, dtype=dt, count=count)


def _store(addr: int, values: np.ndarray) -> None:
    data = np.ascontiguousarray(values).tobytes()
    ctypes.memmove(addr, data, len(data))


class HostCufft:
    """cuFFT's interface (``Cufft``) over host memory, by the plan test's model."""

    def __init__(self, refuse=False, fail_exec=False):
        self.failed: dict = {}
        self.calls = 0
        self.refuse = refuse
        self.fail_exec = fail_exec

    def prepare(self, plan):
        if self.refuse:
            raise RuntimeError("CUFFT_INVALID_SIZE")

    def run(self, plan, x, out):
        if self.fail_exec:
            raise RuntimeError("CUFFT_EXEC_FAILED")
        self.calls += 1
        flat = _array(x, plan.batch * plan.idist, numpy_dtype(plan.in_dtype))
        y = cufft_model(plan, flat.astype(np.complex128 if plan.in_dtype[0] == "c"
                                          else np.float64), plan.batch * plan.odist)
        _store(out, y.astype(numpy_dtype(plan.out_dtype)))


class HostSolvers:
    """cuSOLVER + cuBLAS's interface (``Solvers``) over host memory."""

    def __init__(self):
        self.failed: dict = {}
        self.calls = 0

    def prepare(self, plan):
        pass

    def cholesky(self, plan, a, out, info_out):
        self.calls += 1
        dt = numpy_dtype(plan.dtype)
        size = max(max(o) for o in plan.offsets) + plan.n * plan.n
        wide = np.complex128 if plan.dtype[0] == "c" else np.float64
        got, infos = potrf_model(plan, _array(a, size, dt).astype(wide), size)
        _store(out, got.astype(dt))
        if info_out is not None:
            for k, info in zip(plan.info_offsets, infos):
                _store(info_out + 4 * k, np.array([info], np.int32))

    def trsm(self, plan, a, b, x, nbytes):
        self.calls += 1
        dt = numpy_dtype(plan.dtype)
        ctypes.memmove(x, b, nbytes)
        asize = max(o[0] for o in plan.offsets) + plan.lda * plan.lda
        wide = np.complex128 if plan.dtype[0] == "c" else np.float64
        got = trsm_model(plan, _array(a, asize, dt).astype(wide),
                         _array(x, nbytes // dt.itemsize, dt).astype(wide))
        _store(x, got.astype(dt))


def _library_device(sim, fft=None, solvers=None):
    """cuda-sim's device running library thunks as the CUDA adapter does."""
    class LibraryDevice(type(sim)):
        stream = 0

        @property
        def d(self):
            return self

        def memset(self, addr, n):
            ctypes.memset(addr, 0, n)

        def library_call(self, runner, thunk, frame):
            run_library_call(self, runner, thunk, frame)

        def cublaslt(self):
            return None

        def cufft(self):
            return fft

        def solvers(self):
            return solvers

    dev = LibraryDevice.__new__(LibraryDevice)
    dev.__dict__.update(sim.__dict__)
    return dev


def _run(module, fft, solvers):
    require_gxx()
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.cuda_sim import SimExecutable
    from hlo_opt.backends.interpreter.literals import random_arguments
    exe = SimExecutable(module)
    dev = _library_device(exe.device, fft, solvers)
    runner = Runner(exe.program, dev, profile=False)
    args = random_arguments(module, 3)
    n = args[0].shape[-1]
    args[0] = (args[0] @ np.swapaxes(args[0], -1, -2) + n * np.eye(n)).astype(np.float32)
    want = compile_module(module, "interpreter").run(args)
    got = runner.run(args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=2e-4)
    return exe.program, runner


def _gpu_module():
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    return passes_api.optimize(parse_hlo(MODULE), DebugOptions.from_sources([]),
                               pipeline="gpu")


@pytest.mark.parametrize("pipeline", [None, "gpu"])
def test_library_thunks_give_the_interpreters_results(pipeline):
    m = parse_hlo(MODULE) if pipeline is None else _gpu_module()
    fft, solvers = HostCufft(), HostSolvers()
    prog, runner = _run(m, fft, solvers)
    specs = [type(t.spec) for t in prog.entry.thunks if t.kind == "library"]
    assert specs.count(FftPlan) == 3 and specs.count(CholeskyPlan) == 1 \
        and specs.count(TrsmPlan) == 2, [(t.kind, t.name) for t in prog.entry.thunks]
    assert fft.calls == 3 and solvers.calls == 3 and not prog.host_fallbacks
    cap = {type(t.spec): capturable(runner.dev, t) for t in prog.entry.thunks
           if t.kind == "library"}
    assert cap == {FftPlan: True, TrsmPlan: True, CholeskyPlan: False}
    if pipeline == "gpu":   # the custom call: potrf writes info, the workspace is zeroed
        (chol,) = [t for t in prog.entry.thunks if isinstance(t.spec, CholeskyPlan)]
        assert not chol.spec.nan_fill and chol.step.output_slices[2] not in chol.args


def test_missing_or_refusing_libraries_run_on_the_host():
    m = parse_hlo(MODULE)
    prog, runner = _run(m, None, HostSolvers())
    notes = dict(prog.host_fallbacks)
    assert set(notes) == {"f", "g", "h"} and all("cufft unavailable" in v
                                                  for v in notes.values())
    assert not any(capturable(runner.dev, t) for t in prog.entry.thunks
                   if isinstance(t.spec, FftPlan))
    refusing = HostCufft(refuse=True)
    prog, runner = _run(m, refusing, HostSolvers())
    assert len(refusing.failed) == 3 and refusing.calls == 0
    assert all("CUFFT_INVALID_SIZE" in why for _, why in prog.host_fallbacks)
    failing = HostCufft(fail_exec=True)
    prog, runner = _run(m, failing, HostSolvers())
    assert len(failing.failed) == 3 and failing.calls == 0
    assert all("CUFFT_EXEC_FAILED" in why for _, why in prog.host_fallbacks)
    assert not any(capturable(runner.dev, t) for t in prog.entry.thunks
                   if isinstance(t.spec, FftPlan))


def test_not_positive_definite_plain_cholesky_is_nan_through_the_library():
    m = parse_hlo("""HloModule m
ENTRY e {
  a = f32[2,4,4]{2,1,0} parameter(0)
  ROOT c = f32[2,4,4]{2,1,0} cholesky(a), lower=false
}""")
    require_gxx()
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.cuda_sim import SimExecutable
    exe = SimExecutable(m)
    runner = Runner(exe.program, _library_device(exe.device, None, HostSolvers()))
    a = np.stack([np.eye(4) * 2, -np.eye(4)]).astype(np.float32)
    (got,) = runner.run([a])
    (want,) = compile_module(m, "interpreter").run([a])
    assert np.isnan(got[1]).all() and np.isnan(want[1]).all()
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


# ---- the real bindings, as far as no driver allows ---------------------------------------------
@pytest.mark.parametrize("name", ["cufft", "solvers"])
def test_bindings_load_or_say_why(name):
    from hlo_opt.backends.cuda import CudaDeviceAdapter

    class NoDriver:
        stream = 0
        name = "none"

        def alloc(self, n):
            raise AssertionError("nothing is allocated before the library loads")

    for m in ("upload", "download", "copy", "sync", "begin_capture", "end_capture",
              "launch_graph"):
        setattr(NoDriver, m, lambda self, *a: None)
    adapter = CudaDeviceAdapter(NoDriver(), None)
    try:
        import nvmath.bindings  # noqa: F401
    except ImportError:
        lib = getattr(adapter, name)()
        assert lib is None and "nvmath-python not found" in adapter.library_errors[name]
        print("nvmath-python is not installed: checked the missing-package error only")
        return
    lib = getattr(adapter, name)()
    if lib is None:   # no driver: the library refuses at once, with a reason
        print(f"{name}: {adapter.library_errors[name]}")
        assert adapter.library_errors[name]
    else:
        pytest.skip(f"{name} loaded: a machine with a driver (scripts/device_libs_libs.py "
                    "checks the libraries there)")


def test_the_nan_word_is_a_nan_in_every_float_type():
    from hlo_opt.backends.cuda.cusolver import NAN_WORD
    words = np.full(8, NAN_WORD, dtype=np.uint16).tobytes()
    for dt in (np.float32, np.float64, np.complex64, np.complex128):
        v = np.frombuffer(words, dtype=dt)
        assert np.isnan(v.view(np.float32 if dt in (np.float32, np.complex64)
                               else np.float64)).all()


def test_empty_batches_have_no_fft_plan():
    from hlo_opt.backends.cuda.fft_plan import fft_plan
    m = parse_hlo("""HloModule m
ENTRY e {
  x = c64[0,8]{1,0} parameter(0)
  ROOT f = c64[0,8]{1,0} fft(x), fft_type=FFT, fft_length={8}
}""")
    assert fft_plan(m.entry.root) is None
