"""The target-independent ``optimization`` pipeline at 1k, 10k and 100k instructions:
prints the time of each size, the 10k->100k growth and the slowest passes (figures only,
never asserted anywhere).

The module repeats a real transformer-style block (layer norm, matmul, bias, tanh-GELU,
residual; see gpu_pipeline_bench.make_module) until it has about N instructions.

    .venv/bin/python benchmarks/pipeline_bench.py [--sizes 1000,10000,100000] [--top 3]
        [--repeat 1]

Each size runs ``--repeat`` times and the fastest run (CPU) is reported, a loaded machine's
noise being one-sided; one small warm-up run first keeps imports and first-use set-up
out of the smallest size's figure.

Target (issue 5): time grows no faster than n log n: 100k within 15x of 10k.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_pipeline_bench import make_module  # noqa: E402
from hlo_opt.api import parse_hlo  # noqa: E402
from hlo_opt.flags import DebugOptions  # noqa: E402
from hlo_opt.passes_api import optimize  # noqa: E402


def run_once(text: str):
    """One ``optimization`` run: (instructions before, module after, stats, wall, CPU)."""
    module = parse_hlo(text, "pipeline_bench")
    before = module.instruction_count()
    captured = {}
    t0 = time.perf_counter()
    c0 = time.process_time()
    optimize(module, DebugOptions(), pipeline="optimization", verifier=None,
             on_stats=lambda s: captured.setdefault("s", s))
    return before, module, captured["s"], time.perf_counter() - t0, time.process_time() - c0


def run(size: int, top: int, repeat: int = 1) -> float:
    text = make_module(size)
    best = None
    for _ in range(max(repeat, 1)):
        result = run_once(text)
        if best is None or result[4] < best[4]:
            best = result
    before, module, stats, wall, cpu = best
    per_pass: dict[str, float] = {}
    for rec in stats.records:
        per_pass[rec.pass_name] = per_pass.get(rec.pass_name, 0.0) + rec.wall_ms / 1000
    slowest = ", ".join(f"{name} {sec:.2f} s" for name, sec in
                        sorted(per_pass.items(), key=lambda kv: -kv[1])[:top])
    print(f"optimization: {before} -> {module.instruction_count()} instructions: "
          f"{wall:.2f} s wall, {cpu:.2f} s CPU; slowest: {slowest}")
    return cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1, help="runs per size; the fastest counts")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    run_once(make_module(100))  # warm-up: imports and first-use set-up
    times = {n: run(n, args.top, args.repeat) for n in sizes}
    for a, b in zip(sizes, sizes[1:]):
        print(f"growth {a} -> {b} instructions: {times[b] / times[a]:.1f}x CPU "
              f"(size x{b / a:.0f})")


if __name__ == "__main__":
    main()
