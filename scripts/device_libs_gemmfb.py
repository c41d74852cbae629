"""Device probe of the gemm thunks' own kernel (``hlo_opt/backends/cuda/gemm_emitter.py``).

``run(say)`` on a GPU: every distinct gemm (by its cuBLASLt plan) the ``gpu`` pipeline makes of
sample_modules/{matmul_bias_gelu, mlp_train_step, transformer_step} and
benchmarks/jax_modules/mlp_bf16 runs as our kernel under each tile configuration
(``gemm_emitter.CONFIGS``), event-timed per launch; the fastest is checked against the
interpreter with XLA's bounds for the output type and compared with cuBLASLt's time (its
heuristic's first algorithm, where nvmath-python loads); then a bf16 4096^3 gemm (row-major
operands, and K-contiguous "TN" ones) gives the best configuration's TFLOP/s.  One NVRTC
compilation holds every kernel.  Without a GPU it says why and returns.

``run(say, backend="cuda-sim", quick=True)`` runs the same case loop on cuda-sim (small
cases, two tiles), which the tests use.

    python scripts/device_libs_gemmfb.py [--backend cuda-sim]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODULES = ("sample_modules/matmul_bias_gelu.hlo", "sample_modules/mlp_train_step.hlo",
           "sample_modules/transformer_step.hlo", "benchmarks/jax_modules/mlp_bf16.hlo")
# XLA's bounds for a result type (what the device check compares with)
TOL = {"f64": 1e-9, "f32": 1e-4, "f16": 2e-2, "bf16": 2e-2}
ITERS = 5
BIG = 4096


def gemm_calls(path: Path) -> list:
    """The distinct gemm calls of ``path`` after the gpu pipeline (autotuning off)."""
    from hlo_opt import passes_api
    from hlo_opt.api import load
    from hlo_opt.autotune.kinds import default_kind_of
    from hlo_opt.flags import DebugOptions
    m = passes_api.optimize(load(str(path)), DebugOptions(xla_gpu_autotune_level=0),
                            pipeline="gpu")
    seen, out = set(), []
    for comp in m.computations:
        for inst in comp.instructions:
            if default_kind_of(inst) != "gemm":
                continue
            key = (tuple(o.shape.to_text() for o in inst.operands), inst.shape.to_text(),
                   inst.attrs.get("backend_config"))
            if key not in seen:
                seen.add(key)
                out.append(inst)
    return out


def big_call(layout: str):
    """A bf16 ``BIG``^3 gemm call, f32 out: rhs row-major [K, N] ("NN") or [N, K] ("TN")."""
    import json

    from hlo_opt.api import parse_hlo
    n = BIG
    dnums = {"lhs_contracting_dimensions": ["1"],
             "rhs_contracting_dimensions": ["0" if layout == "NN" else "1"],
             "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}
    cfg = json.dumps({"gemm_backend_config": {"alpha_real": 1, "alpha_imag": 0, "beta": 0,
                                              "dot_dimension_numbers": dnums,
                                              "epilogue": "DEFAULT"}}, separators=(",", ":"))
    text = (f"HloModule big_gemm_{layout}\nENTRY e {{\n"
            f"  %a = bf16[{n},{n}]{{1,0}} parameter(0)\n"
            f"  %b = bf16[{n},{n}]{{1,0}} parameter(1)\n"
            f"  ROOT %g = (f32[{n},{n}]{{1,0}}, s8[0]{{0}}) custom-call(%a, %b), "
            f'custom_call_target="__cublas$gemm", backend_config={cfg}\n}}\n')
    return parse_hlo(text).entry.root


class Case:
    """One gemm call: a standalone module per tile configuration (and one without: the
    cuBLASLt path), built with one shared set of kernel names."""

    def __init__(self, label, call, info, names, configs, check=True):
        from hlo_opt.backends.cuda.gemm_emitter import usable, with_config
        from hlo_opt.backends.cuda.gemm_plan import gemm_plan
        from hlo_opt.backends.cuda.launch_tuning import standalone_module
        from hlo_opt.backends.cuda.program import build_program
        self.label, self.check = label, check
        self.plan = gemm_plan(call)
        self.module = standalone_module(call)
        self.programs = []
        for tile in configs:
            if self.plan is None or not usable(self.plan, tile, info):
                continue
            m = standalone_module(call)
            with_config(m.entry.root, tile)
            self.programs.append((tile, build_program(m, info, names=names)))
        self.lt_program = build_program(self.module, info, names=names)

    def describe(self) -> str:
        p = self.plan
        if p is None:
            return f"{self.label}: no gemm plan"
        batch = p.batch * max(len(p.outer), 1)
        return (f"{self.label} {p.dtype}->{p.out_dtype} m={p.m} n={p.n} k={p.k}"
                + (f" batch={batch}" if batch > 1 else "")
                + (f" {p.epilogue}" if p.epilogue != "DEFAULT" else "")
                + (f" beta={p.beta:g}" if p.beta else ""))


def _args(module, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(p.shape.dims) * 0.5).astype(p.shape.dtype)
            for p in sorted(module.entry.parameters, key=lambda q: q.parameter_number)]


def _kernel_time(runner, args, iters) -> float:
    """Mean device seconds of the gemm thunk over ``iters`` profiled runs."""
    runner.times.clear()
    for _ in range(iters):
        runner.run(args)
    rows = [r for r in runner.profile_rows() if r["kind"] in ("library", "kernel")]
    return sum(r["time_us"] for r in rows) * 1e-6


def run(say, backend: str = "cuda", quick: bool = False, big: bool = True) -> dict:
    """One line per case (see the module docstring); returns {label: best tile time} for
    the tests."""
    import numpy as np
    from hlo_opt.backends.cuda.gemm_emitter import CONFIGS
    from hlo_opt.backends.cuda.program import combined_source
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.interpreter import execute
    t0 = time.perf_counter()
    if backend == "cuda":
        try:
            from hlo_opt.backends.cuda.driver import probe
            dev = probe()
        except Exception as e:  # noqa: BLE001 - no driver / device / cuda-python
            say(f"gemmfb: no CUDA device ({type(e).__name__}: {str(e)[:120]}); skipped")
            return {}
        info = dev.device_info()
    else:
        from hlo_opt.backends.cuda.target import target_device
        dev, info = None, target_device()
    configs = CONFIGS[:2] if quick else CONFIGS
    names: set = set()
    cases, plans = [], set()
    paths = MODULES[:1] if quick else MODULES
    for rel in paths:
        for i, call in enumerate(gemm_calls(ROOT / rel)):
            case = Case(f"{Path(rel).stem}#{i}", call, info, names, configs)
            if case.plan not in plans:       # the same cuBLASLt call: timed once
                plans.add(case.plan)
                cases.append(case)
    if big and backend == "cuda":
        for layout in ("NN", "TN"):
            cases.append(Case(f"bf16 {BIG}^3 {layout}", big_call(layout), info, names,
                              CONFIGS, check=False))
    progs = [p for c in cases for _, p in c.programs] + [c.lt_program for c in cases]
    source = combined_source(progs)
    if backend == "cuda":
        from hlo_opt.backends.cuda import CudaDeviceAdapter
        from hlo_opt.backends.cuda.compiler import compile_cuda
        loaded = dev.load_module(compile_cuda(source, dev.arch, name="gemmfb.cu").cubin)
        adapter = CudaDeviceAdapter(dev, loaded)
        lt = adapter.cublaslt()
        lt_note = "cuBLASLt" if lt is not None else "cuBLASLt unavailable"
    else:
        from hlo_opt.backends.cuda_sim.compiler import compile_sim
        from hlo_opt.backends.cuda_sim.device import SimDevice
        kernels = [(k.name, [t for t, _, _ in k.params]) for p in progs for k in p.kernels]
        adapter = SimDevice(compile_sim(source, kernels, debug=True))
        lt, lt_note = None, "no cuBLASLt on cuda-sim"
    say(f"gemmfb: {len(cases)} gemm calls x up to {len(configs)} tiles, one compilation "
        f"({time.perf_counter() - t0:.1f} s); {lt_note}")
    best_times = {}
    iters = 2 if backend != "cuda" else ITERS
    for c in cases:
        if not c.programs:
            say(f"  {c.describe()}: no tile runs it")
            continue
        args = _args(c.module)
        times = []
        for tile, prog in c.programs:
            r = Runner(prog, adapter, profile=True)
            try:
                r.run(args)    # warm-up
                times.append((_kernel_time(r, args, iters), tile, r))
            except Exception as e:  # noqa: BLE001 - one tile failing is a finding, not a crash
                say(f"  {c.describe()}: tile {tile} failed: {type(e).__name__}: {str(e)[:100]}")
        if not times:
            continue
        t, tile, r = min(times, key=lambda x: x[0])
        best_times[c.label] = t
        line = (f"  {c.describe()}: best tile {tile.block_m}x{tile.block_n}x{tile.block_k}"
                f"/{tile.num_warps}w {t * 1e6:9.1f} us")
        flops = 2.0 * c.plan.m * c.plan.n * c.plan.k * c.plan.batch * max(len(c.plan.outer), 1)
        line += f" ({flops / t / 1e12:6.1f} TFLOP/s)"
        if c.check:
            got = np.asarray(r.run(args)[0], np.float64)
            want = np.asarray(execute(c.module, args)[0], np.float64)
            if isinstance(want, tuple):
                want = want[0]
            et = c.plan.out_dtype
            scale = max(1.0, float(np.abs(want).max()))
            bad = int(np.sum(np.abs(got - want) > TOL[et] * (np.abs(want) + scale)))
            line += f"; vs interpreter: {'ok' if bad == 0 else f'{bad} beyond XLA bounds'}"
        if lt is not None:
            try:
                rl = Runner(c.lt_program, adapter, profile=True)
                rl.run(args)
                tl = _kernel_time(rl, args, iters)
                line += f"; cuBLASLt {tl * 1e6:9.1f} us (ours at {tl / t:5.2f}x its speed)"
            except Exception as e:  # noqa: BLE001
                line += f"; cuBLASLt failed: {type(e).__name__}: {str(e)[:80]}"
        say(line)
    say(f"gemmfb: done in {time.perf_counter() - t0:.1f} s")
    return best_times


device_probe_gemmfb = run   # the name scripts/device_check.py wires in


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cuda-sim"))
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    run(print, a.backend, quick=a.quick or a.backend == "cuda-sim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
