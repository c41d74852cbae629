"""cuda-sim's "device": host memory, kernels run by the emulation library, timings by
the wall clock."""
from __future__ import annotations

import ctypes

import numpy as np

from ..cuda.runtime import WallTimer


class SimDevice:
    name = "cuda-sim"

    def __init__(self, library):
        self.lib = library
        self._keep: list = []

    def alloc(self, nbytes: int) -> int:
        buf = np.zeros(max(nbytes, 1) + 64, dtype=np.uint8)
        self._keep.append(buf)
        base = buf.ctypes.data
        return base + (-base) % 64

    def upload(self, addr: int, data: bytes) -> None:
        ctypes.memmove(addr, data, len(data))

    def download(self, addr: int, nbytes: int) -> bytes:
        return ctypes.string_at(addr, nbytes)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def launch(self, k, addrs) -> None:
        self.lib.launch(k.name, k.grid, k.block, k.fibered,
                        [ctypes.c_void_p(a) for a in addrs])

    def memset(self, addr: int, nbytes: int) -> None:
        ctypes.memset(addr, 0, nbytes)

    def memset8(self, addr: int, value: int, nbytes: int) -> None:
        ctypes.memset(addr, value & 0xFF, nbytes)

    def library_call(self, runner, thunk, frame) -> None:
        """A gemm as its kernel (cuda-sim has no cuBLASLt); on the host without one."""
        if thunk.kernel is None:
            runner._host_call(thunk.step, frame)
            return
        self.launch(thunk.kernel, [runner.addr(s, frame) for s in thunk.args])
        for sl in thunk.workspaces:
            self.memset(runner.addr(sl, frame), sl.size)

    def sync(self) -> None:
        pass

    def timer(self):
        return WallTimer(self)
