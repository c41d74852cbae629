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

RENDERER_VERSION = "cpu-1"


class CompileArtifacts:
    """Everything one compile produced (the ``--stage`` outputs)."""

    def __init__(self):
        self.ir_no_opt = ""
        self.ir_with_opt = ""
        self.asm = ""
        self.obj = b""
        self.meta: dict = {}


def _options(debug_options):
    if debug_options is None:
        cfg = None
        try:
            from ...flags import DebugOptions
            cfg = DebugOptions()
        except Exception:  # noqa: BLE001
            pass
        return cfg
    return debug_options


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
    o = _options(debug_options)
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
        "checked": check_steps,
        "host_reasons": res.host_reasons, "native": res.native,
        "timings": {"plan_and_render_s": t1 - t0, "optimize_s": t2 - t1,
                    "codegen_s": t3 - t2},
    }
    return mplan, art, tm


class CpuExecutable:
    name = "cpu"

    def __init__(self, module, debug_options=None, cache: bool = True,
                 cache_dir: str | None = None, use_blas: bool = True,
                 check_steps: bool = False):
        from . import compiler
        from .blas import gemm_symbols
        from .cache import ObjectCache, make_key
        from .runtime import HostCalls, Runner
        if module.entry is None:
            raise HloError(f"module {module.name} has no entry computation")
        self.module = module
        o = _options(debug_options)
        t0 = time.perf_counter()
        text = module.to_text()
        key = make_key(RENDERER_VERSION, text, _flags_key(o), compiler.toolchain_id(),
                       str(use_blas))
        self.cache = ObjectCache(cache_dir) if cache and not check_steps else None
        dumping = bool(o is not None and getattr(o, "xla_dump_to", ""))
        # a dump needs the IR, so it compiles even when the cache has the object
        hit = self.cache.get(key) if self.cache is not None and not dumping else None
        self.cache_hit = hit is not None
        if hit is not None:
            obj, meta = hit
            mplan = make_plan(module)
            level = getattr(o, "xla_backend_optimization_level", 3) if o is not None else 3
            tm = compiler.target_machine(level)
            self.artifacts = None
        else:
            mplan, art, tm = build(module, o, use_blas=use_blas, check_steps=check_steps)
            obj, meta = art.obj, art.meta
            self.artifacts = art
            if self.cache is not None:
                self.cache.put(key, obj, meta)
            if dumping:
                _dump(module, o, art, mplan)
        self.plan = mplan
        self.meta = meta
        steps = {(p.computation.name, s.name): (s, p) for p, s in mplan.steps()}
        try:
            host_steps = [steps[(c, n)] for c, n in meta["host"]]
        except (KeyError, TypeError, ValueError):
            if self.cache is not None:
                self.cache.drop(key)
            raise HloError("internal error: a cached CPU object does not match its module "
                           "plan; it was dropped, run again") from None
        self.host = HostCalls(host_steps)
        imports = dict(compiler.external_symbols())
        imports.update(gemm_symbols())
        imports["hlo_cpu_host"] = self.host.address
        try:
            linked = compiler.link(obj, tm, imports)
        except HloError:
            if self.cache is not None and hit is not None:
                self.cache.drop(key)  # a corrupt object: rebuild once
                mplan, art, tm = build(module, o, use_blas=use_blas)
                obj, self.meta = art.obj, art.meta
                self.cache.put(key, obj, self.meta)
                linked = compiler.link(obj, tm, imports)
            else:
                raise
        self.runner = Runner(linked, mplan, self.host)
        self.compile_seconds = time.perf_counter() - t0

    def run(self, args) -> list:
        from ..interpreter import check_arguments
        args = check_arguments(self.module.entry, args)
        return self.runner.run(args)

    def report(self) -> str:
        native = self.meta.get("native", {})
        host = self.meta.get("host_reasons", {})
        lines = [f"cpu backend: {len(native)} native steps, {len(host)} host library calls"]
        for name, why in host.items():
            lines.append(f"  host: %{name}: {why}")
        return "\n".join(lines)


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
