"""cuFFT through nvmath-python's bindings (``nvmath.bindings.cufft``): an ``fft`` thunk's
:class:`~.fft_plan.FftPlan` as one ``cufftMakePlanMany64`` plan per plan (cached, on the
runner's stream, its work area from the device allocator: no allocation at run time, so
the calls can sit in a CUDA graph), one ``cufftExec*`` per run, then XLA's 1/N scale of
an inverse transform by a cuBLAS ``scal`` over the output, as XLA's FftThunk does.
"""
from __future__ import annotations

import functools

import numpy as np

from ...ir.types import numpy_dtype
from .toolchain import nvmath_bindings

INT_MAX = 2 ** 31 - 1


@functools.cache
def _libs():
    return nvmath_bindings("cufft", "cublas")


class Cufft:
    def __init__(self, device):
        self.fft, self.blas = _libs()
        self.version = self.fft.get_version()   # loads libcufft: fails here, not mid-run
        self.dev = device
        self.plans: dict = {}
        self.failed: dict = {}        # plan -> why cuFFT refused it (it runs on the host)
        self._blas_handle = None

    def _handle(self):
        if self._blas_handle is None:
            self._blas_handle = self.blas.create()
            self.blas.set_stream(self._blas_handle, int(self.dev.stream))
        return self._blas_handle

    def prepare(self, plan):
        """The cuFFT handle, its work area and the C2R input copy of ``plan`` (cached)."""
        hit = self.plans.get(plan)
        if hit is not None:
            return hit
        f = self.fft
        handle = f.create()
        try:
            f.set_auto_allocation(handle, 0)
            n = list(plan.lengths)
            half = n[:-1] + [n[-1] // 2 + 1]
            inembed = half if plan.transform in ("C2R", "Z2D") else n
            onembed = half if plan.transform in ("R2C", "D2Z") else n
            size = f.make_plan_many64(handle, len(n), n, inembed, 1, plan.idist, onembed, 1,
                                      plan.odist, plan.cufft_type, plan.batch)
            work = self.dev.alloc(max(int(size), 1))
            f.set_work_area(handle, work)
            f.set_stream(handle, int(self.dev.stream))
            isz = numpy_dtype(plan.in_dtype).itemsize
            scratch = self.dev.alloc(plan.batch * plan.idist * isz) if plan.copies_input \
                else None
            if plan.scale != 1.0:
                self._handle()
        except Exception:
            f.destroy(handle)
            raise
        hit = (handle, work, scratch)
        self.plans[plan] = hit
        return hit

    def run(self, plan, x: int, out: int) -> None:
        handle, _, scratch = self.prepare(plan)
        f = self.fft
        if scratch is not None:   # C2R overwrites its input: transform a copy
            self.dev.copy(scratch, x, plan.batch * plan.idist
                          * numpy_dtype(plan.in_dtype).itemsize)
            x = scratch
        t = plan.transform
        if t == "C2C":
            f.exec_c2c(handle, x, out, plan.direction)
        elif t == "Z2Z":
            f.exec_z2z(handle, x, out, plan.direction)
        elif t == "R2C":
            f.exec_r2c(handle, x, out)
        elif t == "D2Z":
            f.exec_d2z(handle, x, out)
        elif t == "C2R":
            f.exec_c2r(handle, x, out)
        else:
            f.exec_z2d(handle, x, out)
        if plan.scale != 1.0:
            self._scale(plan, out)

    def _scale(self, plan, out: int) -> None:
        b = self.blas
        wide = plan.out_dtype in ("f64", "c128")
        alpha = np.array([plan.scale], dtype=np.float64 if wide else np.float32)
        fn = {"c64": b.csscal, "c128": b.zdscal, "f32": b.sscal, "f64": b.dscal}[plan.out_dtype]
        total = plan.batch * plan.odist
        isz = numpy_dtype(plan.out_dtype).itemsize
        for start in range(0, total, INT_MAX):
            fn(self._handle(), min(INT_MAX, total - start), alpha.ctypes.data,
               out + start * isz, 1)
