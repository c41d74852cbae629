"""Repeated diff patterns are counted: "3 x broadcast+maximum folded into fusion"."""
from __future__ import annotations

from hlo_opt.diff import diff_modules
from hlo_opt.diff.render_text import render_text
from hlo_opt.diff.summary import one_line, summarize
from hlo_opt.text.parser import parse_hlo

N = 3


def _module(fused: bool) -> str:
    comps, body = [], []
    prev = "%p"
    for k in range(N):
        body.append(f"  %conv{k} = f32[4,8]{{1,0}} multiply({prev}, %w)")
        if fused:
            comps.append(
                f"%fused_relu.{k} (x: f32[4,8]) -> f32[4,8] {{\n"
                f"  %x.{k} = f32[4,8]{{1,0}} parameter(0)\n"
                f"  %c.{k} = f32[] constant(0)\n"
                f"  %b.{k} = f32[4,8]{{1,0}} broadcast(%c.{k}), dimensions={{}}\n"
                f"  ROOT %m.{k} = f32[4,8]{{1,0}} maximum(%x.{k}, %b.{k})\n}}\n")
            body.append(f"  %relu{k} = f32[4,8]{{1,0}} fusion(%conv{k}), kind=kLoop, "
                        f"calls=%fused_relu.{k}")
        else:
            body.append(f"  %zeros{k} = f32[4,8]{{1,0}} broadcast(%zero), dimensions={{}}")
            body.append(f"  %relu{k} = f32[4,8]{{1,0}} maximum(%conv{k}, %zeros{k})")
        prev = f"%relu{k}"
    body.append(f"  ROOT %out = f32[4,8]{{1,0}} negate({prev})")
    return ("HloModule relus\n\n" + "\n".join(comps) +
            "\nENTRY %main (p: f32[4,8], w: f32[4,8]) -> f32[4,8] {\n"
            "  %p = f32[4,8]{1,0} parameter(0)\n  %w = f32[4,8]{1,0} parameter(1)\n"
            "  %zero = f32[] constant(0)\n" + "\n".join(body) + "\n}\n")


def test_repeated_fusions_are_one_pattern():
    d = diff_modules(parse_hlo(_module(False)), parse_hlo(_module(True)))
    assert [(p.count, p.description) for p in d.patterns] == [
        (N, "broadcast+maximum folded into fusion")]
    assert d.patterns[0].examples == [f"relu{k}" for k in range(N)]
    s = summarize(d)
    # each fusion: the fusion, its parameter and its cloned constant are new; the
    # broadcast and the maximum moved; %zero stays (the fusions clone it)
    assert (s.changed, s.removed, s.added) == (2 * N, 0, 3 * N)
    assert s.kinds == {"moved": 2 * N}
    assert s.comps["added"] == N
    assert f"{N} x broadcast+maximum folded into fusion" in render_text(d)
    assert one_line(d).endswith(f": {N} x broadcast+maximum folded into fusion")


def test_reverse_is_unfused():
    d = diff_modules(parse_hlo(_module(True)), parse_hlo(_module(False)))
    assert [(p.count, p.description) for p in d.patterns] == [
        (N, "broadcast+maximum unfused")]
