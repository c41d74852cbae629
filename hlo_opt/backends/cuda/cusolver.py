"""cuSOLVER (``nvmath.bindings.cusolverDn``) and cuBLAS (``nvmath.bindings.cublas``) for
the cholesky and triangular-solve thunks (:mod:`.solver_plan` says what each call does):
one cuSOLVER and one cuBLAS handle on the runner's stream; per plan (cached) potrf's
workspace, a packed-triangle scratch, a transpose scratch and, for the plain op, an
``info`` buffer, all from the device allocator.
"""
from __future__ import annotations

import functools

import numpy as np

from ...ir.types import numpy_dtype
from .solver_plan import DIAG, FILL, OP, SIDE
from .toolchain import nvmath_bindings

NAN_WORD = 0x7FF8  # cuMemsetD16's word: repeated, a NaN in f32 and f64 (and complex parts)


@functools.cache
def _libs():
    return nvmath_bindings("cusolverDn", "cublas")


def _scalar(dtype: str, value: float):
    return np.array([value], dtype=numpy_dtype(dtype))


class Solvers:
    def __init__(self, device):
        self.dn, self.blas = _libs()
        self.dev = device
        self.solver = self.dn.create()
        self.dn.set_stream(self.solver, int(device.stream))
        self.handle = self.blas.create()
        self.blas.set_stream(self.handle, int(device.stream))
        self.plans: dict = {}
        self.failed: dict = {}        # plan -> why a library refused it (it runs on the host)

    # ---- cholesky -------------------------------------------------------------------------
    def prepare(self, plan):
        hit = self.plans.get(plan)
        if hit is not None:
            return hit
        from .solver_plan import CholeskyPlan
        if not isinstance(plan, CholeskyPlan):
            hit = self.plans[plan] = (_scalar(plan.dtype, 1.0),)
            return hit
        n, isz = plan.n, numpy_dtype(plan.dtype).itemsize
        full = self.dev.alloc(n * n * isz)
        self.dev.memset(full, n * n * isz)   # geam's B (beta = 0): defined all the same
        packed = self.dev.alloc(max(n * (n + 1) // 2, 1) * isz)
        size = getattr(self.dn, f"{plan.letter}potrf_buffer_size")
        lwork = max(int(size(self.solver, FILL[plan.uplo], n, full, n)), 1)
        work = self.dev.alloc(lwork * isz)
        info = self.dev.alloc(4 * plan.batch) if plan.nan_fill else None
        hit = (full, packed, work, lwork, info, _scalar(plan.dtype, 1.0),
               _scalar(plan.dtype, 0.0))
        self.plans[plan] = hit
        return hit

    def cholesky(self, plan, a: int, out: int, info_out: int | None) -> None:
        """potrf per batch element into ``out`` (the zeroed other triangle kept), its info
        into ``info_out`` (s32 per element), or, for the plain op, NaN over the batch
        elements that fail (reads ``info`` back: not for a CUDA graph)."""
        n, x, b = plan.n, plan.letter, self.blas
        if n == 0:
            return
        full, packed, work, lwork, info, one, zero = self.prepare(plan)
        isz = numpy_dtype(plan.dtype).itemsize
        uplo = FILL[plan.uplo]
        potrf = getattr(self.dn, f"{x}potrf")
        for k, (ia, io) in enumerate(plan.offsets):
            src, dst = a + ia * isz, out + io * isz
            if plan.transpose_input:
                getattr(b, f"{x}geam")(self.handle, OP["T"], OP["N"], n, n, one.ctypes.data,
                                       src, n, zero.ctypes.data, full, n, full, n)
                src = full
            getattr(b, f"{x}trttp")(self.handle, uplo, n, src, n, packed)
            self.dev.memset(dst, n * n * isz)
            getattr(b, f"{x}tpttr")(self.handle, uplo, n, packed, dst, n)
            dev_info = info + 4 * k if info is not None else \
                info_out + 4 * plan.info_offsets[k]
            potrf(self.solver, uplo, n, dst, n, work, lwork, dev_info)
        if info is not None:
            codes = np.frombuffer(self.dev.download(info, 4 * plan.batch), dtype=np.int32)
            for (_, io), code in zip(plan.offsets, codes):
                if code != 0:
                    self.dev.memset16(out + io * isz, NAN_WORD, n * n * isz // 2)

    # ---- triangular solve -----------------------------------------------------------------
    def trsm(self, plan, a: int, b: int, x: int, nbytes: int) -> None:
        """x = b, then trsm in place on x per batch element."""
        (one,) = self.prepare(plan)
        if x != b and nbytes:
            self.dev.copy(x, b, nbytes)
        if plan.m == 0 or plan.n == 0:
            return
        isz = numpy_dtype(plan.dtype).itemsize
        fn = getattr(self.blas, f"{plan.letter}trsm")
        for ia, ib in plan.offsets:
            fn(self.handle, SIDE[plan.side], FILL[plan.uplo], OP[plan.trans],
               DIAG[plan.unit_diagonal], plan.m, plan.n, one.ctypes.data, a + ia * isz,
               plan.lda, x + ib * isz, plan.m)
