"""The "done means" table of the GPU pipeline: for every sample module and every corpus
module the interpreter could run, instructions before, kernels after ``gpu`` (fusions +
cuBLAS/cuDNN calls + unfused ops that move data) and the bytes the kernels move before
and after, from the cost model (hlo_opt/analysis/cost.py).

    .venv/bin/python scripts/kernel_table.py [--no-corpus] [--pipeline gpu] [--json]
        [--xla_gpu_enable_priority_fusion=false ...]

"Before" counts every instruction of the kernel-level computations as its own kernel
(bytes: each op reads its operands and writes its result); "after" runs the pipeline.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlo_opt.analysis.cost import kernel_breakdown, kernel_computations, module_cost  # noqa: E402
from hlo_opt.api import parse_hlo_modules  # noqa: E402
from hlo_opt.errors import HloError  # noqa: E402
from hlo_opt.flags import DebugOptions, parse_flag_tokens  # noqa: E402
from hlo_opt.verifier import module_errors  # noqa: E402
from tests.conftest import corpus_files, sample_files  # noqa: E402


def row(path: Path, module, pipeline: str, options) -> dict:
    from hlo_opt.passes_api import optimize
    instructions = sum(c.instruction_count() for c in kernel_computations(module))
    before = module_cost(module)
    before_kernels = kernel_breakdown(module)
    work = module.clone()
    optimize(work, options, pipeline=pipeline)
    after = module_cost(work)
    k = kernel_breakdown(work)
    return {"module": path.stem if len(path.stem) < 60 else path.stem[:57] + "...",
            "instructions": instructions, "kernels_before": before_kernels["kernels"],
            "fusions": k["fusions"], "library_calls": k["library_calls"],
            "unfused": k["unfused"], "kernels_after": k["kernels"],
            "bytes_before": int(before.bytes_accessed), "bytes_after": int(after.bytes_accessed)}


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f}"


def markdown(rows: list[dict]) -> str:
    head = ("| module | instructions | kernels before | kernels after (fusions + library + "
            "unfused) | MB moved before | MB moved after | after/before |")
    lines = [head, "|" + "---|" * 7]
    for r in rows:
        ratio = r["bytes_after"] / r["bytes_before"] if r["bytes_before"] else 1.0
        lines.append(f"| {r['module']} | {r['instructions']} | {r['kernels_before']} | "
                     f"{r['kernels_after']} ({r['fusions']} + {r['library_calls']} + "
                     f"{r['unfused']}) | {_mb(r['bytes_before'])} | {_mb(r['bytes_after'])} "
                     f"| {ratio:.2f} |")
    tot = {k: sum(r[k] for r in rows) for k in ("instructions", "kernels_before",
                                                "kernels_after", "bytes_before", "bytes_after")}
    ratio = tot["bytes_after"] / tot["bytes_before"] if tot["bytes_before"] else 1.0
    lines.append(f"| **total ({len(rows)} modules)** | {tot['instructions']} | "
                 f"{tot['kernels_before']} | {tot['kernels_after']} | "
                 f"{_mb(tot['bytes_before'])} | {_mb(tot['bytes_after'])} | {ratio:.2f} |")
    ratios = [r["bytes_after"] / r["bytes_before"] for r in rows if r["bytes_before"]]
    if ratios:
        geo = math.exp(sum(math.log(max(x, 1e-12)) for x in ratios) / len(ratios))
        lines.append(f"\nper-module after/before bytes: geometric mean {geo:.2f}, "
                     f"{sum(1 for x in ratios if x < 1)} of {len(ratios)} modules move fewer "
                     f"bytes, {sum(1 for x in ratios if x > 1)} more")
    return "\n".join(lines)


def collect(paths, pipeline: str, options) -> list[dict]:
    rows = []
    for path in paths:
        try:
            modules = parse_hlo_modules(path.read_text(), str(path))
        except HloError:
            continue
        for module in modules:
            if module_errors(module):
                continue
            try:
                rows.append(row(path, module, pipeline, options))
            except HloError as e:
                print(f"skipped {path.name}: {str(e).splitlines()[0]}", file=sys.stderr)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-corpus", action="store_true")
    ap.add_argument("--pipeline", default="gpu")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--changed-only", action="store_true",
                    help="corpus rows only where the pipeline changed the kernel count or bytes")
    args, flags = ap.parse_known_args(argv)
    options = DebugOptions.from_sources(parse_flag_tokens(flags, "the command line"))
    sample_rows = collect(sample_files(), args.pipeline, options)
    corpus_rows = [] if args.no_corpus else collect(corpus_files(), args.pipeline, options)
    if args.changed_only:
        corpus_rows = [r for r in corpus_rows if r["kernels_before"] != r["kernels_after"]
                       or r["bytes_before"] != r["bytes_after"]]
    if args.json:
        print(json.dumps({"samples": sample_rows, "corpus": corpus_rows}, indent=1))
        return 0
    print("## sample_modules\n")
    print(markdown(sample_rows))
    if corpus_rows:
        print(f"\n## corpus ({len(corpus_rows)} modules)\n")
        print(markdown(corpus_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
