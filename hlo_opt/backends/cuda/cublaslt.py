"""cuBLASLt through nvmath-python's bindings (``nvmath.bindings.cublasLt``): a row-major
``C[M, N] = A[M, K] . B[N, K]^T`` on device pointers, the form our gemm thunks and the
NVRTC gemm share.  Handles, descriptors and the chosen algorithm are cached per shape.
"""
from __future__ import annotations

import functools

import numpy as np

from .toolchain import MissingToolError

CUDA_R = {"f32": 0, "f64": 1, "f16": 2, "bf16": 14}
COMPUTE_32F = 68
COMPUTE_64F = 70
OP_N, OP_T = 0, 1
WORKSPACE = 32 << 20


@functools.cache
def _lt():
    try:
        from nvmath.bindings import cublasLt
    except ImportError:
        raise MissingToolError("nvmath-python not found: install the 'nvmath-python' "
                               "package (or everything: pip install 'hlo-opt[cuda]')") from None
    return cublasLt


class CublasLt:
    def __init__(self, device):
        lt = _lt()
        self.lt = lt
        self.dev = device
        self.handle = lt.create()
        self.workspace = device.alloc(WORKSPACE)
        self.plans: dict = {}

    def _plan(self, m, n, k, dtype, out_dtype, lhs_k_minor=True, rhs_k_minor=True,
              epilogue="DEFAULT", bias=None):
        key = (m, n, k, dtype, out_dtype, lhs_k_minor, rhs_k_minor, epilogue, bias)
        hit = self.plans.get(key)
        if hit is not None:
            return hit
        lt = self.lt
        compute = COMPUTE_64F if dtype == "f64" else COMPUTE_32F
        scale = CUDA_R["f64" if dtype == "f64" else "f32"]
        desc = lt.matmul_desc_create(compute, scale)
        A = lt.MatmulDescAttribute
        # column-major view of the row-major product: D^T[N, M] = op(rhs) . op(lhs)
        ta = np.array([OP_T if rhs_k_minor else OP_N], dtype=np.int32)
        tb = np.array([OP_N if lhs_k_minor else OP_T], dtype=np.int32)
        lt.matmul_desc_set_attribute(desc, A.TRANSA, ta.ctypes.data, 4)
        lt.matmul_desc_set_attribute(desc, A.TRANSB, tb.ctypes.data, 4)
        if epilogue != "DEFAULT":
            from .libraries import CUBLASLT_EPILOGUE
            ep = np.array([CUBLASLT_EPILOGUE[epilogue]], dtype=np.int32)
            lt.matmul_desc_set_attribute(desc, A.EPILOGUE, ep.ctypes.data, 4)
        if bias is not None:
            bp = np.array([bias], dtype=np.uint64)
            lt.matmul_desc_set_attribute(desc, A.BIAS_POINTER, bp.ctypes.data, 8)
        la = lt.matrix_layout_create(CUDA_R[dtype], *((k, n, k) if rhs_k_minor else (n, k, n)))
        lb = lt.matrix_layout_create(CUDA_R[dtype], *((k, m, k) if lhs_k_minor else (m, k, m)))
        lc = lt.matrix_layout_create(CUDA_R[out_dtype], n, m, n)
        pref = lt.matmul_preference_create()
        ws = np.array([WORKSPACE], dtype=np.uint64)
        lt.matmul_preference_set_attribute(pref, lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                                           ws.ctypes.data, 8)
        res = lt.MatmulHeuristicResult(1)
        count = np.zeros(1, dtype=np.int32)
        lt.matmul_algo_get_heuristic(self.handle, desc, la, lb, lc, lc, pref, 1, res.ptr,
                                     count.ctypes.data)
        if int(count[0]) < 1:
            raise RuntimeError(f"cuBLASLt has no algorithm for {m}x{n}x{k} {dtype}")
        plan = (desc, la, lb, lc, res)
        self.plans[key] = plan
        return plan

    def gemm(self, a, b, c, m, n, k, dtype, out_dtype, lhs_k_minor, rhs_k_minor,
             alpha=1.0, epilogue="DEFAULT", bias=None) -> None:
        """Row-major C[M, N] = act(alpha * A . B + bias), A [M, K] (or [K, M] when not
        ``lhs_k_minor``), B [N, K] (or [K, N] when not ``rhs_k_minor``)."""
        desc, la, lb, lc, res = self._plan(m, n, k, dtype, out_dtype, lhs_k_minor,
                                           rhs_k_minor, epilogue, bias)
        st = np.float64 if dtype == "f64" else np.float32
        al = np.array([alpha], dtype=st)
        be = np.array([0.0], dtype=st)
        self.lt.matmul(self.handle, desc, al.ctypes.data, b, la, a, lb, be.ctypes.data,
                       c, lc, c, lc, res.ptr, self.workspace, WORKSPACE, int(self.dev.stream))

    def gemm_tn(self, a, b, c, m, n, k, dtype="bf16", out_dtype="f32", alpha=1.0,
                beta=0.0, stream=None) -> None:
        desc, la, lb, lc, res = self._plan(m, n, k, dtype, out_dtype)
        st = np.float64 if dtype == "f64" else np.float32
        al = np.array([alpha], dtype=st)
        be = np.array([beta], dtype=st)
        s = int(stream if stream is not None else self.dev.stream)
        self.lt.matmul(self.handle, desc, al.ctypes.data, b, la, a, lb, be.ctypes.data,
                       c, lc, c, lc, res.ptr, self.workspace, WORKSPACE, s)
