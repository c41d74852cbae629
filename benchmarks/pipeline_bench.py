"""The target-independent ``optimization`` pipeline at 1k, 10k and 100k instructions:
prints the time of each size, the 10k->100k growth and the slowest passes (figures only,
never asserted anywhere).

The module repeats a real transformer-style block (layer norm, matmul, bias, tanh-GELU,
residual; see gpu_pipeline_bench.make_module) until it has about N instructions.

    .venv/bin/python benchmarks/pipeline_bench.py [--sizes 1000,10000,100000] [--top 3]

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


def run(size: int, top: int) -> float:
    module = parse_hlo(make_module(size), "pipeline_bench")
    before = module.instruction_count()
    captured = {}
    t0 = time.perf_counter()
    c0 = time.process_time()
    optimize(module, DebugOptions(), pipeline="optimization", verifier=None,
             on_stats=lambda s: captured.setdefault("s", s))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    per_pass: dict[str, float] = {}
    for rec in captured["s"].records:
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
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    times = {n: run(n, args.top) for n in sizes}
    for a, b in zip(sizes, sizes[1:]):
        print(f"growth {a} -> {b} instructions: {times[b] / times[a]:.1f}x CPU "
              f"(size x{b / a:.0f})")


if __name__ == "__main__":
    main()
