"""Per-pass text dumps vs the pipeline alone, on a ~3,000-instruction module.

The module is an MLP-shaped JAX-style program (dot + bias + relu per layer, the relu also
reached through a ``call`` as ``jax.jit`` nests it, tuple plumbing, repeated constants and
dead values), so every pass of ``--pipeline=optimization`` has real work.

Prints (N interleaved runs: best time each, median of the per-run ratios):
  - the pipeline alone (no dumps, no stats),
  - with ``--xla_dump_to=DIR --xla_dump_hlo_pass_re=.*`` (XLA's "dump every changing pass"),
  - with ``--xla_dump_hlo_pass_re=.+`` (every pass dumped, changed or not),
and the ratios.  The target is under 2x for ``.*``.  ``--html`` adds, in the same
interleaved runs, ``.*`` dumped as HTML pages only (``--xla_dump_hlo_as_html``) and prints
the HTML dumps' cost (their time over the pipeline alone) as a ratio to the text dumps'
(target: at most 1.5); ``--html-every`` does the same for every pass (``.+``).
``--gpu N`` runs benchmarks/gpu_pipeline_bench.py's N-instruction module through the
``gpu`` pipeline instead.

    python benchmarks/dump_bench.py [--layers 200 | --gpu 10000] [--runs 5]
        [--html | --html-every]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hlo_opt import passes_api  # noqa: E402
from hlo_opt.api import parse_hlo  # noqa: E402
from hlo_opt.dump import html as html_mod  # noqa: E402
from hlo_opt.flags import DebugOptions  # noqa: E402


def make_module(layers: int, batch: int = 64, width: int = 128) -> str:
    act = f"f32[{batch},{width}]"
    lines = [f"HloModule jit_mlp_{layers}", "",
             f"%relu (x: {act}) -> {act} {{",
             f"  %x = {act} parameter(0)",
             "  %z = f32[] constant(0)",
             f"  %zb = {act} broadcast(%z), dimensions={{}}",
             f"  ROOT %m = {act} maximum(%x, %zb)",
             "}", ""]
    params = [f"input: {act}"] + [f"w{i}: f32[{width},{width}], b{i}: f32[{width}]"
                                  for i in range(layers)]
    lines.append(f"ENTRY %main ({', '.join(params)}) -> {act} {{")
    lines.append(f"  %input = {act} parameter(0)")
    h = "%input"
    for i in range(layers):
        meta = f'metadata={{op_type="Dense" op_name="mlp/layer_{i}/dense"}}'
        lines += [
            f"  %w{i} = f32[{width},{width}] parameter({2 * i + 1})",
            f"  %b{i} = f32[{width}] parameter({2 * i + 2})",
            f"  %dot.{i} = {act} dot({h}, %w{i}), lhs_contracting_dims={{1}}, "
            f"rhs_contracting_dims={{0}}, {meta}",
            f"  %bb.{i} = {act} broadcast(%b{i}), dimensions={{1}}",
            f"  %add.{i} = {act} add(%dot.{i}, %bb.{i}), {meta}",
            f"  %zero.{i} = f32[] constant(0)",
            f"  %zb.{i} = {act} broadcast(%zero.{i}), dimensions={{}}",
            f"  %relu.{i} = {act} maximum(%add.{i}, %zb.{i})",
            f"  %act.{i} = {act} call(%add.{i}), to_apply=%relu",
            f"  %t.{i} = ({act}, {act}) tuple(%relu.{i}, %act.{i})",
            f"  %g0.{i} = {act} get-tuple-element(%t.{i}), index=0",
            f"  %g1.{i} = {act} get-tuple-element(%t.{i}), index=1",
            f"  %avg.{i} = {act} add(%g0.{i}, %g1.{i})",
            f"  %half.{i} = f32[] constant(0.5)",
            f"  %hb.{i} = {act} broadcast(%half.{i}), dimensions={{}}",
            f"  %h.{i} = {act} multiply(%avg.{i}, %hb.{i})",
            f"  %dead.{i} = {act} exponential(%h.{i})",
        ]
        h = f"%h.{i}"
    lines.append(f"  ROOT %out = {act} negate({h})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def time_optimize(text: str, options: DebugOptions | None, dump_dir: str | None,
                  pipeline: str = "optimization") -> float:
    module = parse_hlo(text, "<bench>")
    if dump_dir is not None:
        shutil.rmtree(dump_dir, ignore_errors=True)
    # each run starts cold (older versions of the HTML writer kept caches across pages)
    clear = getattr(html_mod, "clear_fragment_cache", None)
    if clear is not None:
        clear()
    t0 = time.perf_counter()
    passes_api.optimize(module, options or DebugOptions(), pipeline=pipeline)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gpu", type=int, metavar="N", default=0,
                    help="gpu_pipeline_bench.py's N-instruction module, gpu pipeline")
    ap.add_argument("--html", action="store_true", help="also time HTML dumps (.*)")
    ap.add_argument("--html-every", action="store_true",
                    help="also time HTML dumps of every pass (.+)")
    args = ap.parse_args()
    pipeline = "optimization"
    if args.gpu:
        from benchmarks.gpu_pipeline_bench import make_module as make_gpu_module
        text, pipeline = make_gpu_module(args.gpu), "gpu"
    else:
        text = make_module(args.layers)
    module = parse_hlo(text, "<bench>")
    print(f"module: {module.instruction_count()} instructions "
          f"({module.entry.instruction_count()} in the entry), {len(text) / 1e6:.2f} MB text")
    tmp = tempfile.mkdtemp(prefix="hlo-opt-dump-bench-")
    d_all = os.path.join(tmp, "changed")
    d_every = os.path.join(tmp, "every")
    opts_all = DebugOptions(xla_dump_to=d_all, xla_dump_hlo_pass_re=".*")
    opts_every = DebugOptions(xla_dump_to=d_every, xla_dump_hlo_pass_re=".+")
    d_html = os.path.join(tmp, "html")
    html_re = ".+" if args.html_every else ".*"
    opts_html = DebugOptions(xla_dump_to=d_html, xla_dump_hlo_pass_re=html_re,
                             xla_dump_hlo_as_html=True)
    want_html = args.html or args.html_every
    plain, changed, every, html = [], [], [], []
    try:
        time_optimize(text, None, None, pipeline)  # warm-up (imports, caches)
        for _ in range(args.runs):  # interleaved, so load drift hits all three alike
            plain.append(time_optimize(text, None, None, pipeline))
            changed.append(time_optimize(text, opts_all, d_all, pipeline))
            every.append(time_optimize(text, opts_every, d_every, pipeline))
            if want_html:
                html.append(time_optimize(text, opts_html, d_html, pipeline))
        n_changed = len([f for f in os.listdir(d_all) if f.endswith(".txt")])
        n_every = len([f for f in os.listdir(d_every) if f.endswith(".txt")])
        n_html = len([f for f in os.listdir(d_html) if f.endswith(".html")]) if html else 0
        size = sum(os.path.getsize(os.path.join(d_all, f)) for f in os.listdir(d_all))
        after = parse_hlo(text, "<bench>")
        passes_api.optimize(after, DebugOptions(), pipeline=pipeline)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratio_changed = statistics.median(c / p for c, p in zip(changed, plain))
    ratio_every = statistics.median(e / p for e, p in zip(every, plain))
    print(f"after --pipeline={pipeline}: {after.instruction_count()} instructions")
    print(f"{args.runs} interleaved runs; best time, median of the per-run ratios:")
    print(f"pipeline alone                        {min(plain) * 1000:8.1f} ms")
    print(f"dump_hlo_pass_re=.*  ({n_changed:2d} text files)  {min(changed) * 1000:8.1f} ms"
          f"   ratio {ratio_changed:.2f}x  ({size / 1e6:.1f} MB written)")
    print(f"dump_hlo_pass_re=.+  ({n_every:2d} text files)  {min(every) * 1000:8.1f} ms"
          f"   ratio {ratio_every:.2f}x")
    print(f"target (< 2x with .*): {'met' if ratio_changed < 2.0 else 'NOT met'}")
    if html:
        text_runs = every if args.html_every else changed
        costs = [(h - p) / max(c - p, 1e-9) for h, c, p in zip(html, text_runs, plain)]
        print(f"dump_hlo_pass_re={html_re} as HTML ({n_html:2d} pages)  "
              f"{min(html) * 1000:8.1f} ms"
              f"   ratio {statistics.median(h / p for h, p in zip(html, plain)):.2f}x")
        print(f"HTML dump cost / text dump cost with {html_re} (time over the pipeline "
              f"alone): {statistics.median(costs):.2f} median of "
              f"{', '.join(f'{c:.2f}' for c in costs)}; "
              f"per page {(statistics.median(html) - statistics.median(plain)) / max(n_html, 1) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
