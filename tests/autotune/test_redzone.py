"""The redzone allocator (XLA's RedzoneAllocator semantics) and buffer handling."""
from __future__ import annotations

import ctypes

import numpy as np

from hlo_opt.autotune.buffers import RedzoneBuffers, from_physical, random_fill, to_physical
from hlo_opt.autotune.compare import mismatches
from hlo_opt.autotune.config import AutotuneConfig
from hlo_opt.autotune.redzone import HostMemory, RedzoneAllocator
from hlo_opt.ir.shape import Layout, Shape


def test_sizes_pattern_and_alignment():
    a = RedzoneAllocator(HostMemory(), 100)
    assert a.redzone_size == 128                      # rounded up to 64
    buf = a.allocate_bytes(5)
    assert buf.address % 64 == 0 and buf.nbytes == 5
    raw = buf.alloc
    assert raw.size == 5 + 3 + 2 * 128                # 3 bytes of slop
    assert (raw[:128] == 0xFF).all() and (raw[133:] == 0xFF).all()
    buf.write(np.arange(5, dtype=np.uint8))
    assert a.check_redzones().ok


def test_slop_counts_as_redzone_and_refill_after_failure():
    a = RedzoneAllocator(HostMemory(), 64)
    a.allocate_bytes(16)
    buf = a.allocate_bytes(5)
    ctypes.memset(buf.address + 5, 0, 1)              # first slop byte
    st = a.check_redzones()
    assert not st.ok and st.buffer_name == "RHS" and st.offset == 0
    assert st.failure_msg() == (f"Redzone mismatch in RHS redzone of buffer 0x{buf.address:x} "
                                "at offset 0; expected ffffffffffffffff but was ffffffffffffff00.")
    assert a.check_redzones().ok                      # the guard was re-filled


def test_lhs_and_byte_tail():
    a = RedzoneAllocator(HostMemory(), 64)
    buf = a.allocate_bytes(8)
    ctypes.memset(buf.address - 1, 7, 1)
    st = a.check_redzones()
    assert (st.buffer_name, st.offset, st.actual) == ("LHS", 56, 0x07FFFFFFFFFFFFFF)


def test_no_redzones_below_level_4():
    assert AutotuneConfig(level=3).redzone_size == 0
    assert AutotuneConfig(level=4).redzone_size == 8 * 1024 * 1024


def test_layouts_round_trip_through_buffer_bytes():
    s = Shape.array("f32", (2, 3, 4), Layout((0, 2, 1)))
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    phys = to_physical(s, x)
    assert phys.shape == (3, 4, 2)                     # major-to-minor: dims 1, 2, 0
    assert (from_physical(s, np.frombuffer(phys.tobytes(), np.uint8)) == x).all()


def test_random_fill_is_xlas_ring():
    f32 = Shape.array("f32", (10069 + 5,))
    state = [0]
    v = random_fill(f32, state)
    assert state == [5] and (v[:5] == v[-5:]).all()    # a ring of 10069 values
    assert 0 <= v.min() and v.max() <= 1
    assert set(np.unique(random_fill(Shape.array("s32", (100,)), [0]))) <= {0, 1}
    assert random_fill(Shape.array("f16", (100,)), [0]).max() <= 0.1


def test_buffers_for_shapes_levels():
    shapes = [Shape.array("f32", (4,))]
    b1 = RedzoneBuffers.for_shapes(HostMemory(), shapes, shapes, AutotuneConfig(level=1))
    assert not b1.read_input(0).any()
    b2 = RedzoneBuffers.for_shapes(HostMemory(), shapes, shapes, AutotuneConfig(level=2))
    assert b2.read_input(0).any()


def test_comparator_is_xlas_relative_rule():
    s = Shape.array("f32", (4,))
    a = np.array([1.0, np.nan, np.inf, 100.0], np.float32)
    assert mismatches(s, a, a.copy(), 0.1) == 0
    b = np.array([1.05, np.nan, np.inf, 120.0], np.float32)
    assert mismatches(s, b, a, 0.1) == 1             # |20| / (120 + 1) > 0.1
    assert mismatches(s, np.array([1, 0, -np.inf, 100], np.float32), a, 0.1) == 2
    h = Shape.array("f16", (1,))
    assert mismatches(h, np.array([np.inf], np.float16), np.array([65504], np.float16), 0.1) == 0


def test_device_memory_adapter_finds_out_of_bounds_writes():
    from hlo_opt.autotune.redzone import DeviceMemory

    class FakeDevice:   # what cuda-sim's device looks like: host addresses
        def __init__(self):
            self.keep = []

        def alloc(self, n):
            b = np.zeros(n + 128, np.uint8)
            self.keep.append(b)
            return b.ctypes.data + (-b.ctypes.data) % 64

        def upload(self, addr, data):
            ctypes.memmove(addr, data, len(data))

        def download(self, addr, n):
            return ctypes.string_at(addr, n)

    a = RedzoneAllocator(DeviceMemory(FakeDevice()), 64)
    buf = a.allocate_bytes(12)
    buf.write(np.arange(12, dtype=np.uint8))
    assert (buf.read() == np.arange(12)).all() and a.check_redzones().ok
    ctypes.memset(buf.address + 12, 1, 1)
    assert a.check_redzones().buffer_name == "RHS"


def test_every_modified_guard_is_refilled():
    a = RedzoneAllocator(HostMemory(), 64)
    b1, b2 = a.allocate_bytes(8), a.allocate_bytes(8)
    ctypes.memset(b1.address + 8, 0, 1)
    ctypes.memset(b2.address - 1, 0, 1)
    st = a.check_redzones()
    assert st.user_buffer_address == b1.address and st.buffer_name == "RHS"
    assert a.check_redzones().ok          # b2's guard was re-filled too
