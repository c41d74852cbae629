"""Byte-identical check for the simplification passes: runs ``optimization``,
``simplification`` and ``algsimp`` (default options, layout-sensitive, and with the
value-changing float rewrites on) over every sample module, every corpus module, every lit
test module, a fixed set of random graphs (tests/passes/random_graphs.py) and the gpu bench
module, and writes (``--save``) or compares against (``--compare``) the printed results.

    .venv/bin/python benchmarks/simplification_check.py --save /tmp/algsimp_baseline
    .venv/bin/python benchmarks/simplification_check.py --compare /tmp/algsimp_baseline

A speed-up of a pass must leave every file identical; errors count as output too.  The
random graphs are generated once by ``--save`` (stored as inputs next to the results), so
``--compare`` reruns exactly the same modules.  While other files of the tree change too,
take the baseline from a copy of the current tree with only the files under test restored
(``git show HEAD:<path>``), running this script from that copy.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hlo_opt.errors import HloError  # noqa: E402
from hlo_opt.text.parser import parse_hlo_modules  # noqa: E402
from hlo_opt.text.scan import split_modules  # noqa: E402
from hlo_opt.verifier import module_errors  # noqa: E402
from tests.conftest import corpus_files, sample_files  # noqa: E402

RANDOM_INPUTS = "random_inputs.txt"
_RANDOM_SEP = "\n// ===== random graph =====\n"


def _random_texts(count: int) -> list[str]:
    from hypothesis import HealthCheck, given, settings
    from tests.support.random_graphs import modules
    out: list[str] = []
    for const in (False, True):
        @settings(max_examples=count, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(modules(constant_inputs=const))
        def collect(text):
            out.append(text)
        collect()
    return list(dict.fromkeys(out))


def sources(base: Path, save: bool, random_count: int, bench_sizes) -> list[tuple[str, str]]:
    """(id, module text) for every module checked."""
    out = [(f"sample__{p.stem}", p.read_text()) for p in sample_files()]
    for p in corpus_files():
        out.append((f"corpus__{p.stem}", p.read_text(errors="replace")))
    for p in sorted((ROOT / "tests" / "lit").glob("*.hlo")):
        out.append((f"lit__{p.stem}", p.read_text()))
    rnd = base / RANDOM_INPUTS
    if save:
        texts = _random_texts(random_count)
        rnd.write_text(_RANDOM_SEP.join(texts))
    else:
        texts = rnd.read_text().split(_RANDOM_SEP) if rnd.exists() else []
    for i, t in enumerate(texts):
        out.append((f"random__{i:04d}", t))
    from gpu_pipeline_bench import make_module
    for n in bench_sizes:
        out.append((f"bench__{n}", make_module(n)))
    return out


def _variants():
    from hlo_opt.flags import DebugOptions
    from hlo_opt.passes_api import optimize
    from passes.algsimp import AlgebraicSimplifier, AlgebraicSimplifierOptions

    def pipeline(name):
        def run(m):
            optimize(m, DebugOptions(), pipeline=name, verifier=None)
            return ""
        return run

    def algsimp(**opts):
        def run(m):
            p = AlgebraicSimplifier(AlgebraicSimplifierOptions(**opts))
            p.run(m)
            return ("fired: " + ", ".join(f"{k}={v}" for k, v in sorted(p.last_fired.items()))
                    + "\ninexact: " + ", ".join(f"{k}={v}" for k, v in
                                                sorted(p.last_inexact.items())))
        return run

    return [("optimization", pipeline("optimization")),
            ("simplification", pipeline("simplification")),
            ("algsimp", algsimp()),
            ("algsimp_layout", algsimp(is_layout_sensitive=True)),
            ("algsimp_approx", algsimp(approximate_float_rewrites=True, enable_fast_math=True))]


def results(mid: str, text: str, variants) -> str:
    """Every variant's printed module (or error) for each module of ``text``."""
    parts = []
    chunks = [c for c, _ in split_modules(text)]
    for ci, chunk in enumerate(chunks):
        try:
            modules = parse_hlo_modules(chunk, mid)
        except HloError as e:
            parts.append(f"### chunk {ci}: does not parse: {str(e).splitlines()[0]}")
            continue
        for mi, module in enumerate(modules):
            if module_errors(module):
                parts.append(f"### chunk {ci} module {mi}: rejected by the verifier")
                continue
            for name, run in variants:
                work = module.clone()
                try:
                    extra = run(work)
                    body = work.to_text()
                except Exception as e:  # errors are output too
                    extra, body = "", f"ERROR {type(e).__name__}: {e}"
                parts.append(f"### chunk {ci} module {mi} {name}\n{extra}\n{body}")
    return "\n".join(parts) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--compare", type=Path)
    ap.add_argument("--random", type=int, default=300, help="random graphs per kind")
    ap.add_argument("--bench-sizes", default="1000,10000")
    ap.add_argument("--only", default=None, help="regex on module ids")
    args = ap.parse_args()
    base = args.save or args.compare
    base.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.bench_sizes.split(",") if s]
    variants = _variants()
    diffs = same = new = 0
    for mid, text in sources(base, bool(args.save), args.random, sizes):
        if args.only and not re.search(args.only, mid):
            continue
        out = results(mid, text, variants)
        path = base / f"{mid}.txt"
        if args.save:
            path.write_text(out)
            continue
        old = path.read_text() if path.exists() else None
        if old == out:
            same += 1
            continue
        if old is None:
            new += 1
            print(f"NEW (no saved result): {mid}")
            continue
        diffs += 1
        (base / "diff").mkdir(exist_ok=True)
        (base / "diff" / f"{mid}.txt").write_text(out)
        h = hashlib.sha1(out.encode()).hexdigest()[:8]
        print(f"DIFFERENT: {mid} (new output in {base / 'diff' / (mid + '.txt')}, {h})")
    if args.compare:
        print(f"{same} identical, {diffs} different, {new} without a saved result")
        return 1 if diffs else 0
    print(f"saved to {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
