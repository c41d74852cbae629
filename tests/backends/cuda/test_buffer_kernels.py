"""The autotuner's device-side buffer kernels (fill by repeating XLA's ring, redzone byte
count, BufferComparator): compiled by NVRTC for sm_80 / sm_90, and run under cuda-sim
against their numpy definitions (``compare.mismatches``, ``np.resize``), alone and as the
memory of a level-4 tuning."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_opt.autotune import AutotuneConfig
from hlo_opt.autotune.buffers import RedzoneBuffers
from hlo_opt.autotune.compare import mismatches_in_bytes
from hlo_opt.autotune.redzone import DeviceMemory, HostMemory
from hlo_opt.autotune.results import CandidateKey, FailureKind
from hlo_opt.autotune.tuner import tune_candidates
from hlo_opt.backends.cuda.buffer_kernels import PARAMS, BufferKernels, source
from hlo_opt.ir.shape import Shape
from tests.backends.cuda.support import assert_compiled_entries, require_gxx, require_nvrtc


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_every_buffer_kernel(arch):
    require_nvrtc()
    from hlo_opt.backends.cuda.compiler import compile_cuda
    assert_compiled_entries(compile_cuda(source(), arch, name="autotune_buffers.cu"),
                            set(PARAMS))


@pytest.fixture(scope="module")
def sim():
    """(device, BufferKernels) on cuda-sim: host memory, kernels run by the emulator."""
    require_gxx()
    import ctypes  # noqa: F401 - the launcher's argument objects
    from hlo_opt.backends.cuda_sim.compiler import compile_sim
    from hlo_opt.backends.cuda_sim.device import SimDevice
    lib = compile_sim(source(), list(PARAMS.items()))
    dev = SimDevice(lib)

    def launch(name, grid, block, args):
        lib.launch(name, (grid,), (block,), False, args)
    return dev, BufferKernels(dev, launch)


def _device_bytes(dev, data: np.ndarray) -> int:
    raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    addr = dev.alloc(raw.size)
    dev.upload(addr, raw.tobytes())
    return addr


def test_repeat_fills_the_buffer_with_its_head(sim):
    dev, k = sim
    head = np.arange(1, 38, dtype=np.uint8)          # 37 bytes, a prime
    for nbytes in (37, 38, 1000, 4099):
        addr = dev.alloc(nbytes)
        dev.upload(addr, head.tobytes())
        k.repeat(addr, head.size, nbytes)
        got = np.frombuffer(dev.download(addr, nbytes), np.uint8)
        assert (got == np.resize(head, nbytes)).all(), nbytes


def test_count_differing_counts_guard_bytes(sim):
    dev, k = sim
    zone = np.full(5000, 0xFF, np.uint8)
    addr = _device_bytes(dev, zone)
    assert k.count_differing(addr, zone.size, 0xFF) == 0
    zone[[0, 17, 4999]] = 0x5A
    addr = _device_bytes(dev, zone)
    assert k.count_differing(addr, zone.size, 0xFF) == 3
    assert k.count_differing(addr, zone.size, 0x5A) == zone.size - 3


def _pairs(element_type: str, rng) -> tuple[np.ndarray, np.ndarray]:
    """A reference and a candidate output with every case of the rule: equal, close,
    far, NaN against NaN and against a number, equal and opposite infinities, f16's
    overflow, zeros of both signs, integers far apart."""
    n = 3000
    if element_type == "pred":
        a = rng.integers(0, 2, n).astype(np.bool_)
        b = a.copy()
        b[::97] = ~b[::97]
        return a, b
    dtype = np.dtype(ml_dtypes.bfloat16) if element_type == "bf16" else {
        "f16": np.float16, "f32": np.float32, "f64": np.float64, "s32": np.int32,
        "u8": np.uint8, "s64": np.int64, "c64": np.complex64,
        "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn)}[element_type]
    if np.issubdtype(dtype, np.integer):
        a = rng.integers(0, 100, n).astype(dtype)
        b = a.copy()
        b[::7] = (b[::7] + 1).astype(dtype)            # 1/101: close; 1/2: far
        b[::11] = (b[::11] + 50).astype(dtype)
        return a, b
    base = rng.standard_normal(n) * 10
    if element_type == "c64":
        a = (base + 1j * rng.standard_normal(n)).astype(dtype)
        b = a.copy()
        b[::5] *= 1.001
        b[::9] += 3j
        return a, b
    a = base.astype(dtype)
    b = (base * (1 + rng.uniform(-0.2, 0.2, n))).astype(dtype)
    special = [np.nan, np.nan, np.inf, -np.inf, 0.0, 1.0]
    other = [np.nan, 1.0, np.inf, np.inf, -0.0, np.nan]
    if element_type == "f16":
        special += [np.inf, 70000.0]
        other += [65504.0, -np.inf]
    if element_type == "f8e4m3fn":
        special, other = [np.nan, 0.0], [np.nan, -0.0]
    with np.errstate(over="ignore"):                   # 70000 is f16's infinity
        a[:len(special)] = np.array(special).astype(dtype)
        b[:len(other)] = np.array(other).astype(dtype)
    return a, b


@pytest.mark.parametrize("element_type", ["f16", "bf16", "f32", "f64", "f8e4m3fn", "s32",
                                          "u8", "s64", "pred", "c64"])
@pytest.mark.parametrize("rtol", [0.1, 0.001])
def test_comparator_kernel_is_the_numpy_rule(sim, element_type, rtol):
    dev, k = sim
    a, b = _pairs(element_type, np.random.default_rng(7))
    ab, bb = a.view(np.uint8).reshape(-1), b.view(np.uint8).reshape(-1)
    want = mismatches_in_bytes(element_type, bb, ab, rtol)
    assert want > 0 and mismatches_in_bytes(element_type, ab, ab, rtol) == 0
    got = k.mismatches(element_type, _device_bytes(dev, b), _device_bytes(dev, a),
                       bb.size, rtol)
    assert got == want
    same = _device_bytes(dev, a)
    assert k.mismatches(element_type, same, _device_bytes(dev, a), ab.size, rtol) == 0


def test_no_kernel_for_sub_byte_types(sim):
    assert sim[1].mismatches("s4", 0, 0, 16, 0.1) is None


class _Cand:
    """Writes ``value`` into output 0 (and, when ``stray``, one byte after it)."""
    scratch_bytes = 0

    def __init__(self, name, value, stray=False):
        self.key, self.name, self.value, self.stray = CandidateKey.other(name), name, value, stray

    def run(self, inputs, outputs, scratch):
        out = outputs[0]
        out.write(np.full(out.nbytes // 4, self.value, np.float32))
        if self.stray:
            out.memory.write(out.alloc, out.offset + out.nbytes, np.array([7], np.uint8))


@pytest.mark.parametrize("level", [4, 5])
def test_tuning_on_device_memory_with_kernels_matches_host_memory(sim, level):
    dev, k = sim
    shapes_in = [Shape.array("f32", (33, 7)), Shape.array("bf16", (100,))]
    shapes_out = [Shape.array("f32", (64, 3))]
    cfg = AutotuneConfig(level=level, redzone_padding_bytes=256)
    cands = [_Cand("good", 1.0), _Cand("oob", 1.0, stray=True), _Cand("wrong", 2.0),
             _Cand("close", 1.00001)]
    outcomes = []
    for memory in (HostMemory(), DeviceMemory(dev, k), DeviceMemory(dev)):
        bufs = RedzoneBuffers.for_shapes(memory, shapes_in, shapes_out, cfg)
        inputs = [bufs.read_input(i) for i in range(2)]
        rec = tune_candidates(cands, bufs, cfg, lambda run: (run(), 1e-3)[1], "%x")
        outcomes.append(([r.failure.kind if r.failure else None for r in rec.results],
                         [x.tobytes() for x in inputs], rec.best.key))
        bufs.release()
    assert outcomes[0] == outcomes[1] == outcomes[2]
    wrong = FailureKind.DISQUALIFIED if level == 5 else FailureKind.WRONG_RESULT
    assert outcomes[0][0] == [None, FailureKind.REDZONE_MODIFIED, wrong, None]


def test_kernels_that_fail_to_build_leave_the_work_to_the_host(sim):
    """A device whose buffer kernels do not compile or launch tunes as without them."""
    dev, _ = sim

    def launch(name, grid, block, args):
        raise RuntimeError("NVRTC: no such architecture")
    memory = DeviceMemory(dev, BufferKernels(dev, launch))
    shapes = [Shape.array("f32", (20000,))]                # longer than the ring
    cfg = AutotuneConfig(level=4, redzone_padding_bytes=256)
    bufs = RedzoneBuffers.for_shapes(memory, shapes, shapes, cfg)
    host = RedzoneBuffers.for_shapes(HostMemory(), shapes, shapes, cfg)
    assert (bufs.read_input(0) == host.read_input(0)).all()
    assert memory.kernels is None and "NVRTC" in str(memory.kernel_error)
    assert bufs.allocator.check_redzones().ok


def test_cuda_launcher_passes_typed_arguments(monkeypatch, tmp_path):
    """On a CUDA device the kernels are NVRTC-compiled once and launched with each
    argument's ctypes type (the comparator's rtol is a double, not a pointer)."""
    require_nvrtc()
    import ctypes
    monkeypatch.setenv("HLO_OPT_CACHE_DIR", str(tmp_path))
    from hlo_opt.backends.cuda.buffer_kernels import cuda_buffer_kernels
    calls, loads = [], []

    class Dev:
        arch = "sm_90"

        def alloc(self, n):
            return 0x1000

        def memset(self, addr, n):
            pass

        def download(self, addr, n):
            return (5).to_bytes(8, "little")

        def load_module(self, cubin):
            loads.append(cubin[:4])
            return type("M", (), {"function": lambda self, name: name})()

        def launch_function(self, fn, grid, block, values, types=None):
            calls.append((fn, grid, block, list(values), list(types)))
    k = cuda_buffer_kernels(Dev())
    assert k.mismatches("bf16", 0x2000, 0x3000, 64, 0.125) == 5
    assert k.count_differing(0x2000, 100, 0xFF) == 5
    k.repeat(0x2000, 16, 4096)
    assert loads == [b"\x7fELF"]                                 # compiled and loaded once
    (fn, grid, block, values, types), count, rep = calls
    assert fn == "hlo_compare_bf16" and block == (256,) and values[2:4] == [32, 0.125]
    assert types == [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_double,
                     ctypes.c_void_p]
    assert count[0] == "hlo_count_differing" and count[3][2] == 0xFF
    assert rep[0] == "hlo_repeat_buffer" and rep[3] == [0x2000, 16, 4096]
