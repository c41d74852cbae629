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
    import jax.numpy as jnp  # noqa: E402
    from jax import lax  # noqa: E402
    from jax._src.lib import _jax, hlo, xla_client as xc  # noqa: E402
except ImportError:
    sys.exit("cpu_vs_xla.py needs JAX: pip install -e '.[bench]' in a separate venv "
             "(see the docstring)")

jax.config.update("jax_platforms", "cpu")

from hlo_opt import passes_api  # noqa: E402
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402
from hlo_opt.backends.interpreter.literals import random_arguments  # noqa: E402
from hlo_opt.flags import DebugOptions  # noqa: E402
from hlo_opt.text.parser import parse_hlo_modules  # noqa: E402


# ---- the JAX programs ----------------------------------------------------------------------
def _lower(f, *args):
    """(HLO text, the arguments as the entry parameters' numpy arrays)."""
    text = jax.jit(f).lower(*args).compiler_ir("hlo").as_hlo_text()
    return text, [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]


def _rng(seed=0):
    return np.random.default_rng(seed)


def mlp_train_step():
    r = _rng(1)
    sizes = [784, 512, 256, 10]
    params = [(r.standard_normal((a, b)).astype(np.float32) * 0.05,
               np.zeros(b, np.float32)) for a, b in zip(sizes, sizes[1:])]
    x = r.standard_normal((128, 784)).astype(np.float32)
    y = r.integers(0, 10, 128).astype(np.int32)

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        logits = h @ w + b
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(128), y])

    def step(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)
    return _lower(step, params, x, y)


def attention():
    r = _rng(2)
    q, k, v = (r.standard_normal((4, 8, 128, 64)).astype(np.float32) for _ in range(3))

    def f(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)
    return _lower(f, q, k, v)


def layer_norm():
    r = _rng(3)
    x = r.standard_normal((256, 1024)).astype(np.float32)
    g, b = np.ones(1024, np.float32), np.zeros(1024, np.float32)

    def f(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(v + 1e-5) * g + b
    return _lower(f, x, g, b)


def softmax():
    x = _rng(4).standard_normal((256, 1024)).astype(np.float32)
    return _lower(lambda x: jax.nn.softmax(x, axis=-1), x)


def conv_block():
    r = _rng(5)
    x = r.standard_normal((8, 32, 32, 32)).astype(np.float32)
    w = r.standard_normal((3, 3, 32, 32)).astype(np.float32) * 0.1
    b = np.zeros(32, np.float32)

    def f(x, w, b):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y + b)
        return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return _lower(f, x, w, b)


def scan_loop():
    r = _rng(6)
    w = r.standard_normal((128, 128)).astype(np.float32) * 0.05
    xs = r.standard_normal((100, 128)).astype(np.float32)

    def f(w, xs):
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()
        return lax.scan(cell, jnp.zeros(128, jnp.float32), xs)
    return _lower(f, w, xs)


def rng_module():
    def f(key):
        k1, k2 = jax.random.split(key)
        return jax.random.normal(k1, (512, 512)) + jax.random.uniform(k2, (512, 512))
    return _lower(f, jax.random.PRNGKey(0))


def transformer_step(layers=10):
    r = _rng(7)
    d, s, bsz, heads = 128, 64, 4, 4

    def init(shape, scale=0.05):
        return r.standard_normal(shape).astype(np.float32) * scale
    params = [dict(wq=init((d, d)), wk=init((d, d)), wv=init((d, d)), wo=init((d, d)),
                   w1=init((d, 4 * d)), w2=init((4 * d, d)), g1=np.ones(d, np.float32),
                   g2=np.ones(d, np.float32)) for _ in range(layers)]
    x = r.standard_normal((bsz, s, d)).astype(np.float32)

    def ln(x, g):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(v + 1e-5) * g

    def block(x, p):
        h = ln(x, p["g1"])
        q, k, v = (jnp.reshape(h @ p[n], (bsz, s, heads, d // heads)) for n in ("wq", "wk", "wv"))
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // heads), -1)
        o = jnp.reshape(jnp.einsum("bhqk,bkhd->bqhd", a, v), (bsz, s, d))
        x = x + o @ p["wo"]
        h = ln(x, p["g2"])
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    def loss(params, x):
        for p in params:
            x = block(x, p)
        return jnp.mean(x ** 2)

    def step(params, x):
        g = jax.grad(loss)(params, x)
        return jax.tree_util.tree_map(lambda p, d: p - 1e-3 * d, params, g)
    return _lower(step, params, x)


JAX_PROGRAMS = {"jax_mlp_train_step": mlp_train_step, "jax_attention": attention,
                "jax_layer_norm": layer_norm, "jax_softmax": softmax,
                "jax_conv_block": conv_block, "jax_scan": scan_loop, "jax_rng": rng_module,
                "jax_transformer_step": transformer_step}


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
