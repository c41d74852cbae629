"""The autotuner's buffer work on the device, as XLA does it with kernels of its own,
instead of moving whole buffers through the host for every candidate:

* ``hlo_repeat_buffer``: XLA's ``RepeatBufferKernel``: the first ``repeat`` bytes of a
  buffer (the random ring, uploaded once) repeated over the rest (levels >= 2 fill every
  buffer, level >= 3 refills the outputs before each candidate);
* ``hlo_count_differing``: XLA's redzone checker: how many guard bytes differ from the
  pattern (only a non-zero count downloads the zone, to name the first modified word);
* ``hlo_compare_<type>``: XLA's ``BufferComparator``: how many elements of a candidate's
  output differ from the reference beyond ``rtol``, by the rule of
  :func:`hlo_opt.autotune.compare.mismatches` (the numpy definition the tests hold the
  kernels to).

The source compiles with NVRTC for the device and with the host C++ compiler for
cuda-sim (the same ``.cu`` against the emulation header); :class:`BufferKernels` runs it
through a ``launch(name, grid, block, args)`` of either and hands
:class:`~hlo_opt.autotune.redzone.DeviceMemory` its three operations.
"""
from __future__ import annotations

import ctypes

from ...ir.types import numpy_dtype

BLOCK = 256
MAX_GRID = 4096

# element type -> (storage type, its value as double, f16's clamp to +-65505, exact)
_COMPARED = {
    "f16": ("uint16_t", "(double)hlo_f16_to_f32(x)", True, False),
    "bf16": ("uint16_t", "(double)hlo_bf16_to_f32(x)", False, False),
    "f32": ("float", "(double)x", False, False),
    "f64": ("double", "x", False, False),
    "f8e4m3fn": ("uint8_t", "(double)hlo_f8e4m3fn_to_f32(x)", False, False),
    "f8e5m2": ("uint8_t", "(double)hlo_f8e5m2_to_f32(x)", False, False),
    "s8": ("int8_t", "(double)x", False, False),
    "s16": ("int16_t", "(double)x", False, False),
    "s32": ("int32_t", "(double)x", False, False),
    "s64": ("int64_t", "(double)x", False, False),
    "u8": ("uint8_t", "(double)x", False, False),
    "u16": ("uint16_t", "(double)x", False, False),
    "u32": ("uint32_t", "(double)x", False, False),
    "u64": ("uint64_t", "(double)x", False, False),
    "pred": ("uint8_t", "(double)x", False, True),
}
COMPONENT = {"c64": "f32", "c128": "f64"}   # complex: real and imaginary parts in turn


def compared_as(element_type: str) -> str | None:
    """The kernel type a buffer of ``element_type`` is compared as (None: no kernel)."""
    t = COMPONENT.get(element_type, element_type)
    return t if t in _COMPARED else None


def _compare_kernel(t: str) -> str:
    ctype, load, clamp, exact = _COMPARED[t]
    if exact:
        verdict = "bool ok = false;"
    else:
        lines = []
        if clamp:
            lines.append("if (!isnan(da)) da = fmin(fmax(da, -65505.0), 65505.0);\n"
                         "      if (!isnan(db)) db = fmin(fmax(db, -65505.0), 65505.0);")
        lines.append("const double rel = fabs(da - db) / (fmax(fabs(da), fabs(db)) + 1.0);\n"
                     "      bool ok = rel < rtol || (isnan(da) && isnan(db)) ||\n"
                     "                (isinf(da) && isinf(db) && da == db);")
        verdict = "\n      ".join(lines)
    return f"""
extern "C" __global__ void hlo_compare_{t}(const {ctype}* a, const {ctype}* b, int64_t n,
                                           double rtol, unsigned long long* count) {{
  unsigned long long bad = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
    {ctype} x = a[i];
    double da = {load};
    x = b[i];
    double db = {load};
    if (da == db) continue;
    {verdict}
    if (!ok) ++bad;
  }}
  if (bad) atomicAdd(count, bad);
}}
"""


SOURCE_BODY = """
extern "C" __global__ void hlo_repeat_buffer(uint8_t* buf, int64_t repeat, int64_t size) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= repeat) return;
  const uint8_t v = buf[i];
  for (int64_t d = i + repeat; d < size; d += repeat) buf[d] = v;
}

extern "C" __global__ void hlo_count_differing(const uint8_t* p, int64_t n, int32_t pattern,
                                               unsigned long long* count) {
  unsigned long long bad = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    bad += p[i] != (uint8_t)pattern;
  if (bad) atomicAdd(count, bad);
}
""" + "".join(_compare_kernel(t) for t in _COMPARED)

# parameter C types of each kernel (cuda-sim's launcher needs them)
PARAMS = {"hlo_repeat_buffer": ["uint8_t*", "int64_t", "int64_t"],
          "hlo_count_differing": ["const uint8_t*", "int64_t", "int32_t",
                                  "unsigned long long*"],
          **{f"hlo_compare_{t}": [f"const {c[0]}*", f"const {c[0]}*", "int64_t", "double",
                                  "unsigned long long*"] for t, c in _COMPARED.items()}}


def source() -> str:
    from .program import prelude
    return prelude() + "\n" + SOURCE_BODY


def _grid(work: int) -> int:
    return max(1, min(-(-work // BLOCK), MAX_GRID))


class BufferKernels:
    """The three operations on ``device`` (``alloc``/``memset``/``download``), launched by
    ``launch(name, grid, block, [ctypes values])``."""

    def __init__(self, device, launch):
        self.device = device
        self.launch = launch
        self._counter = None

    def _count(self, name: str, grid: int, args: list) -> int:
        if self._counter is None:
            self._counter = self.device.alloc(8)
        self.device.memset(self._counter, 8)
        self.launch(name, grid, BLOCK, args + [ctypes.c_void_p(self._counter)])
        return int.from_bytes(self.device.download(self._counter, 8), "little")

    def repeat(self, addr: int, repeat: int, nbytes: int) -> bool:
        """Bytes ``[repeat, nbytes)`` of the buffer at ``addr`` := its first ``repeat``
        bytes, again and again."""
        if 0 < repeat < nbytes:
            self.launch("hlo_repeat_buffer", -(-repeat // BLOCK), BLOCK,
                        [ctypes.c_void_p(addr), ctypes.c_int64(repeat), ctypes.c_int64(nbytes)])
        return True

    def count_differing(self, addr: int, nbytes: int, byte: int) -> int:
        if nbytes <= 0:
            return 0
        return self._count("hlo_count_differing", _grid(nbytes),
                           [ctypes.c_void_p(addr), ctypes.c_int64(nbytes),
                            ctypes.c_int32(byte & 0xFF)])

    def mismatches(self, element_type: str, a: int, b: int, nbytes: int,
                   rtol: float) -> int | None:
        """Elements of the buffers at ``a`` and ``b`` that differ beyond ``rtol`` (None:
        no kernel for ``element_type``)."""
        t = compared_as(element_type)
        if t is None:
            return None
        n = nbytes // numpy_dtype(t).itemsize
        if n == 0:
            return 0
        return self._count(f"hlo_compare_{t}", _grid(n),
                           [ctypes.c_void_p(a), ctypes.c_void_p(b), ctypes.c_int64(n),
                            ctypes.c_double(rtol)])


def cuda_buffer_kernels(dev) -> BufferKernels:
    """On a CUDA device: the source compiled by NVRTC (cached) when first launched."""
    loaded: list = []

    def launch(name, grid, block, args):
        if not loaded:
            from .compiler import compile_cuda
            loaded.append(dev.load_module(compile_cuda(source(), dev.arch,
                                                       name="autotune_buffers.cu").cubin))
        dev.launch_function(loaded[0].function(name), (grid,), (block,),
                            [a.value or 0 for a in args], types=[type(a) for a in args])
    return BufferKernels(dev, launch)
