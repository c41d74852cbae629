"""Interpreter opcode coverage over the real modules.

For every opcode that appears in the corpus (../shared/corpus/xla) and in
sample_modules/, prints: how often it appears (instructions / files), whether the
interpreter has a handler, whether an interpreter unit test runs it (its name appears as
``opcode(`` in HLO text of tests/backends/interpreter/*.py), and whether a sample module
checked against XLA's own outputs (tests/fixtures) uses it.  Ends with the percentages.

    .venv/bin/python scripts/opcode_coverage.py [--all]   # --all: every known opcode
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlo_opt.backends.interpreter import HANDLERS  # noqa: E402
from hlo_opt.errors import HloError  # noqa: E402
from hlo_opt.ir.opcodes import OPCODES  # noqa: E402
from hlo_opt.text.parser import parse_hlo_modules  # noqa: E402
from tests.conftest import corpus_files, sample_files  # noqa: E402

TEST_DIR = ROOT / "tests" / "backends" / "interpreter"
EVALUATOR_BOUND = {"parameter"}  # bound by the evaluator itself, never dispatched


def opcode_counts(paths):
    count = collections.Counter()
    files = collections.defaultdict(set)
    for p in paths:
        try:
            modules = parse_hlo_modules(p.read_text(encoding="utf-8"), str(p))
        except HloError:
            continue
        for m in modules:
            for inst in m.instructions():
                count[inst.opcode] += 1
                files[inst.opcode].add(p.name)
    return count, files


def unit_tested_opcodes() -> set[str]:
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(TEST_DIR.glob("test_*.py")))
    found = set()
    for op in OPCODES:
        if re.search(r"(?<![\w-])" + re.escape(op) + r"\(", text):
            found.add(op)
    # helpers that build one-op modules take the opcode as a string argument
    for m in re.finditer(r"\b(?:unary|binary|one_op)\(\s*\"([a-z-]+)\"", text):
        found.add(m.group(1))
    for m in re.finditer(r"\bone_op\([^,]+,\s*\"([a-z-]+)\"", text):
        found.add(m.group(1))
    # pytest.mark.parametrize tables: ("opcode", reference), ...
    for m in re.finditer(r"\(\s*\"([a-z-]+)\"\s*,", text):
        if m.group(1) in OPCODES:
            found.add(m.group(1))
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="list every known opcode")
    opts = ap.parse_args(argv)
    corpus = corpus_files()
    samples = sample_files()
    count, files = opcode_counts(corpus + samples)
    fixture_ops, _ = opcode_counts(samples)
    tested = unit_tested_opcodes()
    ops = sorted(OPCODES) if opts.all else sorted(count, key=lambda o: (-count[o], o))
    print(f"{'opcode':28} {'insts':>6} {'files':>5}  handler  unit-test  xla-fixture")
    for op in ops:
        handler = op in HANDLERS or op in EVALUATOR_BOUND
        print(f"{op:28} {count.get(op, 0):6} {len(files.get(op, ())):5}  "
              f"{'yes' if handler else 'NO':7}  {'yes' if op in tested else '-':9}  "
              f"{'yes' if op in fixture_ops else '-'}")
    seen = [op for op in count]
    with_handler = [op for op in seen if op in HANDLERS or op in EVALUATOR_BOUND]
    with_test = [op for op in seen if op in tested or op in fixture_ops]
    insts = sum(count.values())
    insts_handled = sum(count[op] for op in with_handler)
    print()
    print(f"modules: {len(corpus)} corpus files, {len(samples)} sample modules")
    print(f"opcodes seen: {len(seen)}; with a handler: {len(with_handler)} "
          f"({100 * len(with_handler) / max(len(seen), 1):.1f}%); tested: {len(with_test)} "
          f"({100 * len(with_test) / max(len(seen), 1):.1f}%)")
    print(f"instructions with a handler: {insts_handled}/{insts} "
          f"({100 * insts_handled / max(insts, 1):.1f}%)")
    missing = sorted(op for op in OPCODES if op not in HANDLERS and op not in EVALUATOR_BOUND)
    print(f"known opcodes without a handler ({len(missing)}): {', '.join(missing) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
