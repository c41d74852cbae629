"""Library calls of the ``gpu`` pipeline (``__cublas$gemm``, ``__cublas$lt$matmul``, plain
``dot``): recognised here as a canonical batched GEMM; run through cuBLASLt
(nvmath-python's bindings) where it is installed, else through hlo-opt's NVRTC gemm kernel
(``gemm_kernel.py``), else on the host.  Everything else the plan calls a library call runs
on the host (``HostCall``)."""
from __future__ import annotations

from dataclasses import dataclass

GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")


CUBLASLT_EPILOGUE = {"DEFAULT": 1, "RELU": 2, "BIAS": 4, "BIAS_RELU": 6, "GELU": 32,
                     "BIAS_GELU": 36}


@dataclass
class GemmSpec:
    """out[m, n] = act(alpha * sum_k lhs[m, k] * rhs[k, n] + bias[n]), row-major output;
    ``lhs_k_minor``/``rhs_k_minor``: the contracting dim is the operand's minor-most
    physical dim."""
    m: int
    n: int
    k: int
    dtype: str
    out_dtype: str
    alpha: float
    epilogue: str
    lhs_k_minor: bool
    rhs_k_minor: bool
    bias: bool


def gemm_spec(inst):
    """A GemmSpec for a cuBLAS custom call of the gpu pipeline this backend runs through
    cuBLASLt (2-D operands, beta 0, the epilogues cuBLASLt has), or None (the call then
    runs on the host)."""
    if inst.opcode == "dot":
        return _dot_spec(inst)
    if inst.opcode != "custom-call":
        return None
    if inst.attrs.get("custom_call_target", "").strip('"') not in GEMM_TARGETS:
        return None
    from ..interpreter.ops_custom_call import backend_config
    try:
        raw = backend_config(inst)
    except Exception:  # noqa: BLE001
        return None
    cfg = raw.get("gemm_backend_config", raw if "dot_dimension_numbers" in raw else None)
    if not cfg:
        return None
    epi = cfg.get("epilogue", "DEFAULT")
    d = cfg.get("dot_dimension_numbers", {})
    if epi not in CUBLASLT_EPILOGUE or float(cfg.get("beta", 0) or 0) != 0 \
            or float(cfg.get("alpha_imag", 0) or 0) != 0:
        return None
    if d.get("lhs_batch_dimensions") or d.get("rhs_batch_dimensions"):
        return None
    lc, rc = d.get("lhs_contracting_dimensions", []), d.get("rhs_contracting_dimensions", [])
    has_bias = epi.startswith("BIAS")
    ops = inst.operands
    if len(lc) != 1 or len(rc) != 1 or len(ops) != 2 + has_bias:
        return None
    lhs, rhs = ops[0].shape, ops[1].shape
    out = inst.shape.tuple_shapes[0] if inst.shape.is_tuple() else inst.shape
    if lhs.rank != 2 or rhs.rank != 2 or out.rank != 2:
        return None
    dt, odt = lhs.element_type, out.element_type
    if dt not in ("f32", "f16", "bf16", "f64") or rhs.element_type != dt \
            or odt not in (dt, "f32"):
        return None
    if tuple(out.effective_layout().minor_to_major) != (1, 0):
        return None
    lc, rc = int(lc[0]), int(rc[0])
    m, k = lhs.dims[1 - lc], lhs.dims[lc]
    n = rhs.dims[1 - rc]
    if (m, n) != tuple(out.dims) or rhs.dims[rc] != k:
        return None
    if has_bias:
        b = ops[2].shape
        if b.rank != 1 or b.dims[0] != n or b.element_type != odt:
            return None
    return GemmSpec(m, n, k, dt, odt, float(cfg.get("alpha_real", 1) or 1), epi,
                    lhs.effective_layout().minor_to_major[0] == lc,
                    rhs.effective_layout().minor_to_major[0] == rc, has_bias)


def _dot_spec(inst):
    """A plain (unfused, unrewritten) 2-D dot as a cuBLASLt gemm."""
    if inst.attr("lhs_batch_dims", ()) or inst.attr("rhs_batch_dims", ()):
        return None
    lc, rc = tuple(inst.attr("lhs_contracting_dims", ())), tuple(inst.attr("rhs_contracting_dims", ()))
    lhs, rhs, out = inst.operands[0].shape, inst.operands[1].shape, inst.shape
    if len(lc) != 1 or len(rc) != 1 or lhs.rank != 2 or rhs.rank != 2 or not out.is_array() \
            or out.rank != 2:
        return None
    dt, odt = lhs.element_type, out.element_type
    if dt not in ("f32", "f16", "bf16", "f64") or rhs.element_type != dt \
            or odt not in (dt, "f32") or tuple(out.effective_layout().minor_to_major) != (1, 0):
        return None
    lc, rc = lc[0], rc[0]
    m, k, n = lhs.dims[1 - lc], lhs.dims[lc], rhs.dims[1 - rc]
    if (m, n) != tuple(out.dims) or rhs.dims[rc] != k:
        return None
    return GemmSpec(m, n, k, dt, odt, 1.0, "DEFAULT",
                    lhs.effective_layout().minor_to_major[0] == lc,
                    rhs.effective_layout().minor_to_major[0] == rc, False)


def run_library_call(dev, runner, thunk, frame) -> None:
    """A library thunk on the CUDA device: a gemm through cuBLASLt when nvmath-python is
    installed, else on the host."""
    lt = dev.cublaslt()
    st = thunk.step
    if lt is None:
        runner._host_call(st, frame)
        return
    sp = thunk.spec
    a = runner.addr(st.input_slices[0], frame)
    b = runner.addr(st.input_slices[1], frame)
    bias = runner.addr(st.input_slices[2], frame) if sp.bias else None
    out = runner.addr(st.output_slices[0], frame)
    lt.gemm(a, b, out, sp.m, sp.n, sp.k, sp.dtype, sp.out_dtype, sp.lhs_k_minor,
            sp.rhs_k_minor, sp.alpha, sp.epilogue, bias)
    for v, sl in zip(st.outputs[1:], st.output_slices[1:]):  # workspaces: zeros
        if sl.size:
            dev.d.memset(runner.addr(sl, frame), sl.size)
