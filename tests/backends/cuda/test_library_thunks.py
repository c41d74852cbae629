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
        assert not chol.spec.nan_fill and chol.step.output_slices[2] not in chol.workspaces


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

    for m in ("upload", "download", "copy", "memset", "sync", "begin_capture", "end_capture",
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


# ---- the binding calls as the library classes make them ----------------------------------------
class _Recorder:
    """A binding module that records each call (and answers what the code needs)."""

    ANSWERS = {"create": 7, "make_plan_many64": 4096, "get_version": 12000}

    def __init__(self, module, calls):
        self.module, self.calls = module, calls

    def __getattr__(self, name):
        real = getattr(self.module, name)
        if not callable(real) or isinstance(real, type):
            return real

        def call(*args):
            self.calls.append((real, args))
            if name.endswith("buffer_size"):
                return 16
            return self.ANSWERS.get(name)
        return call


class _FakeDevice:
    stream = 0

    def __init__(self):
        self.next = 1 << 20

    def alloc(self, n):
        self.next += max(int(n), 1) + 256
        return self.next

    def copy(self, *a):
        pass

    def memset(self, *a):
        pass

    def memset16(self, *a):
        pass

    def download(self, addr, n):
        return bytes(n)


def test_binding_calls_match_nvmath_signatures(monkeypatch):
    """Every cuFFT / cuBLAS / cuSOLVER call the classes make, replayed against
    nvmath-python's bindings: without a driver each must fail on the missing driver, not
    on its arguments (arity, types)."""
    try:
        from nvmath.bindings import cublas, cufft, cusolverDn
    except ImportError:
        pytest.skip("nvmath-python is not installed: its signatures cannot be checked")
    from hlo_opt.backends.cuda import cufft as cufft_mod
    from hlo_opt.backends.cuda import cusolver as cusolver_mod
    from hlo_opt.backends.cuda.fft_plan import fft_plan
    from hlo_opt.backends.cuda.solver_plan import cholesky_plan, trsm_plan
    calls: list = []
    monkeypatch.setattr(cufft_mod, "_libs", lambda: (_Recorder(cufft, calls),
                                                      _Recorder(cublas, calls)))
    monkeypatch.setattr(cusolver_mod, "_libs", lambda: (_Recorder(cusolverDn, calls),
                                                         _Recorder(cublas, calls)))
    dev = _FakeDevice()
    ffts = cufft_mod.Cufft(dev)
    for t, r, lengths, fft_type in (("c64", "c64", "8", "IFFT"), ("c128", "c128", "4,4", "IFFT"),
                                    ("f32", "c64", "16", "RFFT"), ("f64", "c128", "16", "RFFT"),
                                    ("c64", "f32", "16", "IRFFT"), ("c128", "f64", "16", "IRFFT")):
        n = [int(v) for v in lengths.split(",")]
        half = n[:-1] + [n[-1] // 2 + 1]
        ind = half if fft_type == "IRFFT" else n
        outd = half if fft_type == "RFFT" else n
        d = lambda xs: ",".join(map(str, [2] + xs))  # noqa: E731
        inst = parse_hlo(f"""HloModule m
ENTRY e {{
  x = {t}[{d(ind)}] parameter(0)
  ROOT f = {r}[{d(outd)}] fft(x), fft_type={fft_type}, fft_length={{{lengths}}}
}}""").entry.root
        ffts.run(fft_plan(inst), 1 << 30, 1 << 31)
    solvers = cusolver_mod.Solvers(dev)
    for dt in ("f32", "f64", "c64", "c128"):
        for custom, in_l in ((False, "{2,1,0}"), (True, "{1,2,0}"), (True, "{2,1,0}")):
            from tests.backends.cuda.test_solver_plan import cholesky_module, trsm_module
            plan = cholesky_plan(cholesky_module(dt, [2, 4, 4], True, in_l, "{1,2,0}",
                                                 custom).entry.root)
            solvers.cholesky(plan, 1 << 30, 1 << 31, (1 << 32) if custom else None)
        plan = trsm_plan(trsm_module(dt, [2, 4, 4], [2, 4, 3], "{2,1,0}", "{2,1,0}", True,
                                     False, True, "TRANSPOSE", False).entry.root)
        solvers.trsm(plan, 1 << 30, 1 << 31, 1 << 32, 96)
    names = {fn.__name__ for fn, _ in calls}
    assert {"make_plan_many64", "set_work_area", "exec_c2r", "exec_z2d", "csscal", "dscal",
            "spotrf", "zpotrf", "cgeam", "ztrttp", "dtpttr", "strsm", "ztrsm"} <= names
    seen = set()
    for fn, args in calls:
        key = (fn.__name__, tuple(type(a) for a in args))
        if key in seen:
            continue
        seen.add(key)
        try:
            fn(*args)
        except (TypeError, ValueError, OverflowError) as e:
            raise AssertionError(f"{fn.__name__}{args}: {e}") from None
        except Exception as e:  # noqa: BLE001 - the missing driver (or library): expected
            assert "driver" in str(e).lower() or "not found" in str(e).lower() \
                or "load" in str(e).lower(), f"{fn.__name__}: {type(e).__name__}: {e}"
        else:
            pytest.skip("a driver is present: the calls ran for real")
    print(f"{len(seen)} distinct binding calls checked: {sorted(names)}")
