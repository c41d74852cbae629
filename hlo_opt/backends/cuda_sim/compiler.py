"""cuda-sim's compiler: the very ``.cu`` source the CUDA backend generates, compiled by the
host C++ compiler against ``emu.h`` into a shared library, cached on disk by content.

Each kernel gets an ``extern "C"`` launcher ``sim_launch_<name>(grid, block, fibered,
args)`` whose ``args`` are pointers to the argument values, as ``cuLaunchKernel``'s
``kernelParams``.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources

from ...errors import HloError, UnsupportedError

CXXFLAGS = ("-std=c++20", "-O1", "-fPIC", "-shared", "-w", "-fno-strict-aliasing")


class SimCompileError(HloError):
    """The host compiler rejected generated code (an internal bug; the log says where)."""


def emu_header() -> str:
    return resources.files(__package__).joinpath("emu.h").read_text(encoding="utf-8")


def host_compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        raise UnsupportedError("cuda-sim needs a host C++ compiler (g++ or clang++): "
                               "install one (e.g. apt-get install g++)")
    return cxx


def launcher_source(kernels) -> str:
    """``kernels``: (name, [ctype of each parameter]) pairs."""
    out = []
    for name, ctypes_ in kernels:
        call = ", ".join(f"*({t}*)args[{i}]" for i, t in enumerate(ctypes_))
        out.append(
            f'extern "C" int sim_launch_{name}(unsigned gx, unsigned gy, unsigned gz, '
            f'unsigned bx, unsigned by, unsigned bz, int fibered, void** args) {{\n'
            f'  return emu::launch("{name}", dim3(gx, gy, gz), dim3(bx, by, bz), fibered != 0,'
            f' [&] {{ {name}({call}); }});\n}}\n')
    return "".join(out)


def sim_cache_dir() -> str:
    base = os.environ.get("HLO_OPT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hlo-opt")
    return os.path.join(base, "cuda-sim")


def _precompiled_header(cxx: str, flags: list) -> str:
    """emu.h + the kernel prelude as a precompiled header (built once per flag set; a
    module then compiles in ~0.3 s instead of ~1 s).  Returns its directory."""
    from ..cuda.program import prelude
    text = "#include <cstddef>\n" + emu_header() + "\n" + prelude() + "\n"
    key = hashlib.sha256("\1".join([text, cxx, *flags]).encode()).hexdigest()[:24]
    d = os.path.join(sim_cache_dir(), "pch-" + key)
    if os.path.exists(os.path.join(d, "hlo_sim.h.gch")):
        return d
    os.makedirs(os.path.dirname(d), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(d))
    with open(os.path.join(tmp, "hlo_sim.h"), "w", encoding="utf-8") as f:
        f.write(text)
    hdr_flags = [f for f in flags if f != "-shared"]
    r = subprocess.run([cxx, *hdr_flags, "-x", "c++-header", os.path.join(tmp, "hlo_sim.h"),
                        "-o", os.path.join(tmp, "hlo_sim.h.gch")], capture_output=True, text=True)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SimCompileError(f"cuda-sim: the emulation header does not compile:\n{r.stderr[-4000:]}")
    try:
        os.rename(tmp, d)
    except OSError:  # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return d


def compile_sim(cuda_source: str, kernels, debug: bool = True) -> "SimLibrary":
    """Compile for the CPU; ``debug`` turns on bounds checks of every buffer access."""
    return compile_sim_many([(cuda_source, kernels)], debug)[0]


def compile_sim_many(units, debug: bool = True) -> list:
    """Several translation units ``(cuda_source, kernels)``, compiled concurrently (one
    host-compiler process each), cached by content."""
    cxx = host_compiler()
    flags = list(CXXFLAGS) + (["-DEMU_DEBUG"] if debug else [])
    pch = _precompiled_header(cxx, flags)
    flags = flags + ["-I", pch]
    jobs, libs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (cuda_source, kernels) in enumerate(units):
            tu = '#include "hlo_sim.h"\n' + cuda_source + "\n" + launcher_source(kernels)
            key = hashlib.sha256("\1".join([tu, cxx, *flags]).encode()).hexdigest()[:40]
            so = os.path.join(sim_cache_dir(), key[:2], key + ".so")
            libs.append((so, [k[0] for k in kernels]))
            if os.path.exists(so):
                continue
            os.makedirs(os.path.dirname(so), exist_ok=True)
            src = os.path.join(tmp, f"module{i}.cc")
            with open(src, "w", encoding="utf-8") as f:
                f.write(tu)
            out = os.path.join(tmp, f"module{i}.so")
            p = subprocess.Popen([cxx, *flags, src, "-o", out], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            jobs.append((p, out, so))
        for p, out, so in jobs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise SimCompileError(f"cuda-sim: the host compiler rejected the kernels:\n"
                                      f"{err[-4000:]}")
            fd, part = tempfile.mkstemp(dir=os.path.dirname(so))
            os.close(fd)
            shutil.copyfile(out, part)
            os.replace(part, so)
    return [SimLibrary(so, names) for so, names in libs]


class SimKernelError(HloError):
    """A kernel failed under cuda-sim (out-of-bounds access, deadlock)."""


class SimLibrary:
    def __init__(self, path: str, names):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.lib.emu_last_error.restype = ctypes.c_char_p
        self.fns = {}
        for n in names:
            fn = getattr(self.lib, f"sim_launch_{n}")
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
            self.fns[n] = fn

    def launch(self, name: str, grid, block, fibered: bool, arg_values) -> None:
        """``arg_values``: ctypes objects (c_void_p for buffers, c_int64 ... for scalars)."""
        ptrs = (ctypes.c_void_p * max(len(arg_values), 1))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in arg_values])
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        rc = self.fns[name](*g, *b, int(fibered), ptrs)
        if rc:
            raise SimKernelError("cuda-sim: " + self.lib.emu_last_error().decode(errors="replace"))
