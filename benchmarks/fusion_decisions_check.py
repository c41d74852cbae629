"""Prove that a change to the GPU fusion passes (or to what they share: the cost model,
cse, dce, the fusion helpers) changes no fusion decision: the same text, byte for byte,
names included.

    .venv/bin/python benchmarks/fusion_decisions_check.py snapshot  # before the change
    .venv/bin/python benchmarks/fusion_decisions_check.py baseline  # before the change
    ... change the code ...
    .venv/bin/python benchmarks/fusion_decisions_check.py check [--only NAME] [--skip-big]

``snapshot`` runs the ``gpu`` pipeline's stages before ``fusion`` (spmd-simplify ... nvptx
post-layout-assignment part 2) on every sample module, every corpus module the
interpreter takes (as scripts/kernel_table.py enumerates them) and the 10k-instruction
module of gpu_pipeline_bench.py, and writes each result to ``--inputs`` (default
/tmp/fusion_inputs; the modules as read go to ``<inputs>_raw``).  Passes others add to
the earlier stages later do not move the inputs.

``baseline`` runs, on each snapshot, the ``fusion`` fixpoint and ``horizontal-fusion``
with the passes registered at that time (recorded in ``passes.json``: passes registered
later do not move the check), with priority fusion and with the classic passes, and
``cse`` and ``dce`` alone on each snapshot and on each module as read; ``check`` does the
same again and diffs every text against the baseline (``--baseline``, default
/tmp/fusion_baseline).  Exit status 1 when anything differs.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hlo_opt.api import parse_hlo, parse_hlo_modules  # noqa: E402
from hlo_opt.errors import HloError  # noqa: E402
from hlo_opt.flags import DebugOptions  # noqa: E402
from hlo_opt.verifier import module_errors  # noqa: E402
from tests.conftest import corpus_files, sample_files  # noqa: E402

PRE_FUSION_STAGES = 8  # of the gpu pipeline: spmd-simplify ... nvptx part 2
PRIORITY_FUSION = ["variadic-op-splitter", "priority-fusion", "cse", "multi_output_fusion",
                   "cse", "dce"]
CLASSIC_FUSION = ["variadic-op-splitter", ["fusion", {"may_duplicate": False}],
                  ["fusion", {"may_duplicate": True}], "fusion_merger",
                  "multi_output_fusion", "cse", "dce"]
HORIZONTAL = ["horizontal_loop_fusion", "horizontal_input_fusion", "cse", "dce"]


def _run(pipe, module, options) -> None:
    from hlo_opt.pipeline import PipelineRunner
    PipelineRunner(options, verifier=None).run(pipe, module)  # options -> module.config


def _modules():
    """(name, module) of the samples, the corpus modules the interpreter takes, and the
    bench's 10k module."""
    from gpu_pipeline_bench import make_module
    out = []
    for path in list(sample_files()) + list(corpus_files()):
        try:
            modules = parse_hlo_modules(path.read_text(), str(path))
        except HloError:
            continue
        for k, module in enumerate(modules):
            if module_errors(module):
                continue
            stem = path.stem if len(path.stem) <= 60 else \
                f"{path.stem[:60]}_{zlib.crc32(path.stem.encode()):08x}"
            tag = "s_" if path.parent.name == "sample_modules" else "c_"
            out.append((f"{tag}{stem}_{k}", module))
    out.append(("bench_10k", parse_hlo(make_module(10_000), "gpu_bench")))
    return out


def snapshot(inputs: Path) -> None:
    from hlo_opt.pipeline import Pipeline
    from passes.pipelines import build_pipeline
    stages = build_pipeline("gpu").items[:PRE_FUSION_STAGES]
    print("stages before fusion:", ", ".join(s.name for s in stages))
    raw = Path(str(inputs) + "_raw")
    inputs.mkdir(parents=True, exist_ok=True)
    raw.mkdir(parents=True, exist_ok=True)
    n = 0
    for name, module in _modules():
        (raw / f"{name}.hlo").write_text(module.to_text())
        try:
            fresh = build_pipeline("gpu").items[:PRE_FUSION_STAGES]  # new pass instances
            _run(Pipeline("pre-fusion", fresh), module, DebugOptions())
        except HloError as e:
            print(f"skipped {name}: {str(e).splitlines()[0]}")
            continue
        (inputs / f"{name}.hlo").write_text(module.to_text())
        n += 1
    print(f"{n} snapshots in {inputs}")


def _registered() -> dict:
    from passes.registry import pass_names
    names = set(pass_names())

    def keep(items):
        return [i for i in items if (i[0] if isinstance(i, list) else i) in names]
    return {"priority": keep(PRIORITY_FUSION), "classic": keep(CLASSIC_FUSION),
            "horizontal": keep(HORIZONTAL)}


def _stage(passes: dict, classic: bool):
    from hlo_opt.pipeline import Fixpoint, Pipeline
    from passes.registry import create_pass

    def make(item):
        return create_pass(item[0], **item[1]) if isinstance(item, list) else \
            create_pass(item)
    fusion = passes["classic" if classic else "priority"]
    return Pipeline("fusion-check", [
        Fixpoint(Pipeline("fusion", [make(i) for i in fusion]), max_iterations=25),
        Pipeline("horizontal-fusion", [make(i) for i in passes["horizontal"]])])


def _alone(name: str):
    from hlo_opt.pipeline import Pipeline
    from passes.registry import create_pass
    return Pipeline("alone", [create_pass(name)])


def _results(snapshot_path: Path, raw_path: Path, passes: dict) -> dict:
    """{kind: text after} for one snapshot."""
    text = snapshot_path.read_text()
    name = snapshot_path.stem
    out = {}
    for classic in (False, True):
        module = parse_hlo(text, name)
        _run(_stage(passes, classic), module,
             DebugOptions(xla_gpu_enable_priority_fusion=not classic))
        out["classic" if classic else "priority"] = module.to_text()
    sources = [("", text)]
    if raw_path.exists():
        sources.append(("raw_", raw_path.read_text()))
    for prefix, source in sources:
        for p in ("cse", "dce"):
            module = parse_hlo(source, name)
            _run(_alone(p), module, DebugOptions())
            out[prefix + p] = module.to_text()
    return out


def _snapshots(inputs: Path, only: str | None, skip_big: bool):
    for f in sorted(inputs.glob("*.hlo")):
        if (only and only not in f.stem) or (skip_big and f.stem.startswith("bench")):
            continue
        yield f


def baseline(inputs: Path, base: Path) -> None:
    base.mkdir(parents=True, exist_ok=True)
    passes = _registered()
    (base / "passes.json").write_text(json.dumps(passes))
    raw = Path(str(inputs) + "_raw")
    n = 0
    for f in _snapshots(inputs, None, False):
        for kind, text in _results(f, raw / f.name, passes).items():
            (base / f"{f.stem}.{kind}.hlo").write_text(text)
            n += 1
    print(f"{n} results in {base}; passes: {passes}")


def check(inputs: Path, base: Path, only: str | None, skip_big: bool) -> int:
    passes = json.loads((base / "passes.json").read_text())
    raw = Path(str(inputs) + "_raw")
    modules = compared = differ = 0
    t0 = time.process_time()
    for f in _snapshots(inputs, only, skip_big):
        modules += 1
        try:
            results = _results(f, raw / f.name, passes)
        except Exception as e:  # noqa: BLE001 - a crash is a difference too
            import traceback
            traceback.print_exc()
            print(f"ERROR {f.stem}: {e!r}")
            differ += 1
            continue
        for kind, text in results.items():
            want = (base / f"{f.stem}.{kind}.hlo").read_text()
            compared += 1
            if text != want:
                differ += 1
                print(f"DIFF {f.stem} [{kind}]")
                sys.stdout.writelines(list(difflib.unified_diff(
                    want.splitlines(True), text.splitlines(True), "baseline", "now", n=1))[:40])
    print(f"{modules} modules, {compared} outputs compared, {differ} differ "
          f"({time.process_time() - t0:.0f} s CPU)")
    return 1 if differ else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["snapshot", "baseline", "check"])
    ap.add_argument("--inputs", type=Path, default=Path("/tmp/fusion_inputs"))
    ap.add_argument("--baseline", type=Path, default=Path("/tmp/fusion_baseline"))
    ap.add_argument("--only", default=None, help="only snapshots whose name contains this")
    ap.add_argument("--skip-big", action="store_true", help="leave out the 10k module")
    args = ap.parse_args(argv)
    if args.command == "snapshot":
        snapshot(args.inputs)
        return 0
    if args.command == "baseline":
        baseline(args.inputs, args.baseline)
        return 0
    return check(args.inputs, args.baseline, args.only, args.skip_big)


if __name__ == "__main__":
    sys.exit(main())
