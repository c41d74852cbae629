"""Random small well-typed HLO modules for property tests (hypothesis).

``module_text(draw)`` builds an entry computation from 1-3 parameters through 3-14 random
steps: elementwise unary/binary ops (also against broadcast constants such as 0, 1, 2,
-1 so that the simplifier's identities fire), compare/select, reshape, transpose,
broadcast, reverse, slice, pad, concatenate, convert and add-reductions.  Every value
keeps one element type per module (f32 or s32) apart from compares (pred).
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

_F_UNARY = ["negate", "abs", "exponential", "tanh", "floor", "sign", "sqrt", "log"]
_I_UNARY = ["negate", "abs", "not", "sign"]
_F_BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "divide", "power"]
_I_BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor"]
_F_CONSTS = ["0", "1", "2", "-1", "0.5", "-0", "3", "0.25"]
_I_CONSTS = ["0", "1", "2", "-1", "3", "4", "7"]


def _shape(et, dims):
    return f"{et}[{','.join(map(str, dims))}]"


class _Builder:
    def __init__(self, et):
        self.et = et
        self.lines: list[str] = []
        self.values: list[tuple[str, tuple]] = []  # (name, dims) of et-typed values
        self.n = 0
        self.needs_add = False

    def emit(self, dims, text, et=None):
        self.n += 1
        name = f"v{self.n}"
        self.lines.append(f"  %{name} = {_shape(et or self.et, dims)} {text}")
        if et is None or et == self.et:
            self.values.append((name, tuple(dims)))
        return name

    def const_bcast(self, value, dims):
        c = self.emit((), f"constant({value})")
        self.values.pop()
        if not dims:
            return c
        b = self.emit(dims, f"broadcast(%{c}), dimensions={{}}")
        self.values.pop()
        return b


def _factor_shape(draw, n):
    """A random shape with ``n`` elements (rank <= 3)."""
    dims = []
    rest = n
    for _ in range(draw(st.integers(0, 2))):
        divs = [d for d in range(1, rest + 1) if rest % d == 0]
        d = draw(st.sampled_from(divs))
        dims.append(d)
        rest //= d
    dims.append(rest)
    if rest == 1 and draw(st.booleans()):
        dims.pop()
    return tuple(dims) if math.prod(dims) == n else (n,)


def _literal(draw, et, dims):
    n = math.prod(dims)
    if et == "f32":
        vals = [draw(st.sampled_from(["0", "1", "-1", "0.5", "2.25", "-3", "1e-3", "7"]))
                for _ in range(n)]
    else:
        vals = [str(draw(st.integers(-9, 9))) for _ in range(n)]
    if not dims:
        return vals[0]

    def nest(vals, dims):
        if len(dims) == 1:
            return "{" + ", ".join(vals) + "}"
        step = len(vals) // dims[0]
        return "{ " + ", ".join(nest(vals[i * step:(i + 1) * step], dims[1:])
                                for i in range(dims[0])) + " }"
    return nest(vals, list(dims))


def module_text(draw, constant_inputs: bool = False) -> str:
    """``constant_inputs``: the inputs are constants (for constant folding), not
    parameters."""
    et = draw(st.sampled_from(["f32", "s32"]))
    floaty = et == "f32"
    b = _Builder(et)
    rank = draw(st.integers(0, 3))
    base = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    nparams = draw(st.integers(1, 3))
    params = []
    for i in range(nparams):
        dims = base if i == 0 or draw(st.booleans()) else tuple(
            draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
        if constant_inputs:
            b.lines.append(f"  %p{i} = {_shape(et, dims)} constant({_literal(draw, et, dims)})")
        else:
            params.append((f"p{i}", dims))
            b.lines.append(f"  %p{i} = {_shape(et, dims)} parameter({i})")
        b.values.append((f"p{i}", dims))
    for _ in range(draw(st.integers(3, 14))):
        name, dims = draw(st.sampled_from(b.values))
        kind = draw(st.sampled_from(["unary", "binary", "binary_const", "binary_const",
                                     "reshape", "transpose", "broadcast", "reverse", "slice",
                                     "pad", "concat", "select", "convert", "reduce"]))
        if kind == "unary":
            op = draw(st.sampled_from(_F_UNARY if floaty else _I_UNARY))
            b.emit(dims, f"{op}(%{name})")
        elif kind == "binary":
            same = [v for v in b.values if v[1] == dims]
            other, _ = draw(st.sampled_from(same))
            op = draw(st.sampled_from(_F_BINARY if floaty else _I_BINARY))
            a, c = (name, other) if draw(st.booleans()) else (other, name)
            b.emit(dims, f"{op}(%{a}, %{c})")
        elif kind == "binary_const":
            op = draw(st.sampled_from(_F_BINARY if floaty else _I_BINARY))
            cval = draw(st.sampled_from(_F_CONSTS if floaty else _I_CONSTS))
            c = b.const_bcast(cval, dims)
            a, d = (name, c) if draw(st.booleans()) else (c, name)
            b.emit(dims, f"{op}(%{a}, %{d})")
        elif kind == "reshape":
            new = _factor_shape(draw, math.prod(dims))
            b.emit(new, f"reshape(%{name})")
        elif kind == "transpose" and dims:
            perm = draw(st.permutations(range(len(dims))))
            b.emit(tuple(dims[p] for p in perm),
                   f"transpose(%{name}), dimensions={{{','.join(map(str, perm))}}}")
        elif kind == "broadcast" and len(dims) < 3:
            pos = draw(st.integers(0, len(dims)))
            size = draw(st.integers(1, 3))
            new = dims[:pos] + (size,) + dims[pos:]
            bd = [i if i < pos else i + 1 for i in range(len(dims))]
            b.emit(new, f"broadcast(%{name}), dimensions={{{','.join(map(str, bd))}}}")
        elif kind == "reverse" and dims:
            rd = sorted(set(draw(st.lists(st.integers(0, len(dims) - 1), min_size=1,
                                          max_size=len(dims)))))
            b.emit(dims, f"reverse(%{name}), dimensions={{{','.join(map(str, rd))}}}")
        elif kind == "slice" and dims:
            spec, new = [], []
            for d in dims:
                lo = draw(st.integers(0, d - 1))
                hi = draw(st.integers(lo + 1, d))
                stride = draw(st.sampled_from([1, 1, 2]))
                spec.append(f"[{lo}:{hi}" + (f":{stride}]" if stride != 1 else "]"))
                new.append((hi - lo + stride - 1) // stride)
            b.emit(tuple(new), f"slice(%{name}), slice={{{', '.join(spec)}}}")
        elif kind == "pad" and dims:
            cfg, new = [], []
            for d in dims:
                lo, hi = draw(st.integers(-1, 2)), draw(st.integers(-1, 2))
                it = draw(st.sampled_from([0, 0, 1]))
                size = lo + hi + d + max(d - 1, 0) * it
                if size < 1:
                    lo, hi = 0, 0
                    size = d + max(d - 1, 0) * it
                cfg.append(f"{lo}_{hi}" + (f"_{it}" if it else ""))
                new.append(size)
            v = b.const_bcast(draw(st.sampled_from(_F_CONSTS if floaty else _I_CONSTS)), ())
            b.emit(tuple(new), f"pad(%{name}, %{v}), padding={'x'.join(cfg)}")
        elif kind == "concat" and dims:
            same = [v for v in b.values if v[1] == dims]
            other, _ = draw(st.sampled_from(same))
            d = draw(st.integers(0, len(dims) - 1))
            new = list(dims)
            new[d] *= 2
            b.emit(tuple(new), f"concatenate(%{name}, %{other}), dimensions={{{d}}}")
        elif kind == "select":
            same = [v for v in b.values if v[1] == dims]
            other, _ = draw(st.sampled_from(same))
            direction = draw(st.sampled_from(["LT", "GT", "EQ", "NE", "GE", "LE"]))
            p = b.emit(dims, f"compare(%{name}, %{other}), direction={direction}", et="pred")
            t, f = (name, other) if draw(st.booleans()) else (other, name)
            b.emit(dims, f"select(%{p}, %{t}, %{f})")
        elif kind == "convert":
            mid = "s32" if floaty else "f32"
            if floaty:  # keep float->int conversions in range
                lo = b.const_bcast("-1000", dims)
                hi = b.const_bcast("1000", dims)
                name = b.emit(dims, f"clamp(%{lo}, %{name}, %{hi})")
            c = b.emit(dims, f"convert(%{name})", et=mid)
            b.emit(dims, f"convert(%{c})")
        elif kind == "reduce" and dims:
            rd = sorted(set(draw(st.lists(st.integers(0, len(dims) - 1), min_size=1,
                                          max_size=len(dims)))))
            new = tuple(d for i, d in enumerate(dims) if i not in rd)
            z = b.const_bcast("0", ())
            b.needs_add = True
            b.emit(new, f"reduce(%{name}, %{z}), dimensions={{{','.join(map(str, rd))}}}, "
                        f"to_apply=%add_{et}")
    outs = [b.values[-1]]
    if len(b.values) > 2 and draw(st.booleans()):
        outs.append(draw(st.sampled_from(b.values[:-1])))
    root_shape = "(" + ", ".join(_shape(et, d) for _, d in outs) + ")"
    b.lines.append(f"  ROOT %out = {root_shape} tuple({', '.join('%' + n for n, _ in outs)})")
    head = ["HloModule random_graph", ""]
    if b.needs_add:
        head += [f"%add_{et} (x: {et}[], y: {et}[]) -> {et}[] {{",
                 f"  %x = {et}[] parameter(0)", f"  %y = {et}[] parameter(1)",
                 f"  ROOT %s = {et}[] add(%x, %y)", "}", ""]
    sig = ", ".join(f"{n}: {_shape(et, d)}" for n, d in params)
    return "\n".join(head + [f"ENTRY %main ({sig}) -> {root_shape} {{"] + b.lines + ["}", ""])


@st.composite
def modules(draw, constant_inputs: bool = False):
    return module_text(draw, constant_inputs)
