"""The CPU backend: the module's plan rendered to LLVM IR, optimised and JITted by
llvmlite as one native function for the whole entry computation.

    exe = compile(module)                   # plan -> LLVM IR -> object (disk cache) -> JIT
    leaves = exe.run([x, w])                # one native call
    exe.report()                            # what is native, what is a host library call

Parts: ``renderer.py`` (plan -> LLVM IR; kernels in ``kernels.py``, the op table in
``ops.py``, BLAS in ``blas.py``), ``compiler.py`` (llvmlite: optimisation, objects,
linking), ``cache.py`` (the disk cache), ``runtime.py`` (the one native call, host
library calls).
"""
from __future__ import annotations

import time

from ...codegen import make_plan
from ...errors import HloError
from .. import interpreter as _interp  # noqa: F401 - host handlers register on import

from ...fileutil import source_fingerprint  # noqa: E402,F401 - re-exported

RENDERER_VERSION = "cpu-1"
_SOURCE_FINGERPRINT: list = []


def _code_version() -> str:
    if not _SOURCE_FINGERPRINT:
        import os
        here = os.path.dirname(os.path.abspath(__file__))
        codegen = os.path.join(os.path.dirname(os.path.dirname(here)), "codegen")
        _SOURCE_FINGERPRINT.append(RENDERER_VERSION + ":" + source_fingerprint(here, codegen))
    return _SOURCE_FINGERPRINT[0]


class CompileArtifacts:
    """Everything one compile produced (the ``--stage`` outputs)."""

    def __init__(self):
        self.ir_no_opt = ""
        self.ir_with_opt = ""
        self.asm = ""
        self.obj = b""
        self.meta: dict = {}


def _options(debug_options, module=None):
    """The DebugOptions in force: the ones given, else the module's config's."""
    if debug_options is not None:
        return debug_options
    config = getattr(module, "config", None)
    if config is not None:
        return config.debug_options
    from ...flags import DebugOptions
    return DebugOptions()


def _flags_key(o) -> str:
    if o is None:
        return ""
    names = ("xla_backend_optimization_level", "xla_cpu_enable_fast_math",
             "xla_cpu_fast_math_honor_nans", "xla_cpu_fast_math_honor_infs",
             "xla_cpu_fast_math_honor_division", "xla_cpu_fast_math_honor_functions")
    return ";".join(f"{n}={getattr(o, n, None)}" for n in names)


def build(module, debug_options=None, want_asm: bool = False, use_blas: bool = True,
          check_steps: bool = False):
    """Plan, render, optimise and emit an object for ``module`` (no cache, no JIT)."""
    from . import compiler
    from .renderer import ModuleRenderer
    o = _options(debug_options, module)
    level = getattr(o, "xla_backend_optimization_level", 3) if o is not None else 3
    art = CompileArtifacts()
    t0 = time.perf_counter()
    mplan = make_plan(module)
    res = ModuleRenderer(mplan, use_blas=use_blas, check_steps=check_steps).render()
    tm = compiler.target_machine(level)
    res.module.triple = tm.triple
    res.module.data_layout = str(tm.target_data)
    text = str(res.module)
    text = compiler.apply_fast_math(text, compiler.fast_math_flags(o))
    art.ir_no_opt = text
    t1 = time.perf_counter()
    mod = compiler.parse(text)
    compiler.optimize(mod, tm, level)
    art.ir_with_opt = str(mod)
    t2 = time.perf_counter()
    art.obj = compiler.emit_object(mod, tm)
    if want_asm:
        art.asm = compiler.emit_assembly(mod, tm)
    t3 = time.perf_counter()
    art.meta = {
        "host": [[plan.computation.name, st.name] for st, plan in res.host_steps],
        "checked": check_steps, "shared_kernels": res.shared_kernels,
        "host_reasons": res.host_reasons, "native": res.native,
        "timings": {"plan_and_render_s": t1 - t0, "optimize_s": t2 - t1,
                    "codegen_s": t3 - t2},
    }
    return mplan, art, tm


class CpuExecutable:
    """``prepare`` (optional, ``module -> module``) is the compiler pipeline to run first
    (the CLI passes the ``cpu`` pipeline; the core never imports ``passes/``), named by
    ``prepare_key`` in the cache key.  The key is taken over the module *before*
    ``prepare`` and the entry stores the prepared module's text, so a cache hit skips
    both the pipeline and LLVM."""

    name = "cpu"

    def __init__(self, module, debug_options=None, cache: bool = True,
                 cache_dir: str | None = None, use_blas: bool = True,
                 check_steps: bool = False, prepare=None, prepare_key: str = ""):
        from . import compiler
        from .cache import ObjectCache, make_key
        if module.entry is None:
            raise HloError(f"module {module.name} has no entry computation")
        o = _options(debug_options, module)
        t0 = time.perf_counter()
        key = make_key(_code_version(), module.to_text(), _flags_key(o),
                       compiler.toolchain_id(), str(use_blas),
                       prepare_key if prepare is not None else "")
        self.cache = ObjectCache(cache_dir) if cache and not check_steps else None
        dumping = bool(o is not None and getattr(o, "xla_dump_to", ""))
        # a dump needs the IR, so it compiles even when the cache has the object
        hit = self.cache.get(key) if self.cache is not None and not dumping else None
        level = getattr(o, "xla_backend_optimization_level", 3) if o is not None else 3
        prepared = None
        if hit is not None:
            prepared = _parse_cached(hit[1])
            if prepared is None:
                self.cache.drop(key)
                hit = None
        self.cache_hit = hit is not None
        self.artifacts = None
        if hit is not None:
            obj, meta = hit
            module = prepared
            mplan = make_plan(module)
            tm = compiler.target_machine(level)
        else:
            if prepare is not None:
                module = prepare(module)
            mplan, art, tm = build(module, o, use_blas=use_blas, check_steps=check_steps)
            obj, meta = art.obj, dict(art.meta, hlo=module.to_text())
            self.artifacts = art
            if self.cache is not None:
                self.cache.put(key, obj, meta)
            if dumping:
                _dump(module, o, art, mplan)
        self.module = module
        self._load(mplan, obj, meta, tm, key, hit is not None, o, use_blas)
        self.compile_seconds = time.perf_counter() - t0

    def _load(self, mplan, obj, meta, tm, key, from_cache, o, use_blas):
        from . import compiler
        from .blas import gemm_symbols
        from .runtime import HostCalls, Runner
        steps = {(p.computation.name, s.name): (s, p) for p, s in mplan.steps()}
        try:
            host_steps = [steps[(c, n)] for c, n in meta["host"]]
        except (KeyError, TypeError, ValueError):
            host_steps = None
        imports = dict(compiler.external_symbols())
        imports.update(gemm_symbols())
        linked = None
        if host_steps is not None:
            self.host = HostCalls(host_steps)
            imports["hlo_cpu_host"] = self.host.address
            try:
                linked = compiler.link(obj, tm, imports)
            except HloError:
                if not from_cache:
                    raise
        if linked is None:  # a cached entry that does not load: drop it, rebuild once
            if self.cache is not None:
                self.cache.drop(key)
            mplan, art, tm = build(self.module, o, use_blas=use_blas)
            obj, meta = art.obj, dict(art.meta, hlo=self.module.to_text())
            if self.cache is not None:
                self.cache.put(key, obj, meta)
            steps = {(p.computation.name, s.name): (s, p) for p, s in mplan.steps()}
            self.host = HostCalls([steps[(c, n)] for c, n in meta["host"]])
            imports["hlo_cpu_host"] = self.host.address
            linked = compiler.link(obj, tm, imports)
            self.cache_hit = False
        self.plan = mplan
        self.meta = meta
        self.blas_threads = _blas_threads(mplan, meta, o)
        self.threads = kernel_threads(o)
        self.runner = Runner(linked, mplan, self.host, self.blas_threads, self.threads)

    def run(self, args) -> list:
        from ..interpreter import check_arguments
        args = check_arguments(self.module.entry, args)
        return self.runner.run(args)

    def report(self) -> str:
        native = self.meta.get("native", {})
        host = self.meta.get("host_reasons", {})
        par = sum(1 for v in native.values() if "parallel" in v)
        lines = [f"cpu backend: {len(native)} native steps ({par} split over "
                 f"{self.threads} threads), {len(host)} host library calls"]
        for name, why in host.items():
            lines.append(f"  host: %{name}: {why}")
        return "\n".join(lines)


THREADS_ENV = "HLO_OPT_CPU_THREADS"


def kernel_threads(options) -> int:
    """Threads a large kernel's outer loop is split over: 1 when
    ``xla_cpu_multi_thread_eigen`` is off, else ``$HLO_OPT_CPU_THREADS`` when set, else
    the CPUs this process may run on."""
    import os
    if options is not None and not getattr(options, "xla_cpu_multi_thread_eigen", True):
        return 1
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise HloError(f"{THREADS_ENV}={env!r}: expected a positive number of threads")
        return n
    return max(1, len(os.sched_getaffinity(0)))


def _blas_threads(mplan, meta, options) -> int:
    """OpenBLAS threads for this module's GEMMs: 1 when ``xla_cpu_multi_thread_eigen``
    is off or every GEMM is small (``blas.MULTI_THREAD_MIN_FLOPS``), else 0 (leave
    OpenBLAS's own setting)."""
    import os
    from .blas import MULTI_THREAD_MIN_FLOPS, flops, gemm_plan
    if options is not None and not getattr(options, "xla_cpu_multi_thread_eigen", True):
        return 1
    native = meta.get("native", {})
    biggest = 0
    for _, st in mplan.steps():
        if native.get(st.name) == "blas gemm":
            g = gemm_plan(st.instruction)
            if g is not None:
                biggest = max(biggest, flops(g))
    if biggest < MULTI_THREAD_MIN_FLOPS or len(os.sched_getaffinity(0)) < 2:
        return 1
    return 0


def _parse_cached(meta):
    """The prepared module stored in a cache entry, or None when it does not parse."""
    from ...text.parser import parse_hlo_modules
    try:
        return parse_hlo_modules(meta["hlo"], "<cpu cache>")[0]
    except (HloError, KeyError, IndexError, TypeError):
        return None


def _dump(module, options, art, mplan):
    """XLA:CPU's dump files: ``module_NNNN.NAME.ir-no-opt.ll``, ``...ir-with-opt.ll``
    and ``...cpu_after_optimizations-buffer-assignment.txt``."""
    from ...dump.naming import filename_for
    from ...dump.writer import DumpConfig, DumpDirectory
    config = DumpConfig.from_options(options)
    if not config.should_dump_module(module.name):
        return
    directory = DumpDirectory(config)
    for suffix, text in (("ir-no-opt.ll", art.ir_no_opt), ("ir-with-opt.ll", art.ir_with_opt),
                         ("cpu_after_optimizations-buffer-assignment.txt",
                          mplan.assignment.to_text() + "\n")):
        directory.write_text(filename_for(0, module.name, "", suffix), text, stdout_ok=False)


def compile(module, **options):  # noqa: A001 - XLA's verb
    return CpuExecutable(module, **options)
