"""Parser and printer speed: prints figures (never asserted anywhere).

Builds one big module (>= 20 MB by default) out of renamed copies of the computations of
every corpus and sample module, then measures:

* parse throughput (MB/s, instructions/s), best of N runs;
* peak memory while parsing (tracemalloc) and bytes per instruction;
* linearity: parse time at 2 MB vs 20 MB (ideal ratio 10x);
* print throughput (MB/s);
* the retained memory of a 200k-instruction module.

    .venv/bin/python benchmarks/parse_bench.py [--mb 20] [--repeat 3] [--profile]

Targets (brief): >= 10 MB/s, < 2 KB/instruction peak, 2->20 MB time ratio within 11x.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlo_opt.errors import HloError  # noqa: E402
from hlo_opt.text.parser import parse_hlo, parse_hlo_modules  # noqa: E402
from tests.conftest import corpus_files, sample_files  # noqa: E402


def source_computations() -> list[tuple[list[str], int]]:
    """Every parseable corpus/sample module as (computation texts, instruction count)."""
    out = []
    for path in sample_files() + corpus_files():
        try:
            modules = parse_hlo_modules(path.read_text(), path.name)
        except HloError:
            continue
        for m in modules:
            out.append(m)
    return out


def build_module(target_bytes: int, modules=None) -> tuple[str, int]:
    """One module of >= target_bytes: copy k of every source computation is renamed
    ``name.kK`` (instructions too); the last copy's entry stays the ENTRY."""
    modules = modules if modules is not None else source_computations()
    parts = ["HloModule big_module\n"]
    size = len(parts[0])
    count = 0
    k = 0
    last_entry = None
    while size < target_bytes:
        for m in modules:
            comps = m.computation_post_order()
            old = [(c, c.name, [(i, i.name) for i in c.instructions]) for c in comps]
            for c, name, insts in old:
                c.name = f"{name}.k{k}"
                for i, iname in insts:
                    i.name = f"{iname}.k{k}"
            for c in comps:
                entry = c.is_entry
                c.is_entry = False
                text = c.to_text()
                c.is_entry = entry
                if entry:
                    last_entry = text
                parts.append(text + "\n")
                size += len(text) + 2
                count += c.instruction_count()
            for c, name, insts in old:  # restore for the next copy
                c.name = name
                for i, iname in insts:
                    i.name = iname
            k += 1
            if size >= target_bytes:
                break
    # make the last entry computation the module's ENTRY
    idx = len(parts) - 1 - parts[::-1].index(last_entry + "\n")
    parts[idx] = "ENTRY " + parts[idx]
    return "\n".join(parts), count


def timed_parse(text: str, repeat: int) -> tuple[float, object]:
    best = float("inf")
    module = None
    for _ in range(repeat):
        module = None
        gc.collect()
        t0 = time.perf_counter()
        module = parse_hlo(text, "<bench>")
        best = min(best, time.perf_counter() - t0)
    return best, module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0, help="size of the big module in MB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile one parse of the big module")
    args = ap.parse_args()

    sources = source_computations()
    big, n_big = build_module(int(args.mb * 1e6), sources)
    small, n_small = build_module(int(args.mb * 1e6 / 10), sources)
    mb_big = len(big.encode()) / 1e6
    mb_small = len(small.encode()) / 1e6
    print(f"sources: {len(sources)} modules; big module {mb_big:.1f} MB, {n_big} instructions; "
          f"small {mb_small:.2f} MB, {n_small} instructions")

    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        parse_hlo(big, "<bench>")
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return

    t_small, _ = timed_parse(small, args.repeat)
    t_big, module = timed_parse(big, args.repeat)
    print(f"parse {mb_big:.1f} MB: {t_big:.2f} s = {mb_big / t_big:.1f} MB/s, "
          f"{n_big / t_big / 1e3:.0f} k instructions/s")
    print(f"parse {mb_small:.2f} MB: {t_small:.3f} s; time ratio big/small = "
          f"{t_big / t_small:.2f} for a size ratio of {mb_big / mb_small:.2f}")

    # printing
    best = float("inf")
    out = ""
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        out = module.to_text()
        best = min(best, time.perf_counter() - t0)
    print(f"print: {best:.2f} s = {len(out) / 1e6 / best:.1f} MB/s ({len(out) / 1e6:.1f} MB out)")
    del module, out
    gc.collect()

    # peak memory while parsing (tracemalloc slows the parse; times above are without it)
    tracemalloc.start()
    module = parse_hlo(big, "<bench>")
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"memory: peak {peak / 1e6:.0f} MB during the parse = {peak / n_big:.0f} B/instruction;"
          f" retained {current / 1e6:.0f} MB = {current / n_big:.0f} B/instruction")
    del module
    gc.collect()

    # a 200k-instruction module
    per_mb = n_big / mb_big
    text200, n200 = build_module(int(200_000 / per_mb * 1e6), sources)
    tracemalloc.start()
    module = parse_hlo(text200, "<bench>")
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"200k module: {n200} instructions, {len(text200) / 1e6:.1f} MB text; retained "
          f"{current / 1e6:.0f} MB ({current / n200:.0f} B/instruction), peak {peak / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
