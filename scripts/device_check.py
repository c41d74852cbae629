"""The CUDA backend's proof on a GPU (``scripts/device_check.sh`` runs it): correctness
of every sample and JAX benchmark module against the interpreter, compute-sanitizer
memcheck of the samples, bandwidth of our fused kernels against a device-to-device copy,
whole-module time against XLA:GPU (JAX, same machine, same run) and a bf16 gemm through
our NVRTC kernel and cuBLASLt.  Needs no network.  Without a GPU it runs the parts that
make sense under ``cuda-sim`` (so the script itself is tested on every machine).

    python scripts/device_check.py --out FILE [--backend cuda|cuda-sim] [--quick]
        [--section samples|jax|performance|gemm|autotune|programs|memcheck|sweep]

``--quick`` fits what is left of a device lease: no raw-pipeline run of modules over
1,000 instructions, and smaller time budgets for the autotuning and program sections.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LINES: list = []
OUT_FILE: list = []   # the figures file, written line by line (a timeout keeps what ran)


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)
    if OUT_FILE:
        with open(OUT_FILE[0], "a", encoding="utf-8") as f:
            f.write(line + "\n")


def samples():
    return sorted(glob.glob(os.path.join(ROOT, "sample_modules", "*.hlo")))


def jax_small():
    return sorted(glob.glob(os.path.join(ROOT, "benchmarks", "jax_modules", "*.hlo")))


# ---- 1. correctness --------------------------------------------------------------------------
QUICK: list = []   # --quick: the raw pipeline only for modules under QUICK_RAW_LIMIT
QUICK_RAW_LIMIT = 1000     # instructions


def correctness(backend: str, paths, pipelines=(None, "gpu")) -> tuple[int, int]:
    from hlo_opt.api import load_all
    from hlo_opt.backends.cuda.check import check_module
    ok = total = 0
    for path in paths:
        for m in load_all(path):
            for p in pipelines:
                size = sum(len(c.instructions) for c in m.computations)
                if QUICK and p is None and size > QUICK_RAW_LIMIT:
                    say(f"  SKIP {os.path.basename(path)} [raw]: --quick, {size} instructions")
                    continue
                t = time.perf_counter()
                r = check_module(m, backend, pipeline=p)
                if r.status == "skip":
                    say(f"  SKIP {os.path.basename(path)} [{p or 'raw'}]: {r.detail[:120]}")
                    continue
                total += 1
                ok += r.status == "pass"
                say(f"  {r.status.upper():8s} {os.path.basename(path):28s} [{p or 'raw':3s}] "
                    f"{r.kernels:3d} kernels {time.perf_counter() - t:6.2f}s {r.detail[:400]}")
    return ok, total


# ---- 2. compute-sanitizer -------------------------------------------------------------------
def memcheck(timeout: int) -> str:
    exe = _which("compute-sanitizer") or next(iter(glob.glob(
        "/usr/local/cuda*/bin/compute-sanitizer") + glob.glob(
        "/opt/nvidia/*/compute-sanitizer/compute-sanitizer")), None)
    if not exe:
        return "compute-sanitizer not found"
    cmd = [exe, "--tool", "memcheck", "--error-exitcode", "99", "--print-limit", "20",
           sys.executable, os.path.abspath(__file__), "--section", "samples-only",
           "--out", os.devnull] + (["--quick"] if QUICK else [])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"memcheck timed out after {timeout}s"
    tail = [ln for ln in (r.stdout + r.stderr).splitlines() if "ERROR SUMMARY" in ln
            or "Invalid" in ln or "========= " in ln][:12]
    return f"exit {r.returncode}; " + " | ".join(tail[-6:])


def _which(name):
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


# ---- shared: a module compiled for the device with arguments resident -------------------------
class Resident:
    """A module after the gpu pipeline, compiled, its arguments uploaded once; ``step()``
    runs the entry thunks (graph replay after warm-up) without host transfers."""

    def __init__(self, module, backend, config=None):
        from hlo_opt import passes_api
        from hlo_opt.backends import compile as compile_module
        from hlo_opt.backends.cuda.runtime import Frame, to_physical
        from hlo_opt.backends.interpreter.literals import random_arguments
        from hlo_opt.flags import DebugOptions
        self.module = passes_api.optimize(module.clone(), DebugOptions.from_sources([]),
                                          pipeline="gpu")
        self.exe = compile_module(self.module, backend, **({"config": config} if config else {}))
        self.runner = self.exe.runner()
        dev = self.runner.dev
        params = sorted(self.module.entry.parameters, key=lambda q: q.parameter_number)
        args = random_arguments(self.module, 3)
        frame = {}
        self.in_bytes = 0
        for n, (p, a) in enumerate(zip(params, args)):
            data = to_physical(a, p.shape)
            buf = dev.alloc(max(len(data), 16))
            dev.upload(buf, data)
            frame[(n, 0)] = buf
            self.in_bytes += len(data)
        self.frame = Frame(frame)
        root = self.module.entry.root.shape
        self.out_bytes = sum(s.num_elements() * s.dtype.itemsize
                             for s in (root.leaves() if root.is_tuple() else [root]))
        self.dev = dev
        self.kernels = len(self.exe.program.kernels)
        self.kinds = {}
        for t in self.exe.program.entry.thunks:
            self.kinds[t.kind] = self.kinds.get(t.kind, 0) + 1

    def step(self):
        self.runner.execute(self.exe.program.entry, self.frame)

    def time(self, iters: int) -> float:
        for _ in range(3):
            self.step()
        self.dev.sync()
        t = time.perf_counter()
        for _ in range(iters):
            self.step()
        self.dev.sync()
        return (time.perf_counter() - t) / iters


def copy_time(dev, nbytes: int, iters: int) -> float:
    a, b = dev.alloc(nbytes), dev.alloc(nbytes)
    for _ in range(3):
        dev.copy(b, a, nbytes)
    dev.sync()
    t = time.perf_counter()
    for _ in range(iters):
        dev.copy(b, a, nbytes)
    dev.sync()
    return (time.perf_counter() - t) / iters


def large_modules(scale: str):
    """(name, HloModule, jax fn, jax args) for the benchmark functions at ``scale``."""
    from hlo_opt.api import parse_hlo
    sys.path.insert(0, os.path.join(ROOT, "benchmarks", "jax_modules"))
    import generate
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    out = []
    if jax is None:  # the committed small modules, no XLA:GPU to compare with
        from hlo_opt.api import load
        for p in jax_small():
            out.append((os.path.basename(p)[:-4], load(p), None, None))
        return out
    n, d = generate.SIZES[scale]
    for name, (fn, spec) in generate.functions(jnp, jax).items():
        args = generate.arguments(jnp, spec, n, d)
        key = jax.random.PRNGKey(0)
        args = [jax.random.normal(key, a.shape, jnp.float32).astype(a.dtype) for a in args]
        text = generate.hlo_text(fn, args, jax)
        out.append((name, parse_hlo(text, f"{name}.hlo"), jax.jit(fn), args))
    return out


def _xla_name() -> str:
    import jax
    return "XLA:" + jax.default_backend().upper()


def _versus_jax(r, jfn, jargs) -> str:
    """Our result on XLA:GPU's arguments against XLA:GPU's result (XLA's bounds)."""
    import numpy as np
    from hlo_opt.backends.interpreter.literals import compare_results, result_shapes
    try:
        want = jfn(*jargs)
        want = [np.asarray(x) for x in (want if isinstance(want, (tuple, list)) else [want])]
        got = r.exe.run([np.asarray(a) for a in jargs])
        shapes = result_shapes(r.module)
        bound = 2e-2 if any(getattr(s, "element_type", "") == "bf16" for s in shapes) else 1e-3
        rows = compare_results(got, want, shapes, bound, bound)
        worst = max(rows, key=lambda x: x.max_abs)
        verdict = ("==" if all(x.ok for x in rows) else "!=") + " " + _xla_name()
        return f"{verdict} (max abs {worst.max_abs:.1e}, rel {worst.max_rel:.1e})"
    except Exception as e:  # noqa: BLE001 - a report
        return f"vs XLA:GPU failed: {type(e).__name__}: {str(e)[:120]}"


def jax_time(fn, args, iters: int) -> float:
    for _ in range(3):
        r = fn(*args)
    _block(r)
    t = time.perf_counter()
    for _ in range(iters):
        r = fn(*args)
    _block(r)
    return (time.perf_counter() - t) / iters


def _block(r):
    import jax
    for x in jax.tree_util.tree_leaves(r):
        x.block_until_ready()


# ---- 3 + 4. bandwidth and whole-module time -----------------------------------------------------
def performance(backend: str, scale: str, iters: int):
    mods = large_modules(scale)
    ratios = []
    bw_rows = []
    for name, m, jfn, jargs in mods:
        try:
            r = Resident(m, backend)
            t_ours = r.time(iters)
        except Exception as e:  # noqa: BLE001 - reported
            say(f"  {name:14s} ERROR {type(e).__name__}: {str(e)[:200]}")
            continue
        nbytes = r.in_bytes + r.out_bytes
        t_copy = copy_time(r.dev, max(nbytes // 2, 1), iters)
        bw = nbytes / t_ours
        bw_copy = 2 * max(nbytes // 2, 1) / t_copy
        other = ", ".join(f"{v} {k}" for k, v in r.kinds.items() if k != "launch")
        line = (f"  {name:14s} {r.kernels} kernel(s){' + ' + other if other else ''} "
                f"ours {t_ours * 1e6:9.1f} us "
                f"{bw / 1e9:7.1f} GB/s = {100 * bw / bw_copy:5.1f}% of copy "
                f"({bw_copy / 1e9:.0f} GB/s)")
        if r.kinds == {"launch": 1}:
            bw_rows.append((name, bw / bw_copy))
        if jfn is not None:
            line += "; " + _versus_jax(r, jfn, jargs)
            t_jax = jax_time(jfn, jargs, iters)
            ratios.append((name, t_ours / t_jax))
            line += f"; {_xla_name()} {t_jax * 1e6:9.1f} us; ours/XLA {t_ours / t_jax:5.2f}x"
        say(line)
        try:
            pr = r.exe.runner(profile=True)
            pr.times.clear()
            for _ in range(3):
                pr.execute(r.exe.program.entry, r.frame)
            say("      per kernel: " + ", ".join(
                f"{x['name']} {x['time_us']:.1f}us" for x in pr.profile_rows()[:6]))
        except Exception as e:  # noqa: BLE001
            say(f"      profile failed: {type(e).__name__}: {str(e)[:120]}")
    if bw_rows:
        say("  single-kernel modules, bandwidth vs copy: " + ", ".join(
            f"{n} {100 * x:.0f}%" for n, x in bw_rows) + " (target >= 85%)")
    if ratios:
        g = math.exp(sum(math.log(x) for _, x in ratios) / len(ratios))
        say(f"  whole-module time ours/{_xla_name()} geometric mean {g:.2f}x over {len(ratios)} "
            f"modules (target <= 1.0x)")


# ---- launch configurations (what the autotuner will search) -----------------------------------
def sweep(backend: str, scale: str, iters: int):
    from hlo_opt.backends.cuda.emitters import LaunchConfig
    configs = [LaunchConfig(), LaunchConfig(max_blocks_per_sm=64), LaunchConfig(block=512,
               max_blocks_per_sm=8), LaunchConfig(block=128, max_blocks_per_sm=32),
               LaunchConfig(unroll=1), LaunchConfig(row_threads=32),
               LaunchConfig(tile_transposes=False)]
    mods = {n: m for n, m, _, _ in large_modules(scale)}
    for name in ("gelu_bias", "softmax", "rowsum", "transpose_add", "bf16_residual"):
        if name not in mods:
            continue
        cells = []
        for c in configs:
            try:
                t = Resident(mods[name], backend, c).time(iters)
                cells.append(f"{t * 1e6:.0f}")
            except Exception as e:  # noqa: BLE001
                cells.append(type(e).__name__)
        say(f"  {name:14s} us: " + " | ".join(cells))
    say("  columns: default (block 256, 16 blocks/SM cap, 4-wide) | cap 64 | block 512 cap 8 "
        "| block 128 cap 32 | scalar | warp per row | no transpose tiles")


# ---- 5. gemm -------------------------------------------------------------------------------------
AUX_GEMM = (
    "HloModule aux_gemm\nENTRY e {\n"
    "  %a = f32[256,384]{1,0} parameter(0)\n"
    "  %b = f32[384,512]{1,0} parameter(1)\n"
    "  %bias = f32[512]{0} parameter(2)\n"
    "  ROOT %g = (f32[256,512]{1,0}, f32[256,512]{1,0}, s8[4194304]{0}) custom-call(%a, %b, "
    "%bias), custom_call_target=\"__cublas$lt$matmul\", backend_config={\"gemm_backend_config"
    "\":{\"alpha_real\":1,\"alpha_imag\":0,\"beta\":0,\"dot_dimension_numbers\":{"
    "\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"0\"],"
    "\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"epilogue\":\"EPILOGUE\"}}\n}")


def aux_gemms():
    """The cuBLASLt epilogues with an aux output (the pre-activation) against the
    interpreter: the value and the aux."""
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends.cuda.check import check_module
    for epi in ("GELU_AUX", "BIAS_GELU_AUX"):
        text = AUX_GEMM.replace("EPILOGUE", epi)
        if epi == "GELU_AUX":
            text = text.replace(", %bias)", ")").replace(
                "  %bias = f32[512]{0} parameter(2)\n", "")
        r = check_module(parse_hlo(text, f"{epi}.hlo"), "cuda")
        say(f"  {epi:14s} f32[256,384] x [384,512] with aux output: {r.status} {r.detail}")


def gemm(sizes):
    import numpy as np
    import ml_dtypes
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.driver import EventTimer, probe
    from hlo_opt.backends.cuda.gemm_kernel import gemm_launch, gemm_source
    from hlo_opt.backends.cuda.program import prelude
    dev = probe()
    mod = compile_cuda(prelude() + gemm_source("hlo_gemm_bf16", "bf16", "f32"), dev.arch,
                       name="gemm.cu")
    fn = dev.load_module(mod.cubin).function("hlo_gemm_bf16")
    try:
        from hlo_opt.backends.cuda.cublaslt import CublasLt
        lt = CublasLt(dev)
        lt_name = "cuBLASLt (nvmath-python)"
    except Exception as e:  # noqa: BLE001
        lt, lt_name = None, f"cuBLASLt unavailable ({type(e).__name__}: {str(e)[:80]})"
    rng = np.random.default_rng(0)
    for n in sizes:
        m = k = n
        a = rng.standard_normal((m, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((n, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
        da, db = dev.alloc(a.nbytes), dev.alloc(b.nbytes)
        dev.upload(da, a.view(np.uint8).reshape(-1))
        dev.upload(db, b.view(np.uint8).reshape(-1))
        dc, dc2 = dev.alloc(m * n * 4), dev.alloc(m * n * 4)
        grid, block = gemm_launch(m, n, k)
        import ctypes

        types = (ctypes.c_void_p,) * 3 + (ctypes.c_int,) * 3

        def run():
            dev.launch_function(fn, grid, block, [da, db, dc, m, n, k], types=types)
        t_ours = EventTimer.mean(dev, run, 10)
        flops = 2.0 * m * n * k
        line = f"  bf16 gemm {m}x{n}x{k}: NVRTC mma.sync {flops / t_ours / 1e12:7.1f} TFLOP/s"
        if lt is not None:
            try:
                t_lt = EventTimer.mean(
                    dev, lambda: lt.gemm_tn(da, db, dc2, m, n, k, "bf16", "f32"), 10)
                c1 = np.frombuffer(dev.download(dc, m * n * 4), np.float32)
                c2 = np.frombuffer(dev.download(dc2, m * n * 4), np.float32)
                err = float(np.max(np.abs(c1 - c2)) / (np.max(np.abs(c2)) + 1e-30))
                line += (f"; {lt_name} {flops / t_lt / 1e12:7.1f} TFLOP/s; ours/cuBLASLt "
                         f"{t_lt / t_ours:5.2f} of its speed; max rel diff {err:.2e}")
            except Exception as e:  # noqa: BLE001
                line += f"; cuBLASLt failed: {type(e).__name__}: {str(e)[:120]}"
        else:
            line += f"; {lt_name}"
            line += _torch_gemm(n)
        if n <= 4096:
            c1 = np.frombuffer(dev.download(dc, m * n * 4), np.float32).reshape(m, n)
            ref = a[:256].astype(np.float32) @ b.astype(np.float32).T
            err = float(np.max(np.abs(c1[:256] - ref)) / np.max(np.abs(ref)))
            line += f"; NVRTC vs numpy (256 rows) max rel err {err:.1e}"
        say(line)
        for p in (da, db, dc, dc2):
            dev.free(p)


def _torch_gemm(n):
    try:
        import torch
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t) / 10
        return f"; torch.matmul (cuBLAS) {2.0 * n ** 3 / dt / 1e12:7.1f} TFLOP/s"
    except Exception as e:  # noqa: BLE001
        return f"; torch unavailable ({type(e).__name__})"


# ---- 5b. whole programs (the XLA comparison's JAX programs: gemms, loops, RNG, sort) ------------
def programs(backend: str, iters: int, budget_s: float = 240.0):
    """Each program of benchmarks/jax_programs.py, lowered by the machine's JAX: our
    ``gpu`` pipeline on the device against XLA:GPU, outputs compared on the same
    arguments, whole-program time side by side."""
    import jax
    import numpy as np
    from hlo_opt.api import parse_hlo
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import jax_programs
    makers = jax_programs.makers()
    ratios = []
    start = time.perf_counter()
    for name in sorted(makers, key=lambda n: n == "transformer_step"):  # the big one last
        if time.perf_counter() - start > budget_s:
            say(f"  {name:16s} left out: the section's {budget_s:.0f} s are spent")
            continue
        t0 = time.perf_counter()
        try:
            f, args = makers[name]()
            leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
            jfn = jax.jit(f)
            text = jfn.lower(*args).compiler_ir("hlo").as_hlo_text()
            r = Resident(parse_hlo(text, f"{name}.hlo"), backend)
            t_ours = r.time(iters)
            flat = lambda *xs: jax.tree_util.tree_leaves(jfn(*jax.tree_util.tree_unflatten(  # noqa: E731
                jax.tree_util.tree_structure(args), xs)))
            # the jitted function itself, on arguments already on the device (ours are too);
            # XLA's default lets f32 dots and convolutions use TF32 on this GPU, ours do not:
            # it is timed at full f32 precision too, and the ratio is against that
            t_tf32 = jax_time(jfn, list(jax.device_put(args)), iters)
            with jax.default_matmul_precision("highest"):
                t_jax = jax_time(jax.jit(f), list(jax.device_put(args)), iters)
            # outputs compared with XLA at full f32 precision (its default lets dots and
            # convolutions use TF32 on this GPU; our kernels and cuBLASLt calls do not)
            with jax.default_matmul_precision("highest"):
                verdict = _versus_jax(r, jax.jit(flat), leaves) if len(
                    r.module.entry.parameters) == len(leaves) else \
                    "(JAX dropped unused arguments)"
        except Exception as e:  # noqa: BLE001 - a report
            say(f"  {name:16s} ERROR {type(e).__name__}: {str(e)[:300]}")
            continue
        ratios.append(t_ours / t_jax)
        other = ", ".join(f"{v} {k}" for k, v in r.kinds.items() if k != "launch")
        say(f"  {name:16s} {r.kernels:3d} kernel(s){' + ' + other if other else ''}: ours "
            f"{t_ours * 1e6:9.1f} us; {_xla_name()} {t_jax * 1e6:9.1f} us (default "
            f"precision {t_tf32 * 1e6:.1f} us); ours/XLA {t_ours / t_jax:5.2f}x; {verdict} "
            f"({time.perf_counter() - t0:.1f}s)")
        if t_ours > 1.15 * t_jax:
            say("      where the time goes: " + _top_thunks(r, 6))
    if ratios:
        g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        say(f"  whole-program time ours/{_xla_name()} geometric mean {g:.2f}x over "
            f"{len(ratios)} programs")


def _top_thunks(r: "Resident", n: int) -> str:
    """The ``n`` thunks (summed by kind of instruction) that take most of one profiled run
    (no graph), with their share: what to work on where a program is slower than XLA."""
    runner = r.exe.runner(profile=True)
    runner.execute(r.exe.program.entry, r.frame)
    runner.times.clear()
    runner.execute(r.exe.program.entry, r.frame)
    r.dev.sync()
    total = sum(v[0] for v in runner.times.values()) or 1.0
    by = {}
    for (name, kind), (sec, count) in runner.times.items():
        key = f"{kind} {name.rstrip('0123456789').rstrip('.')}"
        got = by.setdefault(key, [0.0, 0])
        got[0] += sec
        got[1] += count
    rows = sorted(by.items(), key=lambda kv: -kv[1][0])[:n]
    return ", ".join(f"{k} x{c} {s * 1e6:.0f}us ({100 * s / total:.0f}%)"
                     for k, (s, c) in rows) + f"; profiled total {total * 1e6:.0f}us"


# ---- 6. autotuning (issue 14's figures) -------------------------------------------------------
def autotune(backend: str, scale: str, budget_s: float = 60.0):
    """Level-4 tuning against level 0 on conv_block and the benchmark modules at ``scale``
    (written to files for scripts/autotune_check.py): tuned instructions, tuning time, whole-module
    device time before and after, results file reloaded with nothing measured."""
    import tempfile
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from autotune_check import autotune_section
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        paths = []
        # a convolution first (the conv kernels' algorithms and tiles, cuDNN's engines),
        # then the gemm module (cuBLASLt's algorithms and our tiles), then the fusions
        paths.append(os.path.join(ROOT, "benchmarks", "xla_gpu_modules", "conv_block.hlo"))
        for name, m, _, _ in sorted(large_modules(scale), key=lambda x: x[0] != "mlp_bf16"):
            path = os.path.join(d, name + ".hlo")
            with open(path, "w", encoding="utf-8") as f:
                f.write(m.to_text())
            paths.append(path)
        rows = autotune_section(backend, paths, say,
                                budget_s=budget_s - (time.perf_counter() - t0))
    timed = [r for r in rows if r.get("tuned_s")]
    if timed:
        g = math.exp(sum(math.log(r["tuned_s"] / r["level0_s"]) for r in timed) / len(timed))
        say(f"  tuned/level-0 whole-module time, geometric mean {g:.3f}x over {len(timed)} "
            f"modules; tuning {sum(r['tuning_s'] for r in rows if 'tuning_s' in r):.1f} s in all")


# ---- 7. NVIDIA's libraries and our kernels in their place ---------------------------------------
LIBRARY_PROBES = ("device_libs_gemmfb", "device_libs_cudnn", "device_libs_libs")


def libraries(budget_s: float):
    """Each probe script's ``run(say)``: the library paths (cuDNN convolutions; cuFFT,
    cuSOLVER, cuBLAS trsm; our NVRTC gemm in cuBLASLt's place) against the interpreter,
    timed; a probe that fails is reported and the next one runs."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    t0 = time.perf_counter()
    for name in LIBRARY_PROBES:
        if time.perf_counter() - t0 > budget_s:
            say(f"  {name}: left out (budget of {budget_s:.0f} s spent)")
            continue
        if not os.path.exists(os.path.join(ROOT, "scripts", name + ".py")):
            continue
        say(f"  -- {name}")
        try:
            __import__(name).run(lambda line: say("  " + line))
        except Exception:  # noqa: BLE001
            for ln in traceback.format_exc().splitlines()[-6:]:
                say("  ! " + ln)


def environment():
    """What the machine has: the GPU and driver, and the versions the run depends on."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        say("nvidia-smi: " + (r.stdout.strip() or r.stderr.strip()[:200]))
    except Exception as e:  # noqa: BLE001
        say(f"nvidia-smi: {type(e).__name__}")
    from importlib import metadata
    found = []
    for pkg in ("numpy", "ml_dtypes", "lark", "llvmlite", "cuda-bindings", "cuda-core",
                "cuda-pathfinder", "nvidia-cuda-nvrtc", "nvidia-cublas", "nvmath-python",
                "nvidia-cudnn-frontend", "nvidia-cudnn-cu13", "jax", "jaxlib", "torch"):
        try:
            found.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            found.append(f"{pkg} -")
    say("packages: " + ", ".join(found))
    say("libraries: " + libraries_found())


def libraries_found() -> str:
    """Which of NVIDIA's libraries the machine can load (cuDNN through its frontend; cuFFT,
    cuSOLVER, cuBLAS through cuda-pathfinder), so a run says what its library paths used."""
    seen = []
    try:
        import cudnn
        seen.append(f"cudnn backend {cudnn.backend_version()}")
    except Exception as e:  # noqa: BLE001
        seen.append(f"cudnn - ({type(e).__name__}: {str(e)[:80]})")
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return "; ".join(seen + ["cuda-pathfinder -"])
    for lib in ("cublasLt", "cufft", "cusolver", "cudnn"):
        try:
            seen.append(f"{lib} {load_nvidia_dynamic_lib(lib).abs_path}")
        except Exception as e:  # noqa: BLE001
            seen.append(f"{lib} - ({type(e).__name__})")
    return "; ".join(seen)


# ---- main ----------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="device_check.txt")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--section", default="all")
    ap.add_argument("--quick", action="store_true")
    ns = ap.parse_args(argv)
    if ns.quick:
        QUICK.append(True)
    if ns.out != os.devnull:
        with open(ns.out, "w", encoding="utf-8"):
            pass
        OUT_FILE.append(ns.out)
    backend = ns.backend
    if ns.section == "all" and backend in (None, "cuda"):
        environment()
    if backend is None:
        try:
            from hlo_opt.backends.cuda.driver import probe
            dev = probe()
            backend = "cuda"
            from hlo_opt.backends.cuda import toolchain
            import cuda.bindings
            say(f"device: {dev.name} ({dev.arch}, {dev.sm_count} SMs); NVRTC "
                f"{toolchain.nvrtc_version()}; cuda-bindings {cuda.bindings.__version__}; "
                f"python {sys.version.split()[0]}")
        except Exception as e:  # noqa: BLE001
            backend = "cuda-sim"
            say(f"no GPU ({str(e)[:100]}): checking under cuda-sim")
    if ns.section == "samples-only":
        ok, total = correctness(backend, samples())
        say(f"samples: {ok}/{total}")
        return 0 if ok == total else 1
    scale = "large" if backend == "cuda" else "small"
    iters = 20 if backend == "cuda" else 1
    # (title, seconds, body) in the order they run: the figures the issues ask for first;
    # the launch-configuration sweep only when named (--section sweep)
    sections = {
        "samples": ("correctness: samples (raw and gpu pipeline) vs interpreter", 90,
                    lambda: say("  => %d/%d pass" % correctness(backend, samples()))),
        "jax": ("correctness: JAX benchmark modules (small) vs interpreter", 40,
                lambda: say("  => %d/%d pass" % correctness(backend, jax_small()))),
        "performance": (f"bandwidth and whole-module time ({scale} modules, {backend})", 100,
                        lambda: performance(backend, scale, iters)),
        "gemm": ("bf16 gemm; cuBLASLt aux epilogues", 45,
                 lambda: (gemm([4096, 8192]), aux_gemms())),
        "memcheck": ("compute-sanitizer memcheck on the samples (raw and gpu pipeline)", 100,
                     lambda: say("  " + memcheck(95))),
        "autotune": (f"autotuning: level 4 vs level 0 ({scale} modules, {backend})", 100,
                     lambda: autotune(backend, scale, 70.0 if ns.quick else 90.0)),
        "programs": (f"whole JAX programs vs XLA ({backend})", 140,
                     lambda: programs(backend, iters, 50.0 if ns.quick else 80.0)),
        "libraries": ("NVIDIA's libraries (cuDNN, cuFFT, cuSOLVER) and the NVRTC gemm", 110,
                      lambda: libraries(95.0)),
    }
    optional = {"sweep": ("launch configurations (large modules, whole-module us)", 60,
                          lambda: sweep(backend, scale, iters))}
    if backend != "cuda":
        sections["memcheck"] = ("memcheck", 10, lambda: say(
            "  cuda-sim: every buffer access is bounds-checked (EMU_DEBUG) in the runs above"))
        del sections["gemm"]
    if ns.section in optional:
        sections = {**sections, **optional}
    if ns.section in sections:  # one section, in this process
        title, _, fn = sections[ns.section]
        say(f"== {title}")
        t = time.perf_counter()
        try:
            fn()
        except Exception:  # noqa: BLE001
            for ln in traceback.format_exc().splitlines()[-8:]:
                say("  ! " + ln)
        say(f"  ({time.perf_counter() - t:.1f}s)")
        return 0
    # every section in a process of its own: a GPU fault in one cannot poison the others
    t0 = time.perf_counter()
    for name, (title, limit, _) in sections.items():
        cmd = [sys.executable, os.path.abspath(__file__), "--section", name, "--backend",
               backend, "--out", ns.out + ".part"] + (["--quick"] if ns.quick else [])
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
            tail = r.stderr.strip().splitlines()[-3:] if r.returncode else []
        except subprocess.TimeoutExpired:
            r, tail = None, [f"section timed out after {limit}s"]
        part = ns.out + ".part"
        if os.path.exists(part):
            with open(part, encoding="utf-8") as f:
                for ln in f.read().splitlines():
                    say(ln)
            os.remove(part)
        for ln in tail:
            say("  ! " + ln)
    say(f"total {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
