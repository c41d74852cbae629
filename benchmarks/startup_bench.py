"""Start-up: ``hlo-opt --help`` against a bare ``python -c "import click"`` (same run,
interleaved, best of N each).  Target: under 2x.

    .venv/bin/python benchmarks/startup_bench.py [--runs 15]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path


def best(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    hlo_opt = str(Path(sys.executable).parent / "hlo-opt")
    click_t = help_t = float("inf")
    for _ in range(args.runs):  # interleaved: load drift hits both alike
        click_t = min(click_t, best([sys.executable, "-c", "import click"], 1))
        help_t = min(help_t, best([hlo_opt, "--help"], 1))
    print(f"python -c 'import click'  {click_t * 1000:6.1f} ms")
    print(f"hlo-opt --help            {help_t * 1000:6.1f} ms   ratio {help_t / click_t:.2f}x "
          f"(target < 2x: {'met' if help_t < 2 * click_t else 'NOT met'})")


if __name__ == "__main__":
    main()
