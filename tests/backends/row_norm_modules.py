"""Row-normalisation modules for the backend tests: the FileCheck inputs of
triton-softmax-rewriter plus rows long enough for the block-per-row and looped paths,
each with the rewriter applied (``fused``) beside the module as written (the oracle's)."""
from __future__ import annotations

import functools

from tests.support.lit_chunks import chunks

_SOFTMAX = """HloModule softmax_{name}
%mx (a: {t}[], b: {t}[]) -> {t}[] {{
  %a = {t}[] parameter(0)
  %b = {t}[] parameter(1)
  ROOT %m = {t}[] maximum(%a, %b)
}}
%sum (a: {t}[], b: {t}[]) -> {t}[] {{
  %a = {t}[] parameter(0)
  %b = {t}[] parameter(1)
  ROOT %s = {t}[] add(%a, %b)
}}
ENTRY %main (x: {t}[{rows},{n}]) -> {t}[{rows},{n}] {{
  %x = {t}[{rows},{n}] parameter(0)
  %ninf = {t}[] constant(-inf)
  %rmax = {t}[{rows}] reduce(%x, %ninf), dimensions={{1}}, to_apply=%mx
  %bmax = {t}[{rows},{n}] broadcast(%rmax), dimensions={{0}}
  %e = {t}[{rows},{n}] exponential(subtract(%x, %bmax))
  %zero = {t}[] constant(0)
  %rsum = {t}[{rows}] reduce(%e, %zero), dimensions={{1}}, to_apply=%sum
  %bsum = {t}[{rows},{n}] broadcast(%rsum), dimensions={{0}}
  ROOT %out = {t}[{rows},{n}] divide(%e, %bsum)
}}
"""

_LAYER_NORM = """HloModule layer_norm_{name}
%sum (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}
ENTRY %main (x: f32[{rows},{n}], g: f32[{n}]) -> f32[{rows},{n}] {{
  %x = f32[{rows},{n}] parameter(0)
  %g = f32[{n}] parameter(1)
  %zero = f32[] constant(0)
  %inv = f32[{rows}] broadcast(f32[] constant({inv})), dimensions={{}}
  %s1 = f32[{rows}] reduce(%x, %zero), dimensions={{1}}, to_apply=%sum
  %mean = f32[{rows}] multiply(%s1, %inv)
  %bmean = f32[{rows},{n}] broadcast(%mean), dimensions={{0}}
  %c = f32[{rows},{n}] subtract(%x, %bmean)
  %sq = f32[{rows},{n}] multiply(%c, %c)
  %s2 = f32[{rows}] reduce(%sq, %zero), dimensions={{1}}, to_apply=%sum
  %var = f32[{rows}] multiply(%s2, %inv)
  %eps = f32[{rows}] broadcast(f32[] constant(1e-05)), dimensions={{}}
  %r = f32[{rows}] rsqrt(add(%var, %eps))
  %br = f32[{rows},{n}] broadcast(%r), dimensions={{0}}
  %nrm = f32[{rows},{n}] multiply(%c, %br)
  %bg = f32[{rows},{n}] broadcast(%g), dimensions={{1}}
  ROOT %out = f32[{rows},{n}] multiply(%nrm, %bg)
}}
"""

# softmax backward (y * (dy - sum(dy * y)), y recomputed from s): one fusion of three
# reductions reading two inputs
_SOFTMAX_BACKWARD = """HloModule softmax_backward_{name}
%mx (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}}
%sum (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}
ENTRY %main (x: f32[{rows},{n}], dy: f32[{rows},{n}]) -> f32[{rows},{n}] {{
  %x = f32[{rows},{n}] parameter(0)
  %dy = f32[{rows},{n}] parameter(1)
  %ninf = f32[] constant(-inf)
  %rmax = f32[{rows}] reduce(%x, %ninf), dimensions={{1}}, to_apply=%mx
  %bmax = f32[{rows},{n}] broadcast(%rmax), dimensions={{0}}
  %e = f32[{rows},{n}] exponential(subtract(%x, %bmax))
  %zero = f32[] constant(0)
  %rsum = f32[{rows}] reduce(%e, %zero), dimensions={{1}}, to_apply=%sum
  %bsum = f32[{rows},{n}] broadcast(%rsum), dimensions={{0}}
  %y = f32[{rows},{n}] divide(%e, %bsum)
  %rdot = f32[{rows}] reduce(multiply(%dy, %y), %zero), dimensions={{1}}, to_apply=%sum
  %bdot = f32[{rows},{n}] broadcast(%rdot), dimensions={{0}}
  ROOT %dx = f32[{rows},{n}] multiply(%y, subtract(%dy, %bdot))
}}
"""


def extra_texts() -> list[tuple[str, str]]:
    out = [(f"softmax_{t}_{r}x{n}", _SOFTMAX.format(name=f"{t}_{r}x{n}", t=t, rows=r, n=n))
           for t, r, n in (("f32", 3, 5000), ("bf16", 2, 2500), ("f32", 1, 1),
                           ("f16", 5, 31), ("f64", 4, 4097))]
    out += [(f"layer_norm_{r}x{n}", _LAYER_NORM.format(name=f"{r}x{n}", rows=r, n=n,
                                                       inv=repr(1.0 / n)))
            for r, n in ((3, 3000), (33, 96))]
    out += [(f"softmax_backward_{r}x{n}", _SOFTMAX_BACKWARD.format(name=f"{r}x{n}", rows=r,
                                                                 n=n))
            for r, n in ((3, 5000), (2, 7000))]
    return out


@functools.cache
def cases() -> list:
    """[(name, module as written, module after triton-softmax-rewriter)]: the ones the
    rewriter fuses."""
    from hlo_opt.api import parse_hlo
    from passes.registry import create_pass
    texts = [(c.name, c.text) for c in chunks("triton_softmax_rewriter*.hlo")
             if not c.name.startswith("keep_")] + extra_texts()
    out = []
    for name, text in texts:
        raw = parse_hlo(text)
        fused = raw.clone()
        assert create_pass("triton-softmax-rewriter").run(fused), name
        out.append((name, raw, fused))
    return out


@functools.cache
def merge_cases() -> list:
    """[(name, module as written, module after triton-softmax-rewriter)] of the modules
    whose rows become several fusions (training steps)."""
    from hlo_opt.api import parse_hlo
    from passes.registry import create_pass
    out = []
    for c in chunks("triton_softmax_merge.hlo"):
        raw = parse_hlo(c.text)
        fused = raw.clone()
        assert create_pass("triton-softmax-rewriter").run(fused), c.name
        out.append((c.name, raw, fused))
    return out
