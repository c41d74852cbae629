"""`hlo-opt diff` speed: prints figures (never asserted anywhere).

Builds a synthetic module of N instructions (elementwise chains with local and long-range
operands, broadcasts of biases, constants, compares/selects, reduces, and small loop
fusions), then a second one with one edit per 100 instructions (attribute changes,
rewired operands, removed and inserted instructions) and every instruction renamed, as
two compilers' dumps would be (``--keep-names``: as per-pass dumps are).  Measures parse
time and diff time (build graphs, match, classify, patterns; wall and CPU) separately,
best of ``--repeat``, at 1k, 10k and 100k instructions, the text and HTML renderers, and
checks the diff against the edits made: "found" counts the edits reported on the very
instruction edited (a removed tanh of a tanh may show as its twin removed instead: a
diff of the same size).

    .venv/bin/python benchmarks/diff_bench.py [--sizes 1000,10000,100000] [--repeat 3]

Target (issue 7): diff of two 10k-instruction modules differing by 1% in under 2 s;
growth 1k -> 10k -> 100k close to linear (no quadratic matching).
"""
from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlo_opt.diff import diff_modules  # noqa: E402
from hlo_opt.diff.render_html import render_html  # noqa: E402
from hlo_opt.diff.render_text import render_text  # noqa: E402
from hlo_opt.text.parser import parse_hlo  # noqa: E402

SHAPE = "f32[32,64]{1,0}"
BIAS = "f32[64]{0}"
UNARY = ["exponential", "tanh", "negate", "sqrt", "abs", "log", "sine", "cosine"]
BINARY = ["add", "multiply", "subtract", "maximum", "minimum", "divide"]
DIRECTIONS = ["GT", "LT", "GE", "LE", "EQ", "NE"]


STEP_SIZE = 1.6  # instructions per generator step, on average


class Truth:
    """What the edits did, by instruction name (before renaming)."""

    def __init__(self):
        self.removed: set[str] = set()
        self.inserted: set[str] = set()
        self.attr: set[str] = set()
        self.rewired: set[str] = set()


def synth(n: int, seed: int, edits: dict[int, int] | None = None, rename: int | None = None,
          truth: Truth | None = None) -> str:
    """HLO text of a module with about ``n`` instructions.  ``edits`` maps a generator
    step to an edit (remove or insert a unary op, rewire a binary op or insert after it,
    change a constant or a comparison direction, insert after anything else); the
    structure draws from the same
    random stream with or without edits, so two calls differ only where edited.  ``truth``
    collects what each edit did (names before renaming)."""
    edits = edits or {}
    truth = truth or Truth()
    rng = random.Random(seed)
    ren = random.Random(rename) if rename is not None else None

    def nm(base: str) -> str:
        return f"{base}.r{ren.randrange(10 ** 9)}" if ren else base

    alias: dict[str, str] = {}
    names: dict[str, str] = {}

    def ref(v: str) -> str:
        v = alias.get(v, v)
        return "%" + names.get(v, v)

    out_fused: list[str] = []
    entry: list[str] = []

    def emit(base: str, text: str) -> None:
        name = nm(base)
        names[base] = name
        entry.append(f"  %{name} = {text}")

    params = [f"p{k}" for k in range(8)]
    for k, p in enumerate(params):
        emit(p, f"{SHAPE} parameter({k})")
    emit("bias", f"{BIAS} parameter(8)")
    vals = list(params)
    fusion_id = 0
    for i in range(1, int(n / STEP_SIZE) + 1):
        kind = rng.random()
        a = vals[-1 - int(rng.expovariate(1 / 6)) % len(vals)]
        b = vals[-1 - int(rng.expovariate(1 / 40)) % len(vals)]
        far = rng.choice(vals)
        pick_unary = rng.choice(UNARY)
        pick_binary = rng.choice(BINARY)
        direction = rng.choice(DIRECTIONS)
        lit = rng.randrange(1, 9)
        edit = edits.get(i)
        if edit is not None:  # the edit this kind of step allows
            if kind < 0.30:
                edit = ("remove", "insert")[edit % 2]
            elif kind < 0.65:
                edit = ("rewire", "insert")[edit % 2] if far != b else "insert"
            elif 0.75 <= kind < 0.92:
                edit = "attr"
            else:
                edit = "insert"
        base = f"v{i}"
        if edit == "rewire":
            b = far
            truth.rewired.add(base)
        if kind < 0.30:
            if edit == "remove":
                alias[base] = a
                truth.removed.add(base)
                vals.append(base)
                continue
            emit(base, f"{SHAPE} {pick_unary}({ref(a)})")
        elif kind < 0.65:
            emit(base, f"{SHAPE} {pick_binary}({ref(a)}, {ref(b)})")
        elif kind < 0.75:
            emit(base + "b", f"{SHAPE} broadcast({ref('bias')}), dimensions={{1}}")
            emit(base, f"{SHAPE} add({ref(a)}, {ref(base + 'b')})")
        elif kind < 0.85:
            if edit == "attr":
                lit += 10
                truth.attr.add(base + "c")
            emit(base + "c", f"f32[] constant({lit})")
            emit(base + "cb", f"{SHAPE} broadcast({ref(base + 'c')}), dimensions={{}}")
            emit(base, f"{SHAPE} multiply({ref(a)}, {ref(base + 'cb')})")
        elif kind < 0.92:
            if edit == "attr":
                direction = DIRECTIONS[(DIRECTIONS.index(direction) + 1) % len(DIRECTIONS)]
                truth.attr.add(base + "p")
            emit(base + "p", f"pred[32,64]{{1,0}} compare({ref(a)}, {ref(b)}), "
                             f"direction={direction}")
            emit(base, f"{SHAPE} select({ref(base + 'p')}, {ref(a)}, {ref(b)})")
        elif kind < 0.96:
            emit(base + "z", "f32[] constant(0)")
            emit(base + "r", f"f32[64]{{0}} reduce({ref(a)}, {ref(base + 'z')}), "
                             "dimensions={0}, to_apply=%add_f32")
            emit(base, f"{SHAPE} broadcast({ref(base + 'r')}), dimensions={{1}}")
        else:
            fusion_id += 1
            fname = nm(f"fused_computation.{fusion_id}")
            u, bop = pick_unary, pick_binary
            pn = [nm(f"f{fusion_id}.p0"), nm(f"f{fusion_id}.p1")]
            x, y = nm(f"f{fusion_id}.x"), nm(f"f{fusion_id}.y")
            out_fused.append(
                f"%{fname} (p0: f32[32,64], p1: f32[32,64]) -> f32[32,64] {{\n"
                f"  %{pn[0]} = {SHAPE} parameter(0)\n  %{pn[1]} = {SHAPE} parameter(1)\n"
                f"  %{x} = {SHAPE} {u}(%{pn[0]})\n"
                f"  %{y} = {SHAPE} {bop}(%{x}, %{pn[1]})\n"
                f"  ROOT %{nm(f'f{fusion_id}.z')} = {SHAPE} {u}(%{y})\n}}\n")
            emit(base, f"{SHAPE} fusion({ref(a)}, {ref(b)}), kind=kLoop, calls=%{fname}")
        if edit == "insert":
            emit(base + "i", f"{SHAPE} negate({ref(base)})")
            alias[base] = base + "i"
            truth.inserted.add(base + "i")
        vals.append(base)
    root = nm("out")
    entry.append(f"  ROOT %{root} = ({SHAPE}, {SHAPE}) tuple({ref(vals[-1])}, {ref(vals[-2])})")
    head = ("HloModule synthetic\n\n%add_f32 (x: f32[], y: f32[]) -> f32[] {\n"
            "  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n"
            "  ROOT %s = f32[] add(%x, %y)\n}\n\n")
    sig = ", ".join(f"p{k}: f32[32,64]" for k in range(8)) + ", bias: f32[64]"
    return head + "\n".join(out_fused) + f"\nENTRY %main ({sig}) -> (f32[32,64], " \
        f"f32[32,64]) {{\n" + "\n".join(entry) + "\n}\n"


def check(d, truth: Truth) -> str:
    """How many edits the diff reports on the very instruction edited: "found/edits".
    (A removed tanh of a tanh can show as its twin removed: a diff of the same size.)"""
    base = lambda name: name.split(".r")[0]  # noqa: E731
    removed = {d.left.name(i) for i in d.removed}
    added = {base(d.right.name(i)) for i in d.added}
    changed = {li.name: ch.kinds for li, _, ch in d.changed_pairs()}
    found = len(truth.removed & removed) + len(truth.inserted & added)
    found += sum(1 for x in truth.attr if "attributes" in changed.get(x, ()))
    found += sum(1 for x in truth.rewired if changed.get(x) == ["operands"])
    total = len(truth.removed) + len(truth.inserted) + len(truth.attr) + len(truth.rewired)
    extra = len(removed - truth.removed) + len(added - truth.inserted)
    return f"{found}/{total}" + (f" (+{extra} other)" if extra else "")


def pick_edits(n: int, frac: float, seed: int) -> dict[int, int]:
    """One edit per ``frac`` of the instructions, at random generator steps; the step's
    kind decides which edit (see synth)."""
    rng = random.Random(seed + 1)
    steps = rng.sample(range(1, int(n / STEP_SIZE)), max(1, int(n * frac)))
    return {s: rng.randrange(2) for s in steps}


def best_of(repeat: int, fn):
    """(best wall seconds, CPU seconds of that run, value)."""
    best, cpu, value = float("inf"), 0.0, None
    for _ in range(repeat):
        gc.collect()
        c, t = time.process_time(), time.perf_counter()
        value = fn()
        wall = time.perf_counter() - t
        if wall < best:
            best, cpu = wall, time.process_time() - c
    return best, cpu, value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frac", type=float, default=0.01)
    ap.add_argument("--keep-names", action="store_true",
                    help="do not rename the second module (names then break ties)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall time suffers "
          "from other work; CPU time less)")
    print(f"{'instructions':>12} {'parse x2':>8} {'diff wall':>9} {'diff cpu':>8} "
          f"{'text':>6} {'html':>6} {'html MB':>7} {'changed':>7} {'removed':>7} {'added':>5}"
          "  found  edits made")
    times = {}
    for n in (int(s) for s in args.sizes.split(",")):
        edits = pick_edits(n, args.frac, n)
        truth = Truth()
        text_a = synth(n, n)
        text_b = synth(n, n, edits, rename=None if args.keep_names else 7, truth=truth)
        t_parse, _, (a, b) = best_of(1, lambda: (parse_hlo(text_a, "a"),
                                                  parse_hlo(text_b, "b")))
        repeat = args.repeat if n <= 20000 else 1
        t_diff, c_diff, d = best_of(repeat, lambda: diff_modules(a, b))
        t_text, _, _ = best_of(1, lambda: render_text(d))
        t_html, _, page = best_of(1, lambda: render_html(d))
        times[n] = c_diff
        kinds = {"attr": len(truth.attr), "rewire": len(truth.rewired),
                 "remove": len(truth.removed), "insert": len(truth.inserted)}
        print(f"{a.instruction_count():>12} {t_parse:>8.2f} {t_diff:>9.3f} {c_diff:>8.3f} "
              f"{t_text:>6.2f} {t_html:>6.2f} {len(page) / 1e6:>7.1f} {len(d.changes):>7} "
              f"{len(d.removed):>7} {len(d.added):>5}  {check(d, truth)} {kinds}")
    ns = sorted(times)
    for x, y in zip(ns, ns[1:]):
        print(f"growth {x} -> {y}: x{times[y] / times[x]:.1f} CPU time for x{y / x:.0f} size")


if __name__ == "__main__":
    main()
