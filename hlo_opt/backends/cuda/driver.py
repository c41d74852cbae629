"""The CUDA driver through ``cuda.bindings.driver``: probed once per process, one context
(the primary one), one stream, module loading, launches, copies, events, graphs.

Probe once: on a machine without a driver ``cuInit`` raises, and a later attempt to touch
the device can hang, so the first failure is remembered and every later request gets the
same clear error at once.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ...errors import HloError
from .toolchain import MissingToolError

NO_DEVICE = "no CUDA driver/device found"


class CudaDriverError(HloError):
    """No usable driver or device, or a driver call failed."""


_PROBE: dict = {}


def _drv():
    try:
        from cuda.bindings import driver
    except ImportError:
        raise MissingToolError("cuda-python (cuda.bindings) not found: install the "
                               "'cuda-python' package (or everything: "
                               "pip install 'hlo-opt[cuda]')") from None
    return driver


def _ck(res, what: str):
    drv = _drv()
    err = res[0] if isinstance(res, tuple) else res
    if err != drv.CUresult.CUDA_SUCCESS:
        try:
            name = drv.cuGetErrorName(err)[1].decode()
        except Exception:  # noqa: BLE001
            name = str(err)
        raise CudaDriverError(f"CUDA driver: {what} failed: {name}")
    if isinstance(res, tuple):
        return res[1] if len(res) == 2 else res[1:]
    return None


def probe() -> "Device":
    """The one device of this process (device 0), or CudaDriverError(NO_DEVICE ...)."""
    if "device" in _PROBE:
        return _PROBE["device"]
    if "error" in _PROBE:
        raise CudaDriverError(_PROBE["error"])
    drv = _drv()
    try:
        (err,) = drv.cuInit(0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise CudaDriverError(f"{NO_DEVICE} (cuInit: {err.name})")
        err, count = drv.cuDeviceGetCount()
        if err != drv.CUresult.CUDA_SUCCESS or count == 0:
            raise CudaDriverError(f"{NO_DEVICE} (no device visible)")
        dev = Device(0)
    except CudaDriverError as e:
        _PROBE["error"] = str(e)
        raise
    except Exception as e:  # DynamicLibNotFoundError: no libcuda.so
        why = ("libcuda.so not found: no NVIDIA driver installed"
               if "DynamicLib" in type(e).__name__ else f"{type(e).__name__}: {str(e)[:120]}")
        _PROBE["error"] = f"{NO_DEVICE} ({why})"
        raise CudaDriverError(_PROBE["error"]) from None
    _PROBE["device"] = dev
    return dev


class Device:
    def __init__(self, ordinal: int):
        drv = _drv()
        self.drv = drv
        self.cu_device = _ck(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = _ck(drv.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
        _ck(drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        A = drv.CUdevice_attribute
        attr = lambda a: _ck(drv.cuDeviceGetAttribute(a, self.cu_device), str(a))  # noqa: E731
        self.cc = (attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                   attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.sm_count = attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.smem_optin = attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.l2 = attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        self.clock_khz = attr(A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        name = _ck(drv.cuDeviceGetName(256, self.cu_device), "cuDeviceGetName")
        self.name = bytes(name).split(b"\0")[0].decode()
        self.stream = _ck(drv.cuStreamCreate(0), "cuStreamCreate")

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def device_info(self):
        from ...analysis.device import DEFAULT_DEVICE, DeviceInfo
        return DeviceInfo(name=self.name, compute_capability=self.cc, core_count=self.sm_count,
                          fpus_per_core=DEFAULT_DEVICE.fpus_per_core,
                          clock_rate_ghz=self.clock_khz / 1e6,
                          memory_bandwidth=DEFAULT_DEVICE.memory_bandwidth,
                          l2_cache_size=self.l2,
                          shared_memory_per_block_optin=self.smem_optin)

    # ---- memory -------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        return int(_ck(self.drv.cuMemAlloc(max(int(nbytes), 1)), f"cuMemAlloc({nbytes})"))

    def free(self, addr: int) -> None:
        self.drv.cuMemFree(addr)

    def upload(self, addr: int, data) -> None:
        buf = np.ascontiguousarray(np.frombuffer(data, dtype=np.uint8)
                                   if isinstance(data, (bytes, bytearray, memoryview)) else data)
        _ck(self.drv.cuMemcpyHtoDAsync(addr, buf.ctypes.data, buf.nbytes, self.stream),
            "cuMemcpyHtoD")
        self.sync()  # the host buffer may go away

    def download(self, addr: int, nbytes: int) -> bytes:
        out = np.empty(max(nbytes, 1), dtype=np.uint8)
        _ck(self.drv.cuMemcpyDtoHAsync(out.ctypes.data, addr, nbytes, self.stream),
            "cuMemcpyDtoH")
        self.sync()
        return out[:nbytes].tobytes()

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        _ck(self.drv.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream), "cuMemcpyDtoD")

    def memset(self, addr: int, nbytes: int) -> None:
        _ck(self.drv.cuMemsetD8Async(addr, 0, nbytes, self.stream), "cuMemsetD8")

    def memset8(self, addr: int, value: int, nbytes: int) -> None:
        """``nbytes`` bytes of ``value`` at ``addr``."""
        _ck(self.drv.cuMemsetD8Async(addr, value & 0xFF, nbytes, self.stream), "cuMemsetD8")

    def memset16(self, addr: int, value: int, count: int) -> None:
        """``count`` 16-bit words of ``value`` at ``addr``."""
        _ck(self.drv.cuMemsetD16Async(addr, value, count, self.stream), "cuMemsetD16")

    def sync(self) -> None:
        _ck(self.drv.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # ---- modules and launches -------------------------------------------------------------
    def load_module(self, cubin: bytes) -> "LoadedModule":
        image = np.frombuffer(cubin, dtype=np.uint8).copy()
        mod = _ck(self.drv.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData")
        return LoadedModule(self, mod)

    def launch_function(self, fn, grid, block, addrs, shmem: int = 0, types=None) -> None:
        """Launch ``fn``; arguments are device pointers unless ``types`` (ctypes types,
        one per argument) says otherwise."""
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        params = ((tuple(addrs), tuple(types)) if types else
                  (tuple(int(a) for a in addrs), tuple(ctypes.c_void_p for _ in addrs)))
        _ck(self.drv.cuLaunchKernel(fn, *g, *b, shmem, self.stream, params, 0),
            "cuLaunchKernel")

    # ---- events / graphs ------------------------------------------------------------------
    def event(self):
        return _ck(self.drv.cuEventCreate(0), "cuEventCreate")

    def record(self, ev) -> None:
        _ck(self.drv.cuEventRecord(ev, self.stream), "cuEventRecord")

    def elapsed_ms(self, a, b) -> float:
        _ck(self.drv.cuEventSynchronize(b), "cuEventSynchronize")
        return float(_ck(self.drv.cuEventElapsedTime(a, b), "cuEventElapsedTime"))

    def begin_capture(self) -> None:
        _ck(self.drv.cuStreamBeginCapture(
            self.stream, self.drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            "cuStreamBeginCapture")

    def end_capture(self):
        graph = _ck(self.drv.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        return _ck(self.drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def launch_graph(self, exe) -> None:
        _ck(self.drv.cuGraphLaunch(exe, self.stream), "cuGraphLaunch")


class LoadedModule:
    def __init__(self, dev: Device, mod):
        self.dev = dev
        self.mod = mod
        self.fns: dict = {}

    def function(self, name: str):
        fn = self.fns.get(name)
        if fn is None:
            fn = _ck(self.dev.drv.cuModuleGetFunction(self.mod, name.encode()),
                     f"cuModuleGetFunction({name})")
            self.fns[name] = fn
        return fn


class EventTimer:
    def __init__(self, dev: Device):
        self.dev = dev
        self.a, self.b = dev.event(), dev.event()

    def start(self):
        self.dev.record(self.a)

    def stop(self) -> float:
        self.dev.record(self.b)
        return self.dev.elapsed_ms(self.a, self.b) / 1e3

    @classmethod
    def mean(cls, dev: Device, fn, iters: int, warmup: int = 2) -> float:
        """Seconds per call of ``fn`` (which queues device work) over ``iters`` calls
        after ``warmup`` ones, between two events."""
        for _ in range(warmup):
            fn()
        dev.sync()
        timer = cls(dev)
        timer.start()
        for _ in range(iters):
            fn()
        return timer.stop() / iters


class LoadedModules:
    """Several loaded modules seen as one: each kernel is looked up in the module of the
    part it was compiled in (a program compiled in parallel parts)."""

    def __init__(self, modules: list, names: list[list[str]]):
        self.by_name = {n: m for m, ns in zip(modules, names) for n in ns}

    def function(self, name: str):
        return self.by_name[name].function(name)

