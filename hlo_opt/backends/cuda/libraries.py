"""Library calls of the ``gpu`` pipeline on the CUDA device, by the thunk's plan: gemms
(``__cublas$gemm``, ``__cublas$lt$matmul``, plain ``dot``) through cuBLASLt or our own
gemm kernel (``gemm_emitter.py``: where cuBLASLt is missing or refuses, or the autotuner
chose one of the kernel's tile configurations), ``fft``
through cuFFT, cholesky (``cholesky``, ``__cusolver$cholesky``) through cuSOLVER potrf and
triangular-solve (``triangular-solve``, ``__cublas$triangularSolve``) through cuBLAS trsm,
all by nvmath-python's bindings.  Where the library cannot load (no nvmath-python, no
libcufft ...) or refuses a plan, the step runs on the host (``HostCall``) as before, and
the program notes it once in ``Program.host_fallbacks``.
"""
from __future__ import annotations

from .fft_plan import FftPlan
from .gemm_plan import GemmPlan
from .solver_plan import CholeskyPlan, TrsmPlan

# plan type -> the device adapter's loader of the library that runs it
LOADERS = {GemmPlan: "cublaslt", FftPlan: "cufft", CholeskyPlan: "solvers",
           TrsmPlan: "solvers"}


def library_plan(inst):
    """The library plan of a library-call instruction, or None (it runs on the host)."""
    from .fft_plan import fft_plan
    from .gemm_plan import gemm_plan
    from .solver_plan import cholesky_plan, trsm_plan
    for make in (gemm_plan, fft_plan, cholesky_plan, trsm_plan):
        plan = make(inst)
        if plan is not None:
            return plan
    return None


def describe(plan) -> str:
    """One line on what a library thunk calls (``--stage=hlo-backend``)."""
    if isinstance(plan, GemmPlan):
        return f"cuBLASLt matmul {plan.m}x{plan.n}x{plan.k} {plan.dtype} batch {plan.batch}"
    if isinstance(plan, FftPlan):
        lengths = "x".join(map(str, plan.lengths))
        scale = f", scaled by 1/{round(1 / plan.scale)}" if plan.scale != 1.0 else ""
        return f"cuFFT {plan.transform} {lengths} batch {plan.batch}{scale}"
    if isinstance(plan, CholeskyPlan):
        extra = ", input transposed by geam" if plan.transpose_input else ""
        return (f"cuSOLVER {plan.letter}potrf n={plan.n} uplo={plan.uplo} batch "
                f"{plan.batch}{extra}" + (", NaN where info != 0" if plan.nan_fill else ""))
    return (f"cuBLAS {plan.letter}trsm side={plan.side} uplo={plan.uplo} op={plan.trans} "
            f"diag={'U' if plan.unit_diagonal else 'N'} {plan.m}x{plan.n} batch {plan.batch}")


def _library(dev, spec):
    get = getattr(dev, LOADERS[type(spec)], None)
    return get() if get is not None else None


def capturable(dev, thunk) -> bool:
    """Whether a library thunk only puts device work on the stream (a CUDA graph may hold
    it): not a cholesky (cuSOLVER's potrf is not known to be capturable, and the plain op
    reads ``info`` back), not one that runs on the host.  The runtime asks before any
    capture, so the plan's handles and workspaces are made here, outside it."""
    spec = thunk.spec
    if isinstance(spec, CholeskyPlan):
        return False
    lib = _library(dev, spec)
    if lib is None:
        return False
    if isinstance(spec, GemmPlan):
        return True
    return _prepare(lib, spec) is None


def _prepare(lib, plan) -> str | None:
    """None when ``lib`` has what ``plan`` needs, else why not (kept: it is not asked
    again; the step runs on the host)."""
    if plan in lib.failed:
        return lib.failed[plan]
    try:  # handles, plans and workspaces: a refusal here leaves every buffer as it was
        lib.prepare(plan)
    except Exception as e:  # noqa: BLE001 - e.g. a size cuFFT does not plan
        lib.failed[plan] = f"{type(e).__name__}: {str(e)[:160]}"
        return lib.failed[plan]
    return None


def _host(dev, runner, thunk, frame, why: str) -> None:
    notes = runner.p.host_fallbacks
    if not any(name == thunk.name for name, _ in notes):
        notes.append((thunk.name, why))
    runner._host_call(thunk.step, frame)


def run_library_call(dev, runner, thunk, frame) -> None:
    """A library thunk on the CUDA device: through its library when that loads and takes
    the plan, else on the host; a gemm also as our kernel (``thunk.kernel``) where the
    autotuner chose one of its tile configurations, or cuBLASLt is missing or refuses."""
    st, plan = thunk.step, thunk.spec
    lib = None if thunk.tuned_kernel or id(thunk) in runner.lt_refused else \
        _library(dev, plan)
    if lib is None and thunk.kernel is not None:   # a gemm: our kernel
        dev.launch(thunk.kernel, [runner.addr(s, frame) for s in thunk.args])
        _zero_workspaces(dev, runner, thunk, frame)
        return
    if lib is None:
        _host(dev, runner, thunk, frame, f"{LOADERS[type(plan)]} unavailable: "
              f"{getattr(dev, 'library_errors', {}).get(LOADERS[type(plan)], 'not loaded')}")
        return
    addr = lambda i: runner.addr(st.input_slices[i], frame)  # noqa: E731
    out = runner.addr(st.output_slices[0], frame)
    if isinstance(plan, GemmPlan):
        try:
            lib.run(plan, *plan.pointers(addr, out, runner.addr(st.output_slices[1], frame)
                                         if plan.aux else None))
        except Exception as e:  # noqa: BLE001 - cuBLASLt refused: the kernel or the host
            if getattr(runner, "_capturing", False):
                raise
            runner.lt_refused.add(id(thunk))
            runner.p.host_fallbacks.append((st.name, f"cuBLASLt: {type(e).__name__}: {e}"))
            if thunk.kernel is None:
                runner._host_call(st, frame)
                return
            dev.launch(thunk.kernel, [runner.addr(s, frame) for s in thunk.args])
    else:
        why = _prepare(lib, plan)
        if why is not None:
            _host(dev, runner, thunk, frame, why)
            return
        try:
            if isinstance(plan, FftPlan):
                lib.run(plan, addr(0), out)
            elif isinstance(plan, CholeskyPlan):
                info = runner.addr(st.output_slices[2], frame) if not plan.nan_fill else None
                lib.cholesky(plan, addr(0), out, info)
            else:
                lib.trsm(plan, addr(0), addr(1), out, st.output_slices[0].size)
        except Exception as e:  # noqa: BLE001 - the library refused the call itself
            # inside a stream capture the runtime falls back (no host work there); a
            # cholesky over its own input (in place) has nothing left to redo it from
            if getattr(runner, "_capturing", False) or addr(0) == out:
                raise
            lib.failed[plan] = f"{type(e).__name__}: {str(e)[:160]}"
            _host(dev, runner, thunk, frame, lib.failed[plan])
            return
    _zero_workspaces(dev, runner, thunk, frame)


def _zero_workspaces(dev, runner, thunk, frame) -> None:
    for sl in thunk.workspaces:  # workspaces something reads: zeros (as the interpreter's)
        dev.memset(runner.addr(sl, frame), sl.size)
