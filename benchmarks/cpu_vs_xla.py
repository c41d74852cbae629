"""The CPU backend against XLA:CPU (JAX from PyPI), side by side: prints figures, never
asserted anywhere.

Needs JAX (the ``bench`` extra) next to hlo-opt; keep it out of the project venv:

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install -e '.[bench]'
    .venv-bench/bin/python benchmarks/cpu_vs_xla.py [--repeat 30] [--threads 1]
                                                              [--only softmax,attention]

Modules: the sample modules plus JAX programs written here (MLP training step,
attention, layer norm, softmax, a convolution block, a scan loop, an RNG module and a
transformer training step of ~3,000 instructions), each lowered once to HLO text.  Both
sides compile the same HLO text: XLA through its HLO parser, the StableHLO importer and
the PjRt CPU client (its whole CPU pipeline); hlo-opt through its parser, the ``cpu``
pipeline and the CPU backend (cold: an empty disk cache; warm: the same compile again,
a cache hit).  Execution is measured alternately (one XLA call, one hlo-opt call, ...)
in this one process (sample modules on seeded random inputs, JAX programs on the
arguments they were lowered with), numpy arrays in and out on both sides (XLA: device_put, execute,
np.asarray of the outputs), median of ``--repeat``.  ``--threads 1`` pins the process
to one core before JAX starts (XLA's Eigen pool and OpenBLAS then use one thread).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--threads", type=int, default=0, help="pin to this many cores")
    ap.add_argument("--only", default="", help="comma list of module names")
    ap.add_argument("--json", default="", help="also write the figures here")
    return ap.parse_args()


ARGS = _args()
if ARGS.threads:
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:ARGS.threads]))
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)

import numpy as np  # noqa: E402

try:
    import jax  # noqa: E402
    import jax.extend  # noqa: E402
    from jax._src.lib import _jax, hlo, xla_client as xc  # noqa: E402

    import jax_programs  # noqa: E402  (benchmarks/, beside this script)
except ImportError:
    sys.exit("cpu_vs_xla.py needs JAX: pip install -e '.[bench]' in a separate venv "
             "(see the docstring)")

jax.config.update("jax_platforms", "cpu")

from hlo_opt import passes_api  # noqa: E402
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402
from hlo_opt.backends.interpreter.literals import random_arguments  # noqa: E402
from hlo_opt.flags import DebugOptions  # noqa: E402
from hlo_opt.text.parser import parse_hlo_modules  # noqa: E402


# ---- the JAX programs (benchmarks/jax_programs.py) ----------------------------------------
def _lowered(make):
    """(HLO text, the arguments as the entry parameters' numpy arrays)."""
    f, args = make()
    text = jax.jit(f).lower(*args).compiler_ir("hlo").as_hlo_text()
    return text, [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]


JAX_PROGRAMS = {f"jax_{name}": (lambda m=make: _lowered(m)) for name, make in (
    ("mlp_train_step", jax_programs.mlp_train_step), ("attention", jax_programs.attention),
    ("layer_norm", jax_programs.layer_norm), ("softmax", jax_programs.softmax),
    ("conv_block", jax_programs.conv_block), ("scan", jax_programs.scan),
    ("rng", jax_programs.rng_normal_uniform),
    ("transformer_step", jax_programs.transformer_step))}


# ---- both sides ----------------------------------------------------------------------------
def xla_compile(text: str):
    module = hlo.hlo_module_from_text(text)
    comp = xc.XlaComputation(module.as_serialized_hlo_module_proto())
    mlir = _jax.mlir.xla_computation_to_mlir_module(comp)
    backend = jax.extend.backend.get_backend("cpu")
    device = backend.local_devices()[0]
    exe = backend.compile_and_load(mlir, xc.DeviceList((device,)))

    def run(args):
        bufs = [jax.device_put(a, device) for a in args]
        outs = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
        return [np.asarray(o[0]) for o in outs]
    return run


def ours_compile(text: str, cache_dir: str):
    module = parse_hlo_modules(text, "<bench>")[0]
    options = DebugOptions()

    def prepare(m):
        return passes_api.optimize(m, options, pipeline="cpu")
    return CpuExecutable(module, debug_options=options, cache_dir=cache_dir,
                         prepare=prepare, prepare_key="pipeline=cpu;" + PASSES_FINGERPRINT)


def _passes_fingerprint() -> str:
    import passes as pass_library
    from hlo_opt.fileutil import source_fingerprint
    return source_fingerprint(os.path.dirname(pass_library.__file__))


PASSES_FINGERPRINT = _passes_fingerprint()


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def measure(name: str, text: str, repeat: int, args=None) -> dict:
    module = parse_hlo_modules(text, name)[0]
    if args is None:
        args = random_arguments(module, seed=0)
    n_inst = sum(c.instruction_count() for c in module.computations)
    xla_run, xla_compile_s = timed(lambda: xla_compile(text))
    cache = tempfile.mkdtemp(prefix="hlo-opt-bench-")
    ours, cold_s = timed(lambda: ours_compile(text, cache))
    warm, warm_s = timed(lambda: ours_compile(text, cache))
    assert warm.cache_hit
    args_x = [np.asarray(a) for a in args]
    for _ in range(3):
        xla_run(args_x)
        ours.run(args)
    tx, to = [], []
    for _ in range(repeat):
        _, t = timed(lambda: xla_run(args_x))
        tx.append(t)
        _, t = timed(lambda: ours.run(args))
        to.append(t)
    got, want = ours.run(args), xla_run(args_x)
    worst = 0.0
    for g, w in zip(got, want):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g64.shape == w64.shape and g64.size:
            finite = np.isfinite(g64) & np.isfinite(w64)
            if finite.any():
                worst = max(worst, float(np.max(np.abs(g64[finite] - w64[finite]) /
                                                (1 + np.abs(w64[finite])))))
    host = ours.meta.get("host_reasons", {})
    return {"module": name, "instructions": n_inst, "xla_ms": statistics.median(tx) * 1e3,
            "ours_ms": statistics.median(to) * 1e3, "xla_compile_s": xla_compile_s,
            "ours_cold_s": cold_s, "ours_warm_s": warm_s, "max_rel_diff": worst,
            "host_calls": len(host),
            "host": sorted({why for why in host.values()})}


def main():
    modules = {}
    only = [s for s in ARGS.only.split(",") if s]
    for p in sorted((ROOT / "sample_modules").glob("*.hlo")):
        if not only or p.stem in only:
            modules[p.stem] = (p.read_text(), None)
    for name, make in JAX_PROGRAMS.items():
        if not only or name in only:
            modules[name] = make()
    rows = []
    print(f"threads: {ARGS.threads or len(os.sched_getaffinity(0))}; repeat {ARGS.repeat}; "
          f"jax {jax.__version__}")
    hdr = (f"{'module':24} {'insts':>6} {'xla ms':>9} {'ours ms':>9} {'ratio':>6} "
           f"{'xla comp s':>10} {'cold s':>7} {'warm s':>7} {'warm x':>7} {'host':>4} "
           f"{'rel diff':>8}")
    print(hdr)
    for name, (text, args) in modules.items():
        try:
            r = measure(name, text, ARGS.repeat, args)
        except Exception as e:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"{name:24} FAILED: {type(e).__name__}: {str(e).splitlines()[0][:150]}")
            continue
        rows.append(r)
        print(f"{name:24} {r['instructions']:>6} {r['xla_ms']:>9.3f} {r['ours_ms']:>9.3f} "
              f"{r['ours_ms'] / r['xla_ms']:>6.2f} {r['xla_compile_s']:>10.3f} "
              f"{r['ours_cold_s']:>7.3f} {r['ours_warm_s']:>7.3f} "
              f"{r['ours_cold_s'] / r['ours_warm_s']:>7.1f} {r['host_calls']:>4} "
              f"{r['max_rel_diff']:>8.1e}", flush=True)
        for why in r["host"]:
            print(f"{'':26}host: {why}")
    if rows:
        geo = math.exp(statistics.mean(math.log(r["ours_ms"] / r["xla_ms"]) for r in rows))
        warm = math.exp(statistics.mean(math.log(r["ours_cold_s"] / r["ours_warm_s"])
                                        for r in rows))
        print(f"geometric mean execution ratio (ours / XLA): {geo:.2f}x over {len(rows)} "
              f"modules; geometric mean warm-cache speedup: {warm:.1f}x")
    if ARGS.json:
        Path(ARGS.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
