"""cuBLASLt through nvmath-python's bindings (``nvmath.bindings.cublasLt``): the gemm
thunks' :class:`~.gemm_plan.GemmPlan` calls on device pointers (:meth:`CublasLt.run`),
and the row-major ``C[M, N] = A[M, K] . B[N, K]^T`` the NVRTC gemm benchmark compares
with (:meth:`CublasLt.gemm_tn`).  Descriptors and the chosen algorithm are cached.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ...ir.types import numpy_dtype
from .toolchain import nvmath_bindings

CUDA_R = {"f32": 0, "f64": 1, "f16": 2, "bf16": 14}
COMPUTE_32F = 68
COMPUTE_64F = 70
OP_N, OP_T = 0, 1
WORKSPACE = 32 << 20
MAX_ALGORITHMS = 8


@functools.cache
def _lt():
    return nvmath_bindings("cublasLt")[0]


class CublasLt:
    def __init__(self, device):
        lt = _lt()
        self.lt = lt
        self.dev = device
        self.handle = lt.create()
        self.workspace = device.alloc(WORKSPACE)
        self.plans: dict = {}

    def _layout(self, dtype: str, mat, batch: int):
        lt = self.lt
        layout = lt.matrix_layout_create(CUDA_R[dtype], mat.rows, mat.cols, mat.ld)
        if batch > 1:
            A = lt.MatrixLayoutAttribute
            count = np.array([batch], dtype=np.int32)
            stride = np.array([mat.batch_stride], dtype=np.int64)
            lt.matrix_layout_set_attribute(layout, A.BATCH_COUNT, count.ctypes.data, 4)
            lt.matrix_layout_set_attribute(layout, A.STRIDED_BATCH_OFFSET, stride.ctypes.data, 8)
        return layout

    def _plan_of(self, plan):
        """Descriptors and the heuristic's algorithms (up to ``MAX_ALGORITHMS``, best
        first) for a :class:`GemmPlan`, whatever its selected algorithm (cached)."""
        plan = dataclasses.replace(plan, algorithm=-1)
        hit = self.plans.get(plan)
        if hit is not None:
            return hit
        lt = self.lt
        wide = plan.dtype == "f64"
        desc = lt.matmul_desc_create(COMPUTE_64F if wide else COMPUTE_32F,
                                     CUDA_R["f64" if wide else "f32"])
        A = lt.MatmulDescAttribute
        for attr, value in ((A.TRANSA, plan.trans_a), (A.TRANSB, plan.trans_b)):
            v = np.array([OP_T if value else OP_N], dtype=np.int32)
            lt.matmul_desc_set_attribute(desc, attr, v.ctypes.data, 4)
        if plan.epilogue != "DEFAULT":
            from .gemm_plan import CUBLASLT_EPILOGUE
            ep = np.array([CUBLASLT_EPILOGUE[plan.epilogue]], dtype=np.int32)
            lt.matmul_desc_set_attribute(desc, A.EPILOGUE, ep.ctypes.data, 4)
        if plan.aux:  # the pre-activation in D's layout (its pointer is set per call)
            self._set(desc, A.EPILOGUE_AUX_LD, plan.d.ld, np.int64)
            if plan.batch > 1:
                self._set(desc, A.EPILOGUE_AUX_BATCH_STRIDE, plan.d.batch_stride, np.int64)
        la = self._layout(plan.dtype, plan.a, plan.batch)
        lb = self._layout(plan.dtype, plan.b, plan.batch)
        ld = self._layout(plan.out_dtype, plan.d, plan.batch)
        pref = lt.matmul_preference_create()
        ws = np.array([WORKSPACE], dtype=np.uint64)
        lt.matmul_preference_set_attribute(pref, lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                                           ws.ctypes.data, 8)
        res = lt.MatmulHeuristicResult(MAX_ALGORITHMS)
        count = np.zeros(1, dtype=np.int32)
        lt.matmul_algo_get_heuristic(self.handle, desc, la, lb, ld, ld, pref, MAX_ALGORITHMS,
                                     res.ptr, count.ctypes.data)
        if int(count[0]) < 1:
            raise RuntimeError(f"cuBLASLt has no algorithm for {plan}")
        st = np.float64 if wide else np.float32
        algos = [res[i].ptr for i in range(int(count[0]))]
        hit = (desc, la, lb, ld, (res, algos), np.array([plan.alpha], dtype=st),
               np.array([plan.beta], dtype=st))
        self.plans[plan] = hit
        return hit

    def _set(self, desc, attr, value, dtype) -> None:
        v = np.array([value], dtype=dtype)
        self.lt.matmul_desc_set_attribute(desc, attr, v.ctypes.data, v.itemsize)

    def algorithm_count(self, plan) -> int:
        """How many algorithms cuBLASLt's heuristic offers for ``plan`` (the autotuner's
        gemm candidates, index 0 its own choice)."""
        return len(self._plan_of(plan)[4][1])

    def run(self, plan, a: int, b: int, c: int, d: int, bias: int | None = None,
            aux: int | None = None) -> None:
        """Every call of ``plan`` on device pointers (``c`` is read when beta != 0;
        ``aux`` receives the pre-activation of an ``*_AUX`` epilogue, in D's layout)."""
        desc, la, lb, ld, (_, algos), al, be = self._plan_of(plan)
        algo = algos[plan.algorithm] if 0 <= plan.algorithm < len(algos) else algos[0]
        A = self.lt.MatmulDescAttribute
        if bias is not None:
            self._set(desc, A.BIAS_POINTER, bias, np.uint64)
        isz = numpy_dtype(plan.dtype).itemsize
        osz = numpy_dtype(plan.out_dtype).itemsize
        for oa, ob, od in plan.outer or ((0, 0, 0),):
            if aux is not None:
                self._set(desc, A.EPILOGUE_AUX_POINTER, aux + od * osz, np.uint64)
            self.lt.matmul(self.handle, desc, al.ctypes.data, a + oa * isz, la, b + ob * isz,
                           lb, be.ctypes.data, c + od * osz, ld, d + od * osz, ld, algo,
                           self.workspace, WORKSPACE, int(self.dev.stream))

    def gemm_tn(self, a, b, c, m, n, k, dtype="bf16", out_dtype="f32", alpha=1.0,
                beta=0.0) -> None:
        """Row-major ``C[M, N] = alpha * A[M, K] . B[N, K]^T + beta * C``."""
        from .gemm_plan import GemmPlan, Matrix
        plan = GemmPlan(m, n, k, dtype, out_dtype, alpha, beta, "DEFAULT", True, False,
                        Matrix(k, n, k), Matrix(k, m, k), Matrix(n, m, n), True, 1, (), None,
                        None)
        self.run(plan, b, a, c, c)
