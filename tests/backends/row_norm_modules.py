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

# the max and sum reducers the multi-reduction modules share
REDUCERS = """%mx (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""

# softmax backward (y * (dy - sum(dy * y)), y recomputed from s): one fusion of three
# reductions reading two inputs
_SOFTMAX_BACKWARD = """HloModule softmax_backward_{name}
{reducers}ENTRY %main (x: f32[{rows},{n}], dy: f32[{rows},{n}]) -> f32[{rows},{n}] {{
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
                                                                 n=n, reducers=REDUCERS))
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


def random_training_text(seed: int) -> str:
    """A seeded module of rows f32[2,3,16] in the shape of a training step: a max
    diamond on ``x``, then random elementwise ops, row reductions broadcast back, a scale
    vector (or a product of it), products in a gemm's 2-D view (bitcasts), and a few of the values (rows,
    per-row values, a column reduction) as outputs, so that the rewriter's kernels share
    and recompute producers."""
    import random
    r = random.Random(seed)
    rows, per_row, flat = "f32[2,3,16]", "f32[2,3]", "f32[6,16]"
    lines = [f"  %x = {rows} parameter(0)", f"  %y = {rows} parameter(1)",
             "  %g = f32[16] parameter(2)", f"  %z = {flat} parameter(3)",
             "  %zero = f32[] constant(0)", "  %ninf = f32[] constant(-inf)"]
    shapes: dict = {}

    def new(expr, shape):
        name = f"v{len(shapes)}"
        shapes[name] = shape
        lines.append(f"  %{name} = {shape} {expr}")
        return name
    m = new("reduce(%x, %ninf), dimensions={2}, to_apply=%mx", per_row)
    b = new(f"broadcast(%{m}), dimensions={{0,1}}", rows)
    rv, pv, tv = ["x", "y", new(f"subtract(%x, %{b})", rows)], [], ["z"]
    for _ in range(r.randint(6, 16)):
        c = r.random()
        if c < 0.2:
            op = r.choice(["exponential", "negate", "tanh", "abs"])
            rv.append(new(f"{op}(%{r.choice(rv)})", rows))
        elif c < 0.5:
            op = r.choice(["add", "multiply", "subtract", "maximum"])
            rv.append(new(f"{op}(%{r.choice(rv)}, %{r.choice(rv)})", rows))
        elif c < 0.7:
            red, init = r.choice([("sum", "zero"), ("mx", "ninf")])
            v = new(f"reduce(%{r.choice(rv)}, %{init}), dimensions={{2}}, to_apply=%{red}",
                    per_row)
            if r.random() < 0.5:
                v = new(f"multiply(%{v}, %{v})", per_row)
            pv.append(v)
            rv.append(new(f"broadcast(%{v}), dimensions={{0,1}}", rows))
        elif c < 0.8:
            vec = "g" if r.random() < 0.5 else new("multiply(%g, %g)", "f32[16]")
            rv.append(new(f"broadcast(%{vec}), dimensions={{2}}", rows))
        else:
            t = new(f"bitcast(%{r.choice(rv)})", flat)
            tv.append(new(f"multiply(%{t}, %{r.choice(tv)})", flat))
            if r.random() < 0.5:
                rv.append(new(f"bitcast(%{tv[-1]})", rows))
    outs = r.sample(rv[3:] or rv[2:], r.randint(1, min(3, len(rv[3:]) or 1)))
    outs += r.sample(pv, min(len(pv), r.randint(0, 1)))
    if r.random() < 0.5:
        outs.append(new(f"reduce(%{r.choice(tv)}, %zero), dimensions={{0}}, to_apply=%sum",
                        "f32[16]"))
    out_shapes = ", ".join(shapes.get(o, rows) for o in outs)
    lines.append(f"  ROOT %out = ({out_shapes}) tuple({', '.join('%' + o for o in outs)})")
    return f"""HloModule random_training_{seed}
{REDUCERS}ENTRY %main (x: {rows}, y: {rows}, g: f32[16], z: {flat}) -> ({out_shapes}) {{
""" + "\n".join(lines) + "\n}\n"
