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
import os
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


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """Best wall and best CPU seconds of ``repeat`` calls (CPU time is the figure to trust
    on a shared machine), and the last result."""
    wall = cpu = float("inf")
    result = None
    for _ in range(repeat):
        result = None
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        wall = min(wall, time.perf_counter() - w)
        cpu = min(cpu, time.process_time() - c)
    return wall, cpu, result


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

    print(f"load average before timing: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    w_small, c_small, _ = timed(lambda: parse_hlo(small, "<bench>"), args.repeat)
    w_big, c_big, module = timed(lambda: parse_hlo(big, "<bench>"), args.repeat)
    print(f"parse {mb_big:.1f} MB: {c_big:.2f} s CPU = {mb_big / c_big:.1f} MB/s, "
          f"{n_big / c_big / 1e3:.0f} k instructions/s ({len(big) / n_big:.0f} B/instruction); "
          f"wall {w_big:.2f} s = {mb_big / w_big:.1f} MB/s")
    print(f"parse {mb_small:.2f} MB: {c_small:.3f} s CPU; time ratio big/small = "
          f"{c_big / c_small:.2f} (wall {w_big / w_small:.2f}) for a size ratio of "
          f"{mb_big / mb_small:.2f}")

    w_print, c_print, out = timed(module.to_text, args.repeat)
    mb_out = len(out) / 1e6
    print(f"print: {c_print:.2f} s CPU = {mb_out / c_print:.1f} MB/s ({mb_out:.1f} MB out); "
          f"wall {mb_out / w_print:.1f} MB/s")
    del module, out
    gc.collect()

    # peak memory while parsing (tracemalloc slows the parse; times above are without it)
    tracemalloc.start()
    module = parse_hlo(big, "<bench>")
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del module
    print(f"memory: peak {peak / 1e6:.0f} MB during the parse = {peak / n_big:.0f} B/instruction;"
          f" retained {current / 1e6:.0f} MB = {current / n_big:.0f} B/instruction")
    gc.collect()

    # a 200k-instruction module
    per_mb = n_big / mb_big
    text200, n200 = build_module(int(200_000 / per_mb * 1e6), sources)
    tracemalloc.start()
    module = parse_hlo(text200, "<bench>")
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"200k module: {n200} instructions, {len(text200) / 1e6:.1f} MB text; retained "
          f"{current / 1e6:.0f} MB ({current / n200:.0f} B/instruction), peak {peak / 1e6:.0f} MB"
          f" ({module.instruction_count()} instructions parsed)")


if __name__ == "__main__":
    main()
