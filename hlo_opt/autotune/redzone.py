"""Redzones: guard bytes before and after every buffer a candidate may touch.

As ``stream_executor::RedzoneAllocator``: each allocation is
``[lhs redzone | user bytes | rhs slop | rhs redzone]``; the redzone size is rounded up to
64 bytes, the user size up to 4 (the slop counts as redzone), and every guard byte holds
the pattern 0xFF.  After a candidate ran, :meth:`RedzoneAllocator.check_redzones` finds
the first modified 8-byte word (then byte), reports it in XLA's words and re-fills the
guard so that the next candidate is checked afresh.

The memory itself is behind :class:`Memory` (host numpy arrays here; a device backend
supplies device allocations with the same five operations).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Protocol

import numpy as np

ALLOCATOR_ALIGNMENT = 64   # tsl::Allocator::kAllocatorAlignment
RHS_REDZONE_ALIGN = 4      # kRhsRedzoneAlign
REDZONE_PATTERN = 0xFF     # RedzoneAllocator's default pattern (uint8 -1)


def round_up(n: int, k: int) -> int:
    return -(-n // k) * k


class Memory(Protocol):
    """Where candidate buffers live.  ``alloc`` is whatever ``allocate`` returned."""

    def allocate(self, nbytes: int): ...
    def address(self, alloc) -> int: ...
    def fill(self, alloc, offset: int, nbytes: int, byte: int) -> None: ...
    def read(self, alloc, offset: int, nbytes: int) -> np.ndarray: ...   # uint8 copy
    def write(self, alloc, offset: int, data: np.ndarray) -> None: ...
    # bytes [0, nbytes) := ``head`` (uint8) repeated
    def repeat(self, alloc, offset: int, head: np.ndarray, nbytes: int) -> None: ...
    def count_differing(self, alloc, offset: int, nbytes: int, byte: int) -> int: ...
    def copy(self, dst, dst_offset: int, src, src_offset: int, nbytes: int) -> None: ...
    # elements beyond ``rtol`` between two buffers of ``element_type`` (compare.py's rule)
    def mismatches(self, element_type: str, a, a_offset: int, b, b_offset: int,
                   nbytes: int, rtol: float) -> int: ...
    def free(self, alloc) -> None: ...


def repeat_in_place(out: np.ndarray, head: np.ndarray) -> np.ndarray:
    """``out`` (uint8) := ``head`` repeated, by doubling copies of what is filled."""
    h = min(head.size, out.size)
    out[:h] = head[:h]
    filled = h
    while 0 < filled < out.size:
        k = min(filled, out.size - filled)
        out[filled:filled + k] = out[:k]
        filled += k
    return out


class HostMemory:
    """Host memory: 64-byte aligned numpy ``uint8`` arrays (with 64 spare bytes after
    each, so that a stray write just past an unguarded buffer stays in our memory)."""

    def allocate(self, nbytes: int) -> np.ndarray:
        raw = np.empty(nbytes + 2 * ALLOCATOR_ALIGNMENT, dtype=np.uint8)
        skew = (-raw.ctypes.data) % ALLOCATOR_ALIGNMENT
        return raw[skew:skew + nbytes]

    def address(self, alloc: np.ndarray) -> int:
        return alloc.ctypes.data

    def fill(self, alloc, offset, nbytes, byte):
        alloc[offset:offset + nbytes] = byte

    def read(self, alloc, offset, nbytes):
        return alloc[offset:offset + nbytes].copy()

    def write(self, alloc, offset, data):
        alloc[offset:offset + data.size] = data.view(np.uint8).reshape(-1)

    def view(self, alloc, offset, nbytes) -> np.ndarray:
        return alloc[offset:offset + nbytes]

    def repeat(self, alloc, offset, head, nbytes):
        repeat_in_place(self.view(alloc, offset, nbytes), head)

    def free(self, alloc):
        pass   # the array goes with its last reference

    def count_differing(self, alloc, offset, nbytes, byte):
        return int(np.count_nonzero(self.view(alloc, offset, nbytes) != byte))

    def copy(self, dst, dst_offset, src, src_offset, nbytes):
        self.view(dst, dst_offset, nbytes)[:] = self.view(src, src_offset, nbytes)

    def mismatches(self, element_type, a, a_offset, b, b_offset, nbytes, rtol):
        from .compare import mismatches_in_bytes
        return mismatches_in_bytes(element_type, self.view(a, a_offset, nbytes),
                                   self.view(b, b_offset, nbytes), rtol)


@dataclass
class Buffer:
    """The user part of one allocation (what a candidate receives)."""
    memory: object
    alloc: object
    offset: int
    nbytes: int

    @property
    def address(self) -> int:
        return self.memory.address(self.alloc) + self.offset

    def read(self) -> np.ndarray:
        return self.memory.read(self.alloc, self.offset, self.nbytes)

    def write(self, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if data.size != self.nbytes:
            raise ValueError(f"writing {data.size} bytes into a {self.nbytes}-byte buffer")
        self.memory.write(self.alloc, self.offset, data)

    def host_view(self) -> np.ndarray:
        """The bytes in place (host memory only)."""
        return self.memory.view(self.alloc, self.offset, self.nbytes)

    def pointer(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.address)


@dataclass(frozen=True)
class RedzoneCheckStatus:
    buffer_name: str = ""          # "LHS" / "RHS"
    user_buffer_address: int = 0
    offset: int = 0
    expected: int = 0
    actual: int = 0

    @property
    def ok(self) -> bool:
        return not self.buffer_name

    def failure_msg(self) -> str:
        """XLA's RedzoneFailureMsg."""
        return (f"Redzone mismatch in {self.buffer_name} redzone of buffer "
                f"0x{self.user_buffer_address:x} at offset {self.offset}; expected "
                f"{self.expected:08x} but was {self.actual:08x}.")


class RedzoneAllocator:
    def __init__(self, memory: Memory, redzone_size: int, pattern: int = REDZONE_PATTERN):
        self.memory = memory
        self.redzone_size = round_up(redzone_size, ALLOCATOR_ALIGNMENT)
        self.pattern = pattern & 0xFF
        self._allocations: list[tuple[object, int]] = []  # (allocation, user bytes)
        self.allocated_bytes_excluding_redzones = 0

    def allocate_bytes(self, nbytes: int) -> Buffer:
        if nbytes < 0:
            raise ValueError("byte size must be non-negative")
        rz = self.redzone_size
        slop = round_up(nbytes, RHS_REDZONE_ALIGN) - nbytes
        total = nbytes + 2 * rz + slop
        alloc = self.memory.allocate(max(total, 1))
        if rz or slop:
            self.memory.fill(alloc, 0, rz, self.pattern)
            self.memory.fill(alloc, rz + nbytes, rz + slop, self.pattern)
        self._allocations.append((alloc, nbytes))
        self.allocated_bytes_excluding_redzones += nbytes
        return Buffer(self.memory, alloc, rz, nbytes)

    def _check_zone(self, alloc, start: int, size: int, name: str, user_addr: int):
        if size == 0 or not self.memory.count_differing(alloc, start, size, self.pattern):
            return RedzoneCheckStatus()
        data = self.memory.read(alloc, start, size)
        bad = np.flatnonzero(data != self.pattern)
        if bad.size == 0:
            return RedzoneCheckStatus()
        first = int(bad[0])
        word = first - first % 8
        if word + 8 <= size:  # report the 64-bit word, as XLA's host check does
            pattern64 = int.from_bytes(bytes([self.pattern]) * 8, "little")
            actual = int.from_bytes(bytes(data[word:word + 8]), "little")
            return RedzoneCheckStatus(name, user_addr, word, pattern64, actual)
        return RedzoneCheckStatus(name, user_addr, first, self.pattern, int(data[first]))

    def release(self) -> None:
        """Free every allocation (the candidates that used them have finished)."""
        for alloc, _ in self._allocations:
            self.memory.free(alloc)
        self._allocations.clear()

    def check_redzones(self) -> RedzoneCheckStatus:
        """The first modified guard byte over all allocations.  Every modified guard is
        re-filled (XLA re-fills only the first), so that the next candidate is not blamed
        for this one's writes."""
        rz = self.redzone_size
        first = RedzoneCheckStatus()
        for alloc, nbytes in self._allocations:
            slop = round_up(nbytes, RHS_REDZONE_ALIGN) - nbytes
            user = self.memory.address(alloc) + rz
            lhs = self._check_zone(alloc, 0, rz, "LHS", user)
            rhs = self._check_zone(alloc, rz + nbytes, rz + slop, "RHS", user)
            if not lhs.ok or not rhs.ok:
                self.memory.fill(alloc, 0, rz, self.pattern)
                self.memory.fill(alloc, rz + nbytes, rz + slop, self.pattern)
                if first.ok:
                    first = lhs if not lhs.ok else rhs
        return first


class DeviceMemory:
    """:class:`Memory` over a backend device that speaks addresses (``alloc(nbytes) ->
    addr``, ``upload(addr, bytes)``, ``download(addr, nbytes) -> bytes``, ``copy(dst, src,
    nbytes)``, optionally ``memset8(addr, byte, nbytes)``): the CUDA driver and cuda-sim's
    host device both do.  With ``kernels`` (the backend's
    :class:`~hlo_opt.backends.cuda.buffer_kernels.BufferKernels`), buffers are filled,
    their guards checked and outputs compared on the device, as XLA does; without, the
    bytes go through the host."""

    def __init__(self, device, kernels=None):
        self.device = device
        self.kernels = kernels
        self.kernel_error: Exception | None = None   # why the kernels were given up

    def _on_device(self, op):
        """``op(kernels)``, or None (the host path) without kernels or once they failed
        to build or run (the first failure is kept in ``kernel_error``)."""
        if self.kernels is None:
            return None
        try:
            return op(self.kernels)
        except Exception as e:  # noqa: BLE001 - a compile/load/launch failure: the host path
            self.kernel_error, self.kernels = e, None
            return None

    def allocate(self, nbytes: int) -> int:
        return self.device.alloc(nbytes)

    def address(self, alloc: int) -> int:
        return alloc

    def fill(self, alloc, offset, nbytes, byte):
        if not nbytes:
            return
        if hasattr(self.device, "memset8"):
            self.device.memset8(alloc + offset, byte & 0xFF, nbytes)
        else:
            self.device.upload(alloc + offset, bytes([byte & 0xFF]) * nbytes)

    def read(self, alloc, offset, nbytes):
        return np.frombuffer(self.device.download(alloc + offset, nbytes), np.uint8).copy()

    def write(self, alloc, offset, data):
        if data.size:
            self.device.upload(alloc + offset, np.ascontiguousarray(data).tobytes())

    def free(self, alloc):
        if hasattr(self.device, "free"):
            self.device.sync()   # no queued candidate work may still use it
            self.device.free(alloc)

    def repeat(self, alloc, offset, head, nbytes):
        head = np.ascontiguousarray(head, np.uint8)[:nbytes]
        if self.kernels is not None:
            self.write(alloc, offset, head)
            if self._on_device(lambda k: k.repeat(alloc + offset, head.size, nbytes)) \
                    is not None:
                return
        self.write(alloc, offset, repeat_in_place(np.empty(nbytes, np.uint8), head))

    def count_differing(self, alloc, offset, nbytes, byte):
        n = self._on_device(lambda k: k.count_differing(alloc + offset, nbytes, byte))
        if n is None:
            n = int(np.count_nonzero(self.read(alloc, offset, nbytes) != byte))
        return n

    def copy(self, dst, dst_offset, src, src_offset, nbytes):
        if nbytes:
            self.device.copy(dst + dst_offset, src + src_offset, nbytes)

    def mismatches(self, element_type, a, a_offset, b, b_offset, nbytes, rtol):
        n = self._on_device(lambda k: k.mismatches(element_type, a + a_offset, b + b_offset,
                                                   nbytes, rtol))
        if n is not None:
            return n
        from .compare import mismatches_in_bytes
        return mismatches_in_bytes(element_type, self.read(a, a_offset, nbytes),
                                   self.read(b, b_offset, nbytes), rtol)
