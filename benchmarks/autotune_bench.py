"""Autotuning cost and the results-file shortcut: prints figures (never asserted).

For each sample module with gemm / convolution calls, runs the ``gpu`` pipeline with a
candidate provider at ``--xla_gpu_autotune_level`` 4 (measuring, results dumped to a
textproto and a binary file), then again in a fresh cache with the file loaded: the
choices must be identical and nothing measured.  Prints the pickers' time, tuned
instructions and candidate runs for both.

    .venv/bin/python benchmarks/autotune_bench.py [--provider host] [--level 4]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlo_opt import passes_api  # noqa: E402
from hlo_opt.api import load  # noqa: E402
from hlo_opt.autotune import AutotuneSession, ResultCache  # noqa: E402
from hlo_opt.commands._autotune import make_provider  # noqa: E402
from hlo_opt.flags import DebugOptions  # noqa: E402

PICKERS = ("gemm-algorithm-picker", "gpu-conv-algorithm-picker")


def picked(module) -> list[str]:
    out = []
    for comp in module.computations:
        for inst in comp.instructions:
            cfg = inst.attrs.get("backend_config", "")
            if "selected_algorithm" in cfg or '"algorithm":{' in cfg:
                out.append(f"{inst.name}: {cfg[cfg.find('algorithm'):][:60]}")
    return out


def run(path: Path, options: DebugOptions, provider_name: str):
    module = load(str(path))
    stats = []
    session = AutotuneSession.from_options(options, make_provider(provider_name),
                                           cache=ResultCache())
    t0 = time.perf_counter()
    passes_api.optimize(module, options, pipeline="gpu", autotune=session,
                        on_stats=stats.append)
    total = time.perf_counter() - t0
    pick_ms = sum(r.wall_ms for r in stats[0].records if r.pass_name in PICKERS)
    return module, session, pick_ms, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--provider", default="host")
    ap.add_argument("--level", type=int, default=4)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    print(f"provider {args.provider}, level {args.level}")
    print(f"{'module':<22} {'file':<10} {'tuned':>5} {'hits':>5} {'cands':>5} "
          f"{'pickers ms':>11} {'same':>5}")
    for path in sorted((ROOT / "sample_modules").glob("*.hlo")):
        for suffix in (".textproto", ".pb"):
            results = tmp / (path.stem + suffix)
            tune_opts = DebugOptions(xla_gpu_autotune_level=args.level,
                                     xla_gpu_dump_autotune_results_to=str(results))
            m1, s1, ms1, _ = run(path, tune_opts, args.provider)
            if not s1.stats.instructions:
                break
            load_opts = DebugOptions(xla_gpu_autotune_level=args.level,
                                     xla_gpu_load_autotune_results_from=str(results))
            m2, s2, ms2, _ = run(path, load_opts, args.provider)
            same = picked(m1) == picked(m2) and m1.to_text() == m2.to_text()
            for label, s, ms in (("measured", s1, ms1), ("loaded", s2, ms2)):
                a = s.stats.to_json()
                print(f"{path.stem:<22} {label if suffix == '.textproto' else label + '.pb':<10} "
                      f"{a['tuned']:>5} {a['cache_hits']:>5} {a['measurements']:>5} "
                      f"{ms:>11.1f} {str(same):>5}")
    print(json.dumps({"tmp": str(tmp)}))


if __name__ == "__main__":
    main()
