"""CUDA C++ -> CUBIN (+ PTX) through NVRTC, cached on disk.

The cache key is the hash of the source, the options, the target arch and the NVRTC
version, so a hit skips NVRTC entirely (``CompiledModule.cached`` says so).  CUBIN is built
for the exact ``sm_XX`` of the device: the PTX NVRTC 13.5 emits is too new for a CUDA 13.0
driver to JIT, so PTX is kept only for ``--stage=ptx`` and dumps.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass

from ...errors import HloError
from . import toolchain

DEFAULT_OPTIONS = ("-std=c++17", "-default-device", "-fmad=true")


class CudaCompileError(HloError):
    """NVRTC or ptxas rejected generated code (an internal bug, reported with the log)."""


@dataclass
class CompiledModule:
    arch: str          # "sm_90"
    cubin: bytes
    ptx: str
    log: str
    cached: bool


def cache_dir() -> str:
    base = os.environ.get("HLO_OPT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hlo-opt")
    return os.path.join(base, "cuda")


def cache_key(source: str, arch: str, options=DEFAULT_OPTIONS) -> str:
    major, minor = toolchain.nvrtc_version()
    h = hashlib.sha256()
    for part in (source, arch, "\0".join(options), f"nvrtc {major}.{minor}"):
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()[:40]


def _read_cache(key: str, arch: str) -> CompiledModule | None:
    d = os.path.join(cache_dir(), key[:2], key)
    try:
        with open(d + ".cubin", "rb") as f:
            cubin = f.read()
        with open(d + ".ptx", encoding="utf-8") as f:
            ptx = f.read()
    except OSError:
        return None
    return CompiledModule(arch, cubin, ptx, "", True)


def _write_cache(key: str, mod: CompiledModule) -> None:
    d = os.path.join(cache_dir(), key[:2])
    try:
        os.makedirs(d, exist_ok=True)
        for ext, data in ((".ptx", mod.ptx.encode()), (".cubin", mod.cubin)):
            fd, tmp = tempfile.mkstemp(dir=d)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(d, key + ext))  # cubin last: its presence = complete
    except OSError:
        pass  # a read-only cache is not an error


def compile_cuda(source: str, arch: str = "sm_90", name: str = "module.cu",
                 options=DEFAULT_OPTIONS, use_cache: bool = True) -> CompiledModule:
    """Compile ``source`` for ``arch`` (``sm_XX``); raises CudaCompileError with NVRTC's log."""
    if not (arch.startswith("sm_") and arch[3:].rstrip("a").isdigit()):
        raise HloError(f"bad CUDA arch '{arch}' (expected sm_XX)")
    key = cache_key(source, arch, options) if use_cache else None
    if key:
        hit = _read_cache(key, arch)
        if hit is not None:
            return hit
    nv = toolchain.nvrtc()
    opts = [f"-arch={arch}", *options]
    inc = toolchain.runtime_include_dir()
    if inc:
        opts.append(f"-I{inc}")
    err, prog = nv.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(nv, err, "nvrtcCreateProgram")
    try:
        (res,) = nv.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log = _log(nv, prog)
        if res != nv.nvrtcResult.NVRTC_SUCCESS:
            tail = "\n".join(ln for ln in log.splitlines() if "error" in ln)[-2000:]
            raise CudaCompileError(f"NVRTC failed to compile {name} for {arch} "
                                   f"({getattr(res, 'name', res)}):\n{tail or log[-2000:]}")
        err, n = nv.nvrtcGetPTXSize(prog)
        _check(nv, err, "nvrtcGetPTXSize")
        buf = b" " * n
        _check(nv, nv.nvrtcGetPTX(prog, buf)[0], "nvrtcGetPTX")
        ptx = buf.rstrip(b"\0").decode()
        err, n = nv.nvrtcGetCUBINSize(prog)
        _check(nv, err, "nvrtcGetCUBINSize")
        cubin = b" " * n
        _check(nv, nv.nvrtcGetCUBIN(prog, cubin)[0], "nvrtcGetCUBIN")
    finally:
        nv.nvrtcDestroyProgram(prog)
    mod = CompiledModule(arch, cubin, ptx, log, False)
    if key:
        _write_cache(key, mod)
    return mod


def compilation_parts(options) -> int:
    """How many translation units a program's kernels are compiled in, in parallel: XLA's
    ``--xla_gpu_enable_llvm_module_compilation_parallelism`` splits the module (off by
    default, as XLA), into ``--xla_gpu_force_compilation_parallelism`` parts (0: one per
    CPU core)."""
    if options is None or not options.xla_gpu_enable_llvm_module_compilation_parallelism:
        return 1
    return max(1, options.xla_gpu_force_compilation_parallelism or os.cpu_count() or 1)


def compile_cuda_parts(sources: list[str], arch: str, name: str,
                       use_cache: bool = True) -> list[CompiledModule]:
    """Each source compiled by NVRTC (which releases the GIL) on a thread of its own."""
    from concurrent.futures import ThreadPoolExecutor
    if len(sources) == 1:
        return [compile_cuda(sources[0], arch, name=f"{name}.cu", use_cache=use_cache)]
    with ThreadPoolExecutor(min(len(sources), os.cpu_count() or 1)) as pool:
        return list(pool.map(
            lambda i: compile_cuda(sources[i], arch, name=f"{name}.part{i}.cu",
                                   use_cache=use_cache), range(len(sources))))


def merged(parts: list[CompiledModule]) -> CompiledModule:
    """The parts as one record for dumps and ``--stage=ptx``: their PTX and logs in turn
    (the cubins stay per part: :class:`~.driver.LoadedModules` loads them)."""
    if len(parts) == 1:
        return parts[0]
    return CompiledModule(parts[0].arch, b"", "\n".join(p.ptx for p in parts),
                          "\n".join(p.log for p in parts if p.log),
                          all(p.cached for p in parts))


def _check(nv, err, what):
    if err != nv.nvrtcResult.NVRTC_SUCCESS:
        raise CudaCompileError(f"{what} failed: {nv.nvrtcGetErrorString(err)[1].decode()}")


def _log(nv, prog) -> str:
    err, n = nv.nvrtcGetProgramLogSize(prog)
    if err != nv.nvrtcResult.NVRTC_SUCCESS or n <= 1:
        return ""
    buf = b" " * n
    nv.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def ptxas_check(ptx: str, arch: str) -> str:
    """Assemble ``ptx`` with the wheel's ptxas for ``arch``; returns its -v report."""
    exe = toolchain.ptxas_path()
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "m.ptx")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        r = subprocess.run([exe, f"-arch={arch}", "-v", src, "-o", os.path.join(d, "m.cubin")],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise CudaCompileError(f"ptxas rejected the PTX for {arch}:\n{r.stderr}")
    return r.stderr


def kernel_resources(ptxas_report: str) -> dict:
    """Registers / spill bytes per kernel from a ``ptxas -v`` report."""
    out, cur = {}, None
    for line in ptxas_report.splitlines():
        if "Compiling entry function" in line:
            cur = line.split("'")[1]
            out[cur] = {}
        elif cur and "Used" in line and "registers" in line:
            out[cur]["registers"] = int(line.split("Used")[1].split("registers")[0])
        elif cur and "spill stores" in line:
            out[cur]["spill_stores"] = int(line.split("bytes spill stores")[0].split()[-1])
    return out


def dumps(mod: CompiledModule) -> str:
    return json.dumps({"arch": mod.arch, "cubin_bytes": len(mod.cubin), "cached": mod.cached})
