"""llvmlite ownership: target machine, optimisation, object emission, the disk cache,
and linking an object into an ORC LLJIT with its external symbols bound by name.

Optimisation is the new pass manager at ``xla_backend_optimization_level`` (speed level
0-3; XLA's default 3) with loop and SLP vectorisation (loop unrolling off: see
``optimize``), for the host CPU's name and features.  ``xla_cpu_enable_fast_math`` (off by default, as in XLA) adds LLVM fast-math
flags to float arithmetic, minus ``nnan``/``ninf``/``arcp``/``afn`` per
``xla_cpu_fast_math_honor_{nans,infs,division,functions}``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import threading

import llvmlite
import llvmlite.binding as llvm

from ...errors import HloError
from . import pool
from .ops import LIBM

_INIT = threading.Lock()
_initialised = False


def _init():
    global _initialised
    with _INIT:
        if not _initialised:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialised = True


_HOST: list = []
_TMS: dict = {}
_LLJITS: dict = {}


def host_cpu() -> tuple[str, str]:
    if not _HOST:
        _init()
        _HOST.append((llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()))
    return _HOST[0]


def target_machine(opt_level: int = 3):
    """One target machine per optimisation level per process."""
    level = max(0, min(int(opt_level), 3))
    tm = _TMS.get(level)
    if tm is None:
        tm = _TMS[level] = _make_target_machine(level)
    return tm


def _make_target_machine(opt_level: int):
    _init()
    name, features = host_cpu()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=name, features=features,
                                        opt=max(0, min(int(opt_level), 3)),
                                        codemodel="jitdefault", jit=True)


def toolchain_id() -> str:
    name, features = host_cpu()
    return (f"llvmlite {llvmlite.__version__}; LLVM {'.'.join(map(str, llvm.llvm_version_info))}"
            f"; cpu {name}; features {features}")


_FLOAT_OPS = re.compile(r"= (fadd|fsub|fmul|fdiv|frem|fneg) ")


def fast_math_flags(options) -> tuple[str, ...]:
    if options is None or not getattr(options, "xla_cpu_enable_fast_math", False):
        return ()
    flags = ["reassoc", "contract", "nsz"]
    if not getattr(options, "xla_cpu_fast_math_honor_nans", True):
        flags.append("nnan")
    if not getattr(options, "xla_cpu_fast_math_honor_infs", True):
        flags.append("ninf")
    if not getattr(options, "xla_cpu_fast_math_honor_division", True):
        flags.append("arcp")
    if not getattr(options, "xla_cpu_fast_math_honor_functions", True):
        flags.append("afn")
    return tuple(flags)


def apply_fast_math(ir_text: str, flags) -> str:
    if not flags:
        return ir_text
    f = " ".join(flags)
    return _FLOAT_OPS.sub(lambda m: f"= {m.group(1)} {f} ", ir_text)


def parse(ir_text: str):
    _init()
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as e:
        raise HloError(f"internal error: the CPU backend produced invalid LLVM IR: "
                       f"{str(e).splitlines()[0]}") from e
    return mod


def optimize(mod, tm, level: int = 3):
    pto = llvm.create_pipeline_tuning_options(speed_level=max(0, min(int(level), 3)))
    pto.loop_vectorization = level >= 2
    pto.slp_vectorization = level >= 2
    # Full unrolling of the kernels' constant-trip loops made objects 20x larger and
    # codegen 30x slower (softmax: 7.1 s vs 0.05 s) for the same run time; vectorised
    # loops are still interleaved.
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def emit_object(mod, tm) -> bytes:
    return tm.emit_object(mod)


def emit_assembly(mod, tm) -> str:
    return tm.emit_assembly(mod)


# ---- external symbols --------------------------------------------------------------------
_SYMS: dict | None = None
_LIBM_EXTRA = ("exp", "log", "sin", "cos", "pow", "exp2", "log2", "log10", "fmin", "fmax",
               "floor", "ceil", "round", "trunc", "roundeven", "rint", "nearbyint",
               "sqrt", "fma", "ldexp", "frexp", "exp10")


def external_symbols() -> dict:
    """name -> address of the C library functions compiled code may call."""
    global _SYMS
    if _SYMS is not None:
        return _SYMS
    out = {}
    libs = []
    for name in ("m", "c"):
        path = ctypes.util.find_library(name)
        if path:
            try:
                libs.append(ctypes.CDLL(path))
            except OSError:
                pass
    libs.append(ctypes.CDLL(None))
    names = set()
    for n in LIBM + _LIBM_EXTRA:
        names.update({n, n + "f"})
    names.update({"sincos", "sincosf", "memcpy", "memmove", "memset", "malloc", "free"})
    names.update(pool.LIBC)   # the worker pool's threads and locks
    for n in sorted(names):
        for lib in libs:
            try:
                out[n] = ctypes.cast(getattr(lib, n), ctypes.c_void_p).value
                break
            except AttributeError:
                continue
    _SYMS = out
    return out


class Linked:
    """A loaded object: keeps the LLJIT and the library alive; ``entry`` is the address
    of ``hlo_entry``, ``threads`` that of ``hlo_cpu_threads``."""

    def __init__(self, lljit, lib, entry: int, threads: int = 0):
        self.lljit, self.lib, self.entry = lljit, lib, entry
        self.threads = threads    # address of the i64 ``hlo_cpu_threads``


_COUNTER = [0]


def _lljit(tm):
    lljit = _LLJITS.get(id(tm))
    if lljit is None:
        lljit = _LLJITS[id(tm)] = llvm.create_lljit_compiler(tm)
    return lljit


_POOL: list = []        # [address of hlo_pool_run, its library (never freed)]
_POOL_LOCK = threading.Lock()


def pool_address(tm) -> int:
    """The address of ``hlo_pool_run`` (``pool.py``): its module compiled and linked
    the first time an object needs it, one pool per process.  Its library stays loaded
    until the process exits: the pool's detached workers run its code."""
    with _POOL_LOCK:
        if not _POOL:
            _init()
            mod = pool.pool_module(tm.triple, len(os.sched_getaffinity(0)))
            mod.triple = tm.triple
            mod.data_layout = str(tm.target_data)
            native = optimize(parse(str(mod)), tm, 2)
            b = llvm.JITLibraryBuilder().add_object_img(emit_object(native, tm))
            syms = external_symbols()
            for name in pool.LIBC:
                if not syms.get(name):
                    raise HloError(f"the CPU backend's thread pool needs {name}, which "
                                   "this process's C library does not provide")
                b = b.import_symbol(name, syms[name])
            try:
                lib = b.export_symbol(pool.POOL_RUN).link(_lljit(tm), "hlo_pool")
            except RuntimeError as e:
                raise HloError(f"the CPU backend could not link its thread pool: {e}") \
                    from e
            _POOL.extend([lib[pool.POOL_RUN], lib])
        return _POOL[0]


def link(obj: bytes, tm, imports: dict) -> Linked:
    """Load ``obj`` into the process's LLJIT for ``tm`` (one per target machine; each
    module is its own library, freed when its ``Linked`` goes away).  An object that
    calls the thread pool gets ``hlo_pool_run`` too."""
    _init()
    lljit = _lljit(tm)
    if pool.POOL_RUN.encode() in obj and pool.POOL_RUN not in imports:
        imports = dict(imports, **{pool.POOL_RUN: pool_address(tm)})
    b = llvm.JITLibraryBuilder().add_object_img(obj)
    for name, addr in imports.items():
        if addr:
            b = b.import_symbol(name, addr)
    b = b.export_symbol("hlo_entry").export_symbol("hlo_cpu_threads")
    _COUNTER[0] += 1
    try:
        lib = b.link(lljit, f"hlo_module_{_COUNTER[0]}")
    except RuntimeError as e:
        raise HloError(f"the CPU backend could not link its object: {e}") from e
    return Linked(lljit, lib, lib["hlo_entry"], lib["hlo_cpu_threads"])
