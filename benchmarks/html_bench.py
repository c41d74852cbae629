"""How fast does a dumped HTML page of a ~3,000-instruction module render in Chromium?

Builds a transformer-like stack of MLP + layer-norm blocks (dots, kLoop/kInput fusions,
multi-output reductions, get-tuple-elements, per-layer weights, op metadata) with about
3,000 instructions, writes its HTML page self-contained and with shared assets, loads
each in headless Chromium from file:// with the network unreachable, and reports the
wall-clock time from navigation until the page sets ``data-rendered-nodes`` (target: under
3 s), the page's own layout time, page sizes, and that no request left the machine.

    .venv/bin/python benchmarks/html_bench.py [--instructions 3000] [--runs 3] [--json]

Needs /usr/bin/chromium (Debian: ``apt-get install -y chromium``); without it the
script prints the page sizes and says why it did not time the browser.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlo_opt.api import parse_hlo  # noqa: E402
from hlo_opt.dump.html import module_to_html, write_shared_assets  # noqa: E402
from tests.dump.chromium_driver import Chromium, chromium_path  # noqa: E402

B, H, F = 32, 256, 1024   # batch, hidden, feed-forward widths


def _md(layer: int, op_type: str, what: str) -> str:
    return (f'metadata={{op_type="{op_type}" op_name="model/layer_{layer}/{what}" '
            f'source_file="model.py" source_line={100 + layer}}}')


def _layer_computations(n: int) -> str:
    return f"""
%fused_gelu.{n} (p0: f32[{B},{F}], p1: f32[{F}]) -> f32[{B},{F}] {{
  %p0.g{n} = f32[{B},{F}]{{1,0}} parameter(0)
  %p1.g{n} = f32[{F}]{{0}} parameter(1)
  %broadcast.g{n}.0 = f32[{B},{F}]{{1,0}} broadcast(%p1.g{n}), dimensions={{1}}
  %add.g{n}.0 = f32[{B},{F}]{{1,0}} add(%p0.g{n}, %broadcast.g{n}.0), {_md(n, "BiasAdd", "ff1/bias")}
  %constant.g{n}.0 = f32[] constant(0.70710678)
  %broadcast.g{n}.1 = f32[{B},{F}]{{1,0}} broadcast(%constant.g{n}.0), dimensions={{}}
  %multiply.g{n}.0 = f32[{B},{F}]{{1,0}} multiply(%add.g{n}.0, %broadcast.g{n}.1), {_md(n, "Gelu", "gelu/mul")}
  %erf.g{n} = f32[{B},{F}]{{1,0}} erf(%multiply.g{n}.0), {_md(n, "Gelu", "gelu/erf")}
  %constant.g{n}.1 = f32[] constant(1)
  %broadcast.g{n}.2 = f32[{B},{F}]{{1,0}} broadcast(%constant.g{n}.1), dimensions={{}}
  %add.g{n}.1 = f32[{B},{F}]{{1,0}} add(%erf.g{n}, %broadcast.g{n}.2), {_md(n, "Gelu", "gelu/add")}
  %constant.g{n}.2 = f32[] constant(0.5)
  %broadcast.g{n}.3 = f32[{B},{F}]{{1,0}} broadcast(%constant.g{n}.2), dimensions={{}}
  %multiply.g{n}.1 = f32[{B},{F}]{{1,0}} multiply(%add.g{n}.0, %broadcast.g{n}.3), {_md(n, "Gelu", "gelu/half")}
  ROOT %multiply.g{n}.2 = f32[{B},{F}]{{1,0}} multiply(%multiply.g{n}.1, %add.g{n}.1), {_md(n, "Gelu", "gelu/out")}
}}

%fused_residual.{n} (p0: f32[{B},{H}], p1: f32[{H}], p2: f32[{B},{H}]) -> f32[{B},{H}] {{
  %p0.r{n} = f32[{B},{H}]{{1,0}} parameter(0)
  %p1.r{n} = f32[{H}]{{0}} parameter(1)
  %p2.r{n} = f32[{B},{H}]{{1,0}} parameter(2)
  %broadcast.r{n} = f32[{B},{H}]{{1,0}} broadcast(%p1.r{n}), dimensions={{1}}
  %add.r{n}.0 = f32[{B},{H}]{{1,0}} add(%p0.r{n}, %broadcast.r{n}), {_md(n, "BiasAdd", "ff2/bias")}
  ROOT %add.r{n}.1 = f32[{B},{H}]{{1,0}} add(%add.r{n}.0, %p2.r{n}), {_md(n, "AddV2", "residual")}
}}

%fused_ln_stats.{n} (p0: f32[{B},{H}]) -> (f32[{B}], f32[{B}]) {{
  %p0.s{n} = f32[{B},{H}]{{1,0}} parameter(0)
  %constant.s{n}.0 = f32[] constant(0)
  %reduce.s{n}.0 = f32[{B}]{{0}} reduce(%p0.s{n}, %constant.s{n}.0), dimensions={{1}}, to_apply=%add_f32, {_md(n, "Mean", "ln/mean")}
  %multiply.s{n}.0 = f32[{B},{H}]{{1,0}} multiply(%p0.s{n}, %p0.s{n})
  %reduce.s{n}.1 = f32[{B}]{{0}} reduce(%multiply.s{n}.0, %constant.s{n}.0), dimensions={{1}}, to_apply=%add_f32, {_md(n, "Mean", "ln/meansq")}
  %constant.s{n}.1 = f32[] constant(0.00390625)
  %broadcast.s{n} = f32[{B}]{{0}} broadcast(%constant.s{n}.1), dimensions={{}}
  %multiply.s{n}.1 = f32[{B}]{{0}} multiply(%reduce.s{n}.0, %broadcast.s{n})
  %multiply.s{n}.2 = f32[{B}]{{0}} multiply(%reduce.s{n}.1, %broadcast.s{n})
  ROOT %tuple.s{n} = (f32[{B}]{{0}}, f32[{B}]{{0}}) tuple(%multiply.s{n}.1, %multiply.s{n}.2)
}}

%fused_ln_norm.{n} (p0: f32[{B},{H}], p1: f32[{B}], p2: f32[{B}], p3: f32[{H}], p4: f32[{H}]) -> f32[{B},{H}] {{
  %p0.n{n} = f32[{B},{H}]{{1,0}} parameter(0)
  %p1.n{n} = f32[{B}]{{0}} parameter(1)
  %p2.n{n} = f32[{B}]{{0}} parameter(2)
  %p3.n{n} = f32[{H}]{{0}} parameter(3)
  %p4.n{n} = f32[{H}]{{0}} parameter(4)
  %multiply.n{n}.0 = f32[{B}]{{0}} multiply(%p1.n{n}, %p1.n{n})
  %subtract.n{n}.0 = f32[{B}]{{0}} subtract(%p2.n{n}, %multiply.n{n}.0), {_md(n, "Variance", "ln/var")}
  %constant.n{n} = f32[] constant(1e-05)
  %broadcast.n{n}.0 = f32[{B}]{{0}} broadcast(%constant.n{n}), dimensions={{}}
  %add.n{n}.0 = f32[{B}]{{0}} add(%subtract.n{n}.0, %broadcast.n{n}.0)
  %rsqrt.n{n} = f32[{B}]{{0}} rsqrt(%add.n{n}.0), {_md(n, "Rsqrt", "ln/rsqrt")}
  %broadcast.n{n}.1 = f32[{B},{H}]{{1,0}} broadcast(%p1.n{n}), dimensions={{0}}
  %subtract.n{n}.1 = f32[{B},{H}]{{1,0}} subtract(%p0.n{n}, %broadcast.n{n}.1)
  %broadcast.n{n}.2 = f32[{B},{H}]{{1,0}} broadcast(%rsqrt.n{n}), dimensions={{0}}
  %multiply.n{n}.1 = f32[{B},{H}]{{1,0}} multiply(%subtract.n{n}.1, %broadcast.n{n}.2)
  %broadcast.n{n}.3 = f32[{B},{H}]{{1,0}} broadcast(%p3.n{n}), dimensions={{1}}
  %multiply.n{n}.2 = f32[{B},{H}]{{1,0}} multiply(%multiply.n{n}.1, %broadcast.n{n}.3), {_md(n, "Mul", "ln/gamma")}
  %broadcast.n{n}.4 = f32[{B},{H}]{{1,0}} broadcast(%p4.n{n}), dimensions={{1}}
  ROOT %add.n{n}.1 = f32[{B},{H}]{{1,0}} add(%multiply.n{n}.2, %broadcast.n{n}.4), {_md(n, "AddV2", "ln/beta")}
}}
"""


def _layer_entry(n: int, x: str, first_param: int) -> tuple[list[str], list[str], str]:
    k = first_param
    params = [f"w1.{n}: f32[{H},{F}]", f"b1.{n}: f32[{F}]", f"w2.{n}: f32[{F},{H}]",
              f"b2.{n}: f32[{H}]", f"gamma.{n}: f32[{H}]", f"beta.{n}: f32[{H}]"]
    lines = [
        f"  %w1.{n} = f32[{H},{F}]{{1,0}} parameter({k})",
        f"  %b1.{n} = f32[{F}]{{0}} parameter({k + 1})",
        f"  %w2.{n} = f32[{F},{H}]{{1,0}} parameter({k + 2})",
        f"  %b2.{n} = f32[{H}]{{0}} parameter({k + 3})",
        f"  %gamma.{n} = f32[{H}]{{0}} parameter({k + 4})",
        f"  %beta.{n} = f32[{H}]{{0}} parameter({k + 5})",
        f"  %dot.{n}.0 = f32[{B},{F}]{{1,0}} dot(%{x}, %w1.{n}), lhs_contracting_dims={{1}}, "
        f"rhs_contracting_dims={{0}}, {_md(n, 'MatMul', 'ff1/matmul')}",
        f"  %fusion.{n}.0 = f32[{B},{F}]{{1,0}} fusion(%dot.{n}.0, %b1.{n}), kind=kLoop, "
        f"calls=%fused_gelu.{n}",
        f"  %dot.{n}.1 = f32[{B},{H}]{{1,0}} dot(%fusion.{n}.0, %w2.{n}), lhs_contracting_dims={{1}}, "
        f"rhs_contracting_dims={{0}}, {_md(n, 'MatMul', 'ff2/matmul')}",
        f"  %fusion.{n}.1 = f32[{B},{H}]{{1,0}} fusion(%dot.{n}.1, %b2.{n}, %{x}), kind=kLoop, "
        f"calls=%fused_residual.{n}",
        f"  %fusion.{n}.2 = (f32[{B}]{{0}}, f32[{B}]{{0}}) fusion(%fusion.{n}.1), kind=kInput, "
        f"calls=%fused_ln_stats.{n}",
        f"  %get-tuple-element.{n}.0 = f32[{B}]{{0}} get-tuple-element(%fusion.{n}.2), index=0",
        f"  %get-tuple-element.{n}.1 = f32[{B}]{{0}} get-tuple-element(%fusion.{n}.2), index=1",
        f"  %fusion.{n}.3 = f32[{B},{H}]{{1,0}} fusion(%fusion.{n}.1, %get-tuple-element.{n}.0, "
        f"%get-tuple-element.{n}.1, %gamma.{n}, %beta.{n}), kind=kLoop, calls=%fused_ln_norm.{n}",
    ]
    return params, lines, f"fusion.{n}.3"


INSTRUCTIONS_PER_LAYER = 14 + 15 + 6 + 10 + 18


def make_module_text(instructions: int = 3000) -> str:
    """HLO text of a layer stack with about ``instructions`` instructions."""
    layers = max(1, round((instructions - 6) / INSTRUCTIONS_PER_LAYER))
    parts = [f"HloModule mlp_stack_{layers}\n",
             "%add_f32 (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
             "  %b = f32[] parameter(1)\n  ROOT %add = f32[] add(%a, %b)\n}\n"]
    params = [f"x: f32[{B},{H}]"]
    body = [f"  %x = f32[{B},{H}]{{1,0}} parameter(0)"]
    current = "x"
    for n in range(layers):
        parts.append(_layer_computations(n))
        p, lines, current = _layer_entry(n, current, len(params))
        params += p
        body += lines
    body.append(f"  ROOT %copy.out = f32[{B},{H}]{{1,0}} copy(%{current})")
    parts.append(f"ENTRY %main ({', '.join(params)}) -> f32[{B},{H}] {{\n"
                 + "\n".join(body) + "\n}\n")
    return "\n".join(parts)


def _time_pages(module, tmp: str, stem: str, runs: int) -> dict:
    """Write both page kinds for ``module`` and time each in fresh headless Chromiums."""
    result = {"instructions": module.instruction_count()}
    t0 = time.perf_counter()
    self_contained = module_to_html(module, stem)
    result["python_render_s"] = round(time.perf_counter() - t0, 3)
    href = write_shared_assets(tmp)
    pages = {"self_contained": os.path.join(tmp, f"{stem}.self.html"),
             "shared_assets": os.path.join(tmp, f"{stem}.html")}
    for path, text in ((pages["self_contained"], self_contained),
                       (pages["shared_assets"], module_to_html(module, stem, href))):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    result["self_contained_bytes"] = os.path.getsize(pages["self_contained"])
    result["shared_page_bytes"] = os.path.getsize(pages["shared_assets"])
    result["shared_assets_bytes"] = sum(p.stat().st_size for p in Path(tmp, href).iterdir())
    if chromium_path() is None:
        return result
    for mode, path in pages.items():
        walls, pages_ms, layouts, nodes, remote, errors, view = [], [], [], None, [], [], None
        for _ in range(runs):
            with Chromium() as browser:  # a fresh browser: nothing compiled or cached
                r = browser.load("file://" + path, timeout=120)
            if r.seconds_to_render is None:
                errors.append("no data-rendered-nodes within 120 s")
                continue
            walls.append(r.seconds_to_render)
            pages_ms.append(r.page_render_ms or 0.0)
            layouts.append(float(r.body_attrs.get("data-layout-ms", "nan")))
            nodes, view = r.rendered_nodes, r.body_attrs.get("data-view-mode")
            remote += r.remote_requests
            errors += r.errors
        result[mode] = {
            "seconds_to_rendered_nodes_median": round(statistics.median(walls), 3)
            if walls else None,
            "seconds_to_rendered_nodes_all": [round(w, 3) for w in walls],
            "page_render_ms_median": statistics.median(pages_ms) if pages_ms else None,
            "first_view_layout_ms_median": statistics.median(layouts) if layouts else None,
            "rendered_nodes": nodes, "view_mode": view, "remote_requests": remote,
            "errors": errors[:5],
        }
    return result


# 34 layers: 478 top-level nodes with fusions collapsed, the biggest view drawn whole.
FULL_VIEW_LAYERS = 34


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructions", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    scenarios = {
        f"{args.instructions} instructions": make_module_text(args.instructions),
        "one view at the node cap": make_module_text(
            FULL_VIEW_LAYERS * INSTRUCTIONS_PER_LAYER + 6),
    }
    result = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg()[0],
              "chromium": chromium_path() or "not found (apt-get install -y chromium)"}
    with tempfile.TemporaryDirectory(prefix="hlo-opt-html-bench-") as tmp:
        for k, (name, text) in enumerate(scenarios.items()):
            module = parse_hlo(text, "<html_bench>")
            result[name] = _time_pages(module, tmp, f"bench{k}", args.runs)
    result["load_average_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"machine: {result['cpus']} CPUs, load average {result['load_average_before']:.1f} "
          f"before, {result['load_average_after']:.1f} after (timings scale with load)")
    for name in scenarios:
        s = result[name]
        print(f"== {name}: {s['instructions']} instructions; Python page render "
              f"{s['python_render_s']} s; page size self-contained "
              f"{s['self_contained_bytes'] / 1e6:.2f} MB, with shared assets "
              f"{s['shared_page_bytes'] / 1e6:.3f} MB (+ {s['shared_assets_bytes'] / 1e6:.2f} MB "
              f"of assets once per dump directory)")
        if chromium_path() is None:
            print("   browser not timed: /usr/bin/chromium not found "
                  "(apt-get install -y chromium)")
            continue
        for mode in ("self_contained", "shared_assets"):
            r = s[mode]
            med = r["seconds_to_rendered_nodes_median"]
            verdict = "OK" if med is not None and med < 3.0 else "OVER the 3 s target"
            print(f"   {mode}: data-rendered-nodes={r['rendered_nodes']} ({r['view_mode']}) "
                  f"after {med} s median of {r['seconds_to_rendered_nodes_all']} "
                  f"[{verdict}]; page clock {r['page_render_ms_median']} ms, first layout "
                  f"{r['first_view_layout_ms_median']} ms; remote requests: "
                  f"{len(r['remote_requests'])}; errors: {r['errors'] or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
