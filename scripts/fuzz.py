#!/usr/bin/env python3
"""The long fuzz campaign: ``scripts/fuzz.py --seed 1 --cases 10000 [--minutes 60]``.

Runs tests/fuzz/harness.py's mutation fuzzer (parse -> verify -> optimization and gpu
pipelines -> print -> parse) over the corpus and the sample modules, prints the counts by
outcome and every finding (crash, reparse, timeout) with its case number; with
``--save DIR`` writes each finding's input there.  Exit code 1 when anything was found.
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fuzz.harness import BAD, run_cases, sources  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: no cap)")
    ap.add_argument("--case-seconds", type=float, default=30, help="time limit of one case")
    ap.add_argument("--memory-gb", type=float, default=4, help="address-space limit")
    ap.add_argument("--save", default=None, help="directory for the inputs of findings")
    ap.add_argument("--max-chars", type=int, default=20_000,
                    help="sources larger than this are left out (big ones are slow cases)")
    args = ap.parse_args()
    if args.memory_gb:
        limit = int(args.memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    counts: collections.Counter = collections.Counter()
    start = time.monotonic()
    deadline = start + args.minutes * 60 if args.minutes else None
    srcs = sources(max_chars=args.max_chars)

    class Stop(Exception):
        pass

    def on_case(i, outcome):
        counts[outcome.kind] += 1
        if outcome.kind in BAD:
            print(f"FINDING {outcome.kind}: {outcome.source}: {outcome.detail}", flush=True)
            if args.save:
                os.makedirs(args.save, exist_ok=True)
                with open(os.path.join(args.save, f"case{i}.{outcome.kind}.hlo"), "w") as f:
                    f.write(outcome.text)
        if (i + 1) % 500 == 0:
            print(f"[{i + 1} cases, {time.monotonic() - start:.0f} s] {dict(counts)}", flush=True)
        if deadline is not None and time.monotonic() > deadline:
            raise Stop

    try:
        run_cases(args.seed, args.cases, srcs, args.case_seconds, on_case)
    except Stop:
        print("time cap reached", flush=True)
    total = sum(counts.values())
    bad = sum(counts[k] for k in BAD)
    print(f"seed {args.seed}: {total} cases in {time.monotonic() - start:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"findings: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
