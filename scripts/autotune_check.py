"""The autotuner's proof on a device (the CUDA issue's ``scripts/device_check.sh`` calls
:func:`autotune_section`; it runs alone too).  Per module: the ``gpu`` pipeline at level
0, then the launch configurations (and gemm / conv algorithms where the provider has
candidates) tuned at ``--xla_gpu_autotune_level`` 4 with redzone and result checks; the
tuned module must match the interpreter on the backend; whole-module device time of the
level-0 and the tuned module (best of a few profiled runs, same process); tuning time;
then the results file written and loaded in a fresh cache: same choices, nothing measured.
Works under ``cuda-sim`` (so it is tested without a GPU), where the times are CPU times.

    python scripts/autotune_check.py [--backend cuda|cuda-sim] [--out FILE] [--budget S]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TUNING_PASSES = "gemm-algorithm-picker,gpu-conv-algorithm-picker,fusion-launch-autotuner"


def _provider(backend: str):
    from hlo_opt.commands._autotune import make_provider
    return make_provider(backend)


def _module_time(exe, backend: str, args) -> float:
    """Best total device time (s) of executable ``exe`` over profiled runs (10 on a GPU, 3
    under cuda-sim), after a warm-up."""
    runs = 10 if backend == "cuda" else 3
    r = exe.runner(profile=True)
    r.run(args)
    best = float("inf")
    for _ in range(runs):
        r.times.clear()
        r.run(args)
        best = min(best, sum(v[0] for v in r.times.values()))
    return best


def _buffer_work(provider) -> str:
    """Where the tuner's buffers were filled, checked and compared: "device" (the buffer
    kernels), "host" (host memory, or a device memory without them) or why they failed."""
    memory = getattr(provider, "memory", None)
    error = getattr(memory, "kernel_error", None)
    if error is not None:
        return f"host ({type(error).__name__}: {str(error)[:80]})"
    return "device" if getattr(memory, "kernels", None) is not None else "host"


def check_module(path: str, backend: str, results_dir: str, say) -> dict:
    from hlo_opt import passes_api
    from hlo_opt.api import load
    from hlo_opt.autotune import AutotuneSession, ResultCache
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.interpreter.literals import random_arguments
    from hlo_opt.flags import DebugOptions
    name = os.path.basename(path)
    base = load(path)
    passes_api.optimize(base, DebugOptions(xla_gpu_autotune_level=0), pipeline="gpu")
    results = os.path.join(results_dir, name + ".textproto")
    tuned = base.clone()
    opts = DebugOptions(xla_gpu_autotune_level=4, xla_gpu_dump_autotune_results_to=results)
    session = AutotuneSession.from_options(opts, _provider(backend), cache=ResultCache())
    t0 = time.perf_counter()
    passes_api.optimize(tuned, opts, passes=TUNING_PASSES, autotune=session)
    tuning_s = time.perf_counter() - t0
    stats = session.stats.to_json()
    row = {"module": name, "tuned": stats["tuned"], "measured": stats["measurements"],
           "failed": stats["failed_candidates"], "tuning_s": round(tuning_s, 3),
           "buffers": _buffer_work(session.provider)}
    if not stats["tuned"]:
        say(f"  {name:28s} nothing to tune")
        return row
    args = random_arguments(tuned, 1)
    # XLA's bounds for the output type (bf16 2e-2 ...), as the correctness checks use
    tuned_exe = compile_module(tuned, backend)   # checked and timed: one compile
    checked = check_executable(tuned, tuned_exe, seed=1)
    row["matches_interpreter"] = checked.status == "pass"
    row["level0_s"] = _module_time(compile_module(base, backend), backend, args)
    row["tuned_s"] = _module_time(tuned_exe, backend, args)
    # the results file, loaded in a fresh cache: same module, nothing measured
    again = base.clone()
    load_opts = DebugOptions(xla_gpu_autotune_level=4, xla_gpu_load_autotune_results_from=results)
    s2 = AutotuneSession.from_options(load_opts, _provider(backend), cache=ResultCache())
    t0 = time.perf_counter()
    passes_api.optimize(again, load_opts, passes=TUNING_PASSES, autotune=s2)
    row["loaded_s"] = round(time.perf_counter() - t0, 4)
    row["loaded_measured"] = s2.stats.measurements
    row["loaded_same"] = again.to_text() == tuned.to_text()
    say(f"  {name:28s} tuned {row['tuned']:2d} ({row['measured']:3d} candidates, "
        f"{row['tuning_s']:7.2f} s; failed {row['failed'] or '-'}; buffers {row['buffers']}) "
        f"{'==' if row['matches_interpreter'] else '!='} interpreter; module "
        f"{row['level0_s'] * 1e3:9.3f} -> {row['tuned_s'] * 1e3:9.3f} ms; results file "
        f"{row['loaded_s'] * 1e3:7.1f} ms, {row['loaded_measured']} measured, "
        f"same={row['loaded_same']}")
    return row


def autotune_section(backend: str, paths, say=print, budget_s: float = 240.0) -> list:
    say(f"autotuning ({backend}, level 4): per module")
    out = []
    start = time.perf_counter()
    last = 0.0  # the module before: one more like it must fit in the budget
    with tempfile.TemporaryDirectory() as d:
        for path in paths:
            if time.perf_counter() - start + last > budget_s:
                say(f"  (budget of {budget_s:.0f} s: {len(paths) - len(out)} modules left "
                    "out)")
                break
            t = time.perf_counter()
            try:
                out.append(check_module(path, backend, d, say))
            except Exception as e:  # noqa: BLE001 - a report, not a test
                say(f"  ERROR {os.path.basename(path)}: {type(e).__name__}: {str(e)[:200]}")
                out.append({"module": os.path.basename(path), "error": str(e)[:500]})
            last = time.perf_counter() - t
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda-sim", choices=("cuda", "cuda-sim"))
    ap.add_argument("--out", default=None, help="JSON figures to this file")
    ap.add_argument("--budget", type=float, default=240.0, help="seconds for all modules")
    ap.add_argument("modules", nargs="*", help="HLO files (default: sample_modules/*.hlo)")
    a = ap.parse_args()
    paths = a.modules or sorted(glob.glob(os.path.join(ROOT, "sample_modules", "*.hlo")))
    rows = autotune_section(a.backend, paths, budget_s=a.budget)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
