"""Library calls of the ``gpu`` pipeline on the CUDA device: gemms (``__cublas$gemm``,
``__cublas$lt$matmul``, plain ``dot``) through cuBLASLt (nvmath-python's bindings) as
their :class:`~.gemm_plan.GemmPlan` says, or as our own gemm kernel (``gemm_emitter.py``)
where cuBLASLt is missing or the autotuner chose one of the kernel's tile configurations;
a gemm neither can take, and every other library call, runs on the host (``HostCall``)."""
from __future__ import annotations

from .gemm_emitter import config_of


def run_library_call(dev, runner, thunk, frame) -> None:
    """A library thunk on the CUDA device (``dev``: the runtime's device adapter)."""
    lt = None
    if id(thunk) not in runner.lt_refused and (thunk.kernel is None
                                           or config_of(thunk.step.instruction) is None):
        lt = dev.cublaslt()
    st = thunk.step
    if lt is None and thunk.kernel is None:
        runner._host_call(st, frame)
        return
    if lt is not None:
        plan = thunk.spec
        ia, ib = plan.operands
        addr = lambda i: runner.addr(st.input_slices[i], frame)  # noqa: E731
        out = runner.addr(st.output_slices[0], frame)
        try:
            lt.run(plan, addr(ia), addr(ib), addr(plan.c_operand) if plan.c_operand
                   is not None else out, out, addr(plan.bias_operand)
                   if plan.bias_operand is not None else None)
        except Exception as e:  # noqa: BLE001 - cuBLASLt refused: the kernel or the host
            runner.lt_refused.add(id(thunk))
            runner.p.host_fallbacks.append((st.name, f"cuBLASLt: {type(e).__name__}: {e}"))
            lt = None
            if thunk.kernel is None:
                runner._host_call(st, frame)
                return
    if lt is None:
        dev.launch(thunk.kernel, [runner.addr(s, frame) for s in thunk.args])
    for sl in thunk.workspaces:  # workspaces something reads: zeros (as the interpreter's)
        dev.memset(runner.addr(sl, frame), sl.size)
