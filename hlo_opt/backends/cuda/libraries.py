"""Library calls of the ``gpu`` pipeline on the CUDA device: gemms (``__cublas$gemm``,
``__cublas$lt$matmul``, plain ``dot``) through cuBLASLt (nvmath-python's bindings) as
their :class:`~.gemm_plan.GemmPlan` says; without cuBLASLt, and for every other library
call, the step runs on the host (``HostCall``)."""
from __future__ import annotations


def run_library_call(dev, runner, thunk, frame) -> None:
    """A library thunk on the CUDA device: a gemm through cuBLASLt when nvmath-python is
    installed, else on the host."""
    lt = dev.cublaslt()
    st = thunk.step
    if lt is None:
        runner._host_call(st, frame)
        return
    plan = thunk.spec
    ia, ib = plan.operands
    addr = lambda i: runner.addr(st.input_slices[i], frame)  # noqa: E731
    out = runner.addr(st.output_slices[0], frame)
    lt.run(plan, addr(ia), addr(ib), addr(plan.c_operand) if plan.c_operand is not None
           else out, out, addr(plan.bias_operand) if plan.bias_operand is not None else None,
           runner.addr(st.output_slices[1], frame) if plan.aux else None)
    for sl in thunk.args:  # workspaces something reads: zeros (as the interpreter's)
        dev.d.memset(runner.addr(sl, frame), sl.size)
