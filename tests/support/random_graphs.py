"""Random small well-typed HLO modules for property tests (hypothesis).

``module_text(draw)`` builds an entry computation from 1-3 parameters through 3-14 random
steps: elementwise unary/binary ops (also against broadcast constants such as 0, 1, 2,
-1 so that the simplifier's identities fire), compare/select, reshape, transpose,
broadcast, reverse, slice, pad, concatenate, convert and add-reductions.  Every value
keeps one element type per module (f32 or s32) apart from compares (pred).

Strategies that plant what one pass works on, each returning a ``Case`` (the text and
what must survive / go): ``cse_cases`` (duplicates and near-duplicates), ``dce_cases``
(dead code, dead side effects), ``constant_folding_cases`` (constant subgraphs of every
common element type mixed with parameters) and ``reshape_mover_cases`` (elementwise ops
over reshapes/transposes), all written through ``Graph``.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

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


# ==== typed graphs for the pass-specific property tests ==================================
#
# ``Graph`` writes an entry computation line by line over typed values (any element
# type), with helper computations and a root that can collect every unused value.  The
# ``*_cases`` strategies below build on it and return a ``Case``: the module text plus what
# the generator planted (names that must survive the pass, names that must go, pairs of
# near-duplicates), which the property tests check next to their own oracles.

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
SIGNED_TYPES = ("s8", "s32", "s64")
UNSIGNED_TYPES = ("u8", "u32")
ELEMENT_TYPES = ("pred",) + SIGNED_TYPES + UNSIGNED_TYPES + FLOAT_TYPES


def type_class(et: str) -> str:
    """"f", "s", "u" or "pred"."""
    if et == "pred":
        return "pred"
    if et in FLOAT_TYPES:
        return "f"
    return "u" if et.startswith("u") else "s"


_INT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
               "and", "or", "xor", "shift-left", "shift-right-logical",
               "shift-right-arithmetic")
SCALARS = {"f": ("0", "1", "-1", "0.5", "2.25", "-3", "0.001", "7", "-0"),
           "s": ("0", "1", "2", "-1", "-7", "3", "9"),
           "u": ("0", "1", "2", "3", "7", "9", "20"),
           "pred": ("true", "false")}
UNARY = {"f": ("negate", "abs", "exponential", "log", "sqrt", "tanh", "floor", "ceil", "sign",
               "cosine", "sine", "round-nearest-even", "rsqrt", "logistic"),
         "s": ("negate", "abs", "not", "sign", "popcnt", "count-leading-zeros"),
         "u": ("not", "popcnt", "count-leading-zeros"),
         "pred": ("not",)}
BINARY = {"f": ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                "atan2", "remainder"),
          "s": _INT_BINARY, "u": _INT_BINARY, "pred": ("and", "or", "xor")}
REDUCERS = {"f": ("add", "maximum", "minimum"), "s": ("add", "maximum", "minimum"),
            "u": ("add", "maximum", "minimum"), "pred": ("and", "or")}
COMMUTATIVE = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


def nest_literal(vals: list[str], dims) -> str:
    """``{ {a, b}, {c, d} }`` for ``vals`` in row-major order (a scalar when rank 0)."""
    dims = list(dims)
    if not dims:
        return vals[0]
    if len(dims) == 1:
        return "{" + ", ".join(vals) + "}"
    step = len(vals) // dims[0]
    return "{ " + ", ".join(nest_literal(vals[i * step:(i + 1) * step], dims[1:])
                            for i in range(dims[0])) + " }"


def literal_values(draw, et: str, dims) -> list[str]:
    return [draw(st.sampled_from(SCALARS[type_class(et)])) for _ in range(math.prod(dims))]


@dataclass(frozen=True)
class Value:
    name: str
    et: str
    dims: tuple

    @property
    def shape(self) -> str:
        return _shape(self.et, self.dims)


@dataclass(frozen=True)
class Case:
    """A generated module and what the generator planted in it."""
    text: str
    keep: frozenset = frozenset()       # instruction names that must survive the pass
    gone: frozenset = frozenset()       # instruction names the pass must remove
    pairs: tuple = ()                   # (a, b) near-duplicates that must stay apart
    keep_computations: frozenset = frozenset()
    gone_computations: frozenset = frozenset()


class Graph:
    """An entry computation being written: parameters, instruction lines, helper
    computations, a pool of array values later steps draw operands from, and use counts
    (so the root can collect every value nothing uses).  ``records`` keeps each op's
    (opcode, operands, attributes) so that it can be written again (a duplicate) or with
    one thing changed (a near-duplicate)."""

    def __init__(self, name: str):
        self.name = name
        self.params: list[Value] = []
        self.lines: list[str] = []
        self.pool: list[Value] = []
        self.comps: dict[str, str] = {}
        self.uses: dict[str, int] = {}
        self.records: dict[str, tuple] = {}
        self.n = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def param(self, et: str, dims, pool: bool = True) -> Value:
        v = Value(f"p{len(self.params)}", et, tuple(dims))
        self.lines.append(f"  %{v.name} = {v.shape} parameter({len(self.params)})")
        self.params.append(v)
        if pool:
            self.pool.append(v)
        return v

    def op(self, et: str, dims, opcode: str, operands=(), attrs: str = "", *,
           prefix: str = "v", pool: bool = True, shape: str | None = None) -> Value:
        v = Value(self.fresh(prefix), et, tuple(dims))
        args = ", ".join(f"%{o.name}" for o in operands)
        self.lines.append(f"  %{v.name} = {shape or v.shape} {opcode}({args})"
                          + (f", {attrs}" if attrs else ""))
        for o in operands:
            self.uses[o.name] = self.uses.get(o.name, 0) + 1
        self.records[v.name] = (opcode, tuple(operands), attrs)
        if pool:
            self.pool.append(v)
        return v

    def constant(self, et: str, dims, literal: str, *, prefix: str = "c", pool: bool = False,
                 layout: str = "") -> Value:
        v = Value(self.fresh(prefix), et, tuple(dims))
        self.lines.append(f"  %{v.name} = {v.shape}{layout} constant({literal})")
        if pool:
            self.pool.append(v)
        return v

    def splat(self, et: str, dims, scalar: str, *, pool: bool = False) -> Value:
        """broadcast(constant(scalar)) shaped et[dims] (just the constant at rank 0)."""
        c = self.constant(et, (), scalar, pool=pool and not dims)
        if not dims:
            return c
        return self.op(et, dims, "broadcast", [c], "dimensions={}", prefix="b", pool=pool)

    def reducer(self, et: str, opcode: str, tag: str = "") -> str:
        """The name of a computation ``(x, y) -> opcode(x, y)`` on et scalars."""
        name = f"{opcode}_{et}{tag}"
        if name not in self.comps:
            s, x, y = _shape(et, ()), f"{name}_x", f"{name}_y"
            self.comps[name] = (f"%{name} ({x}: {s}, {y}: {s}) -> {s} {{\n"
                                f"  %{x} = {s} parameter(0)\n  %{y} = {s} parameter(1)\n"
                                f"  ROOT %{name}_r = {s} {opcode}(%{x}, %{y})\n}}\n")
        return name

    def names_since(self, mark: int) -> set[str]:
        """Names of the instructions written since ``len(self.lines)`` was ``mark``."""
        return {line.split("=", 1)[0].strip().lstrip("%") for line in self.lines[mark:]}

    def like(self, v: Value, et: str | None = None) -> list[Value]:
        return [w for w in self.pool if w.dims == v.dims and w.et == (et or v.et)]

    def unused(self) -> list[Value]:
        return [v for v in self.pool if not self.uses.get(v.name)]

    def text(self, outputs) -> str:
        outs = list(outputs)
        root = "(" + ", ".join(v.shape for v in outs) + ")"
        sig = ", ".join(f"{p.name}: {p.shape}" for p in self.params)
        body = self.lines + [f"  ROOT %out = {root} tuple("
                             + ", ".join(f"%{v.name}" for v in outs) + ")"]
        return "\n".join([f"HloModule {self.name}", ""] + list(self.comps.values())
                         + [f"ENTRY %main ({sig}) -> {root} {{"] + body + ["}", ""])


def _dims_list(dims) -> str:
    return "{" + ",".join(map(str, dims)) + "}"


def _slice_spec(ranges) -> str:
    return "slice={" + ", ".join(f"[{lo}:{hi}]" for lo, hi in ranges) + "}"


def grow(draw, g: Graph, et: str) -> Value | None:
    """One random step over ``g.pool`` values of type ``et``: an elementwise op (also
    against splatted constants), compare+select, transpose, slice, broadcast, reverse or
    add-reduce.  Returns the new value (None when the drawn kind does not fit)."""
    tc = type_class(et)
    vals = [v for v in g.pool if v.et == et]
    if not vals:
        return None
    v = draw(st.sampled_from(vals))
    kind = draw(st.sampled_from(["unary", "binary", "binary", "splat", "select", "transpose",
                                 "slice", "broadcast", "reverse", "reduce"]))
    if kind == "unary":
        return g.op(et, v.dims, draw(st.sampled_from(UNARY[tc])), [v])
    if kind == "binary":
        w = draw(st.sampled_from(g.like(v)))
        a, b = (v, w) if draw(st.booleans()) else (w, v)
        return g.op(et, v.dims, draw(st.sampled_from(BINARY[tc])), [a, b])
    if kind == "splat":
        c = g.splat(et, v.dims, draw(st.sampled_from(SCALARS[tc])))
        a, b = (v, c) if draw(st.booleans()) else (c, v)
        return g.op(et, v.dims, draw(st.sampled_from(BINARY[tc])), [a, b])
    if kind == "select":
        w = draw(st.sampled_from(g.like(v)))
        p = g.op("pred", v.dims, "compare", [v, w],
                 f"direction={draw(st.sampled_from(DIRECTIONS))}", pool=False)
        return g.op(et, v.dims, "select", [p, w, v] if draw(st.booleans()) else [p, v, w])
    rank = len(v.dims)
    if kind == "transpose" and rank >= 2:
        perm = draw(st.permutations(range(rank)))
        return g.op(et, tuple(v.dims[p] for p in perm), "transpose", [v],
                    f"dimensions={_dims_list(perm)}")
    if kind == "slice" and rank:
        ranges = []
        for d in v.dims:
            lo = draw(st.integers(0, d - 1))
            ranges.append((lo, draw(st.integers(lo + 1, d))))
        return g.op(et, tuple(hi - lo for lo, hi in ranges), "slice", [v], _slice_spec(ranges))
    if kind == "broadcast" and rank < 3:
        pos = draw(st.integers(0, rank))
        new = v.dims[:pos] + (draw(st.integers(1, 3)),) + v.dims[pos:]
        bd = [i if i < pos else i + 1 for i in range(rank)]
        return g.op(et, new, "broadcast", [v], f"dimensions={_dims_list(bd)}")
    if kind == "reverse" and rank:
        rd = sorted(set(draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank))))
        return g.op(et, v.dims, "reverse", [v], f"dimensions={_dims_list(rd)}")
    if kind == "reduce" and rank:
        rd = sorted(set(draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank))))
        init = g.constant(et, (), "0" if tc != "pred" else "false")
        comp = g.reducer(et, draw(st.sampled_from(REDUCERS[tc])))
        return g.op(et, tuple(d for i, d in enumerate(v.dims) if i not in rd), "reduce",
                    [v, init], f"dimensions={_dims_list(rd)}, to_apply=%{comp}")
    return None


# ---- cse: duplicates and near-duplicates ------------------------------------------------

def _near_variant(draw, g: Graph, v: Value) -> tuple | None:
    """(opcode, operands, attrs) of an op with ``v``'s opcode and shape that computes
    something else: another comparison direction, reducer, slice window or reverse set;
    non-commutative operands swapped; or one operand replaced by another value of the same
    shape (e.g. the other of two identical parameters)."""
    opcode, ops, attrs = g.records[v.name]
    options = []
    if opcode == "compare":
        old = attrs.split("=", 1)[1]
        options.append((opcode, ops, "direction="
                        + draw(st.sampled_from([d for d in DIRECTIONS if d != old]))))
    if opcode == "reduce":
        comp = attrs.rsplit("%", 1)[1]
        red = comp.split("_")[0]
        other = [r for r in REDUCERS[type_class(v.et)] if r != red]
        options.append((opcode, ops, attrs.replace(f"%{comp}", "%" + g.reducer(
            v.et, draw(st.sampled_from(other))))))
    if opcode == "reverse" and len(v.dims) > 1:
        old = attrs
        new = "dimensions=" + _dims_list(sorted(draw(st.sets(
            st.integers(0, len(v.dims) - 1), min_size=1))))
        if new != old:
            options.append((opcode, ops, new))
    if opcode == "slice":
        src = ops[0].dims
        windows = re.findall(r"\[(\d+):(\d+)\]", attrs)
        for i, (lo, hi) in enumerate(windows):
            lo, hi = int(lo), int(hi)
            starts = [s for s in range(src[i] - (hi - lo) + 1) if s != lo]
            if starts:
                s = draw(st.sampled_from(starts))
                new = [(int(a), int(b)) for a, b in windows]
                new[i] = (s, s + hi - lo)
                options.append((opcode, ops, _slice_spec(new)))
                break
    if len(ops) == 2 and opcode not in COMMUTATIVE and ops[0] != ops[1] and \
            ops[0].dims == ops[1].dims and ops[0].et == ops[1].et:
        options.append((opcode, ops[::-1], attrs))
    for i, o in enumerate(ops):
        others = [w for w in g.like(o) if w != o]
        if others:
            new_ops = list(ops)
            new_ops[i] = draw(st.sampled_from(others))
            options.append((opcode, tuple(new_ops), attrs))
            break
    return draw(st.sampled_from(options)) if options else None


def _attribute_pair(draw, g: Graph, x: Value) -> tuple | None:
    """Two ops on ``x`` with equal shapes that differ in one attribute: comparison
    direction (each predicate consumed by a select), slice window, reverse dimensions,
    broadcast dimensions or transpose permutation."""
    et, dims, rank = x.et, x.dims, len(x.dims)
    kinds = ["compare"] + (["slice"] if any(d > 1 for d in dims) else []) + \
        (["reverse", "broadcast"] if rank else []) + \
        (["transpose"] if rank == 2 and dims[0] == dims[1] else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "compare":
        y = draw(st.sampled_from(g.like(x)))
        d1, d2 = draw(st.lists(st.sampled_from(DIRECTIONS), min_size=2, max_size=2,
                               unique=True))
        return tuple(g.op(et, dims, "select", [g.op("pred", dims, "compare", [x, y],
                                                    f"direction={d}", pool=False), x, y])
                     for d in (d1, d2))
    if kind == "slice":
        i = next(i for i, d in enumerate(dims) if d > 1)
        size = draw(st.integers(1, dims[i] - 1))
        s1, s2 = draw(st.lists(st.integers(0, dims[i] - size), min_size=2, max_size=2,
                               unique=True))
        out = dims[:i] + (size,) + dims[i + 1:]
        return tuple(g.op(et, out, "slice", [x], _slice_spec(
            [(s, s + size) if j == i else (0, d) for j, d in enumerate(dims)]))
            for s in (s1, s2))
    if kind == "reverse":
        sets = [_dims_list(s) for s in itertools.chain.from_iterable(
            itertools.combinations(range(rank), k) for k in range(1, rank + 1))]
        if len(sets) < 2:  # rank 1: reverse and a plain negate of the same shape
            return (g.op(et, dims, "reverse", [x], "dimensions={0}"),
                    g.op(et, dims, "reverse", [g.op(et, dims, "negate", [x])],
                         "dimensions={0}"))
        a, b = draw(st.lists(st.sampled_from(sets), min_size=2, max_size=2, unique=True))
        return tuple(g.op(et, dims, "reverse", [x], f"dimensions={d}") for d in (a, b))
    if kind == "broadcast":  # the last dimension copied into either of two equal ones
        out = dims + dims[-1:]
        first = list(range(rank))
        return tuple(g.op(et, out, "broadcast", [x], f"dimensions={_dims_list(d)}")
                     for d in (first, first[:-1] + [rank]))
    return tuple(g.op(et, dims, "transpose", [x], f"dimensions={d}")
                 for d in ("{0,1}", "{1,0}"))


def _respell(text: str, et: str) -> str:
    """The same value written another way (floats only: 1 -> 1.0, 0.5 -> 5e-1, ...)."""
    if type_class(et) != "f":
        return text
    return {"0": "0.0", "1": "1.00", "-1": "-1.0", "0.5": "5e-1", "2.25": "2.250",
            "-3": "-3.0", "0.001": "1e-3", "7": "7.0", "-0": "-0.0"}[text]


def _constant_trio(draw, g: Graph, et: str, x: Value, pairs: list) -> list[Value]:
    """Constants c1, c2 (c1's value, written differently when an array) and c3 (another
    value, or c1's value in another layout), each multiplied into ``x``: c1/c2 and their
    products must merge, c3 and its product must stay."""
    dims = x.dims
    vals = literal_values(draw, et, dims)
    c1 = g.constant(et, dims, nest_literal(vals, dims))
    c2 = g.constant(et, dims, nest_literal([_respell(t, et) for t in vals], dims)
                    if dims else vals[0])
    if len(dims) == 2 and draw(st.booleans()):
        c3 = g.constant(et, dims, nest_literal(vals, dims), layout="{0,1}")
    else:
        other = list(vals)
        i = draw(st.integers(0, len(vals) - 1))
        same = {"0": {"0"}, "-0": {"-0"}}.get(vals[i], {vals[i]})
        other[i] = draw(st.sampled_from([t for t in SCALARS[type_class(et)]
                                         if t not in same]))
        c3 = g.constant(et, dims, nest_literal(other, dims))
    pairs.append((c1.name, c3.name))
    prods = [g.op(et, dims, "multiply", [x, c] if draw(st.booleans()) else [c, x])
             for c in (c1, c2, c3)]
    pairs.append((prods[0].name, prods[2].name))
    return prods[:2]


@st.composite
def cse_cases(draw) -> Case:
    """A graph with deliberate duplicates (exact copies, commutative swaps, copies that
    differ only in metadata, equal constants, identical iotas as operands, reduces through
    structurally identical computations) and near-duplicates that must not merge (``pairs``:
    other attributes, operands, constant values or layouts, reducers, non-commutative
    operands swapped; ``keep``: identical parameters, identical rngs, identical
    side-effecting custom-calls and outfeeds).  Every value reaches the root, apart from
    the side effects (the interpreter cannot run them; cse sees them all the same)."""
    et = draw(st.sampled_from(["f32", "s32"]))
    g = Graph("random_cse")
    dims = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
    g.param(et, dims)
    g.param(et, dims)
    if draw(st.booleans()):
        g.param(et, tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 2)))))
    keep = {p.name for p in g.params}
    pairs: list = []
    dupable: list[Value] = []
    for _ in range(draw(st.integers(4, 14))):
        kind = draw(st.sampled_from(["grow", "grow", "grow", "dup", "dup", "dup", "near",
                                     "near", "swap", "attributes", "attributes",
                                     "constants", "rng", "effects", "iota", "reducers"]))
        vals = [v for v in g.pool if v.et == et]
        x = draw(st.sampled_from(vals))
        if kind == "grow":
            v = grow(draw, g, et)
            if v is not None:
                dupable.append(v)
        elif kind == "dup" and dupable:
            v = draw(st.sampled_from(dupable))
            opcode, ops, attrs = g.records[v.name]
            if opcode in COMMUTATIVE and len(ops) == 2 and draw(st.booleans()):
                ops = ops[::-1]
            attrs = re.sub(r",? ?metadata=\{[^}]*\}", "", attrs)
            if draw(st.booleans()):  # metadata does not count
                attrs = (attrs + ", " if attrs else "") + f'metadata={{op_name="copy_of_{v.name}"}}'
            dupable.append(g.op(v.et, v.dims, opcode, ops, attrs, prefix="d"))
        elif kind == "near" and dupable:
            v = draw(st.sampled_from(dupable))
            variant = _near_variant(draw, g, v)
            if variant is not None:
                pairs.append((v.name, g.op(v.et, v.dims, *variant, prefix="n").name))
        elif kind == "swap":  # a non-commutative op and its operands swapped: distinct
            others = [w for w in g.like(x) if w != x]
            if others:
                y = draw(st.sampled_from(others))
                op = draw(st.sampled_from(["subtract", "divide", "compare", "power"
                                           if et == "f32" else "shift-left"]))
                attrs = f"direction={draw(st.sampled_from(DIRECTIONS))}" if op == "compare" else ""
                res = "pred" if op == "compare" else et
                a = g.op(res, x.dims, op, [x, y], attrs, pool=res == et)
                b = g.op(res, x.dims, op, [y, x], attrs, pool=res == et, prefix="n")
                pairs.append((a.name, b.name))
                if res == "pred":  # consume the predicates
                    g.op(et, x.dims, "select", [a, x, y])
                    g.op(et, x.dims, "select", [b, x, y])
                else:
                    dupable.append(a)
        elif kind == "constants":
            dupable += _constant_trio(draw, g, et, x, pairs)
        elif kind == "rng":
            lo, hi = g.constant(et, (), "0"), g.constant(et, (), "1" if et == "f32" else "9")
            r1, r2 = (g.op(et, x.dims, "rng", [lo, hi], "distribution=rng_uniform",
                           prefix="r") for _ in range(2))
            keep |= {r1.name, r2.name}
            pairs.append((r1.name, r2.name))
        elif kind == "effects":  # identical side effects (left unused): never merged
            tok = g.op("token", (), "after-all", (), shape="token[]", pool=False, prefix="tok")
            twins = [g.op(et, x.dims, "custom-call", [x], 'custom_call_target="log_value", '
                          "custom_call_has_side_effect=true", pool=False, prefix="cc")
                     for _ in range(2)]
            twins += [g.op("token", (), "outfeed", [x, tok], shape="token[]", pool=False,
                           prefix="outfeed") for _ in range(2)]
            keep |= {v.name for v in twins}
            pairs += [(twins[0].name, twins[1].name), (twins[2].name, twins[3].name)]
        elif kind == "attributes":
            pair = _attribute_pair(draw, g, x)
            if pair:
                pairs.append((pair[0].name, pair[1].name))
                dupable.append(pair[0])
        elif kind == "iota" and x.dims:
            d = draw(st.integers(0, len(x.dims) - 1))
            i1, i2 = (g.op(et, x.dims, "iota", (), f"iota_dimension={d}", prefix="i",
                           pool=False) for _ in range(2))
            a1 = g.op(et, x.dims, "add", [x, i1])
            dupable += [a1, g.op(et, x.dims, "add", [x, i2])]  # identical iotas: merges
            others = [e for e in range(len(x.dims)) if e != d]
            if others:
                i3 = g.op(et, x.dims, "iota", (), f"iota_dimension={draw(st.sampled_from(others))}",
                          prefix="i", pool=False)
                pairs.append((a1.name, g.op(et, x.dims, "add", [x, i3]).name))
        elif kind == "reducers" and x.dims:
            init = g.constant(et, (), "0")
            out = x.dims[1:]
            red = [g.op(et, out, "reduce", [x, init], f"dimensions={{0}}, to_apply=%{c}")
                   for c in (g.reducer(et, "add"), g.reducer(et, "add", "_twin"),
                             g.reducer(et, "maximum"))]
            dupable += red[:2]  # the twins merge: their computations are identical
            pairs.append((red[0].name, red[2].name))
    return Case(g.text(g.unused() or g.pool[-1:]), keep=frozenset(keep), pairs=tuple(pairs))


# ---- dce: dead code, side effects that must stay ----------------------------------------

_PLANTS = ("dead_chain", "dead_chain", "pure_custom_call", "effect_custom_call", "outfeed",
           "send", "infeed", "rng", "control", "call_effect", "call_pure", "dead_reduce",
           "after_all", "dead_tuple", "inner_dead")


def _unary_comp(g: Graph, v: Value, name: str, effect: bool) -> str:
    """``%name (a) -> negate(a)``, with an outfeed of ``a`` inside when ``effect``."""
    a, r = g.fresh(f"{name}_a"), g.fresh(f"{name}_r")
    lines = [f"%{name} ({a}: {v.shape}) -> {v.shape} {{", f"  %{a} = {v.shape} parameter(0)"]
    if effect:
        tk, of = g.fresh(f"{name}_tok"), g.fresh(f"{name}_outfeed")
        lines += [f"  %{tk} = token[] after-all()", f"  %{of} = token[] outfeed(%{a}, %{tk})"]
    lines += [f"  ROOT %{r} = {v.shape} negate(%{a})", "}", ""]
    g.comps[name] = "\n".join(lines)
    return name


def _plant(draw, g: Graph, et: str, plant: str, v: Value, case: dict) -> Value | None:
    """Write one planted construct on ``v`` (outside the pool); record what must stay or
    go in ``case``; returns a value to add to the live outputs, if any."""
    tc = type_class(et)
    mark = len(g.lines)
    keep, gone = case["keep"], case["gone"]
    if plant == "dead_chain":
        x = v
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                x = g.op(et, x.dims, draw(st.sampled_from(UNARY[tc])), [x], pool=False)
            else:
                c = g.splat(et, x.dims, draw(st.sampled_from(SCALARS[tc])))
                x = g.op(et, x.dims, draw(st.sampled_from(BINARY[tc])), [x, c], pool=False)
        gone |= g.names_since(mark)
    elif plant in ("pure_custom_call", "effect_custom_call"):
        effect = plant == "effect_custom_call"
        attrs = ('custom_call_target="log_value", custom_call_has_side_effect=true' if effect
                 else 'custom_call_target="pure_value"')
        g.op(et, v.dims, "custom-call", [v], attrs, pool=False, prefix="cc")
        (keep if effect else gone).update(g.names_since(mark))
    elif plant == "outfeed":
        tok = g.op("token", (), "after-all", (), shape="token[]", pool=False, prefix="tok")
        g.op("token", (), "outfeed", [v, tok], shape="token[]", pool=False, prefix="outfeed")
        keep |= g.names_since(mark)
    elif plant == "send":
        case["channel"] += 1
        ch = f"channel_id={case['channel']}"
        tok = g.op("token", (), "after-all", (), shape="token[]", pool=False, prefix="tok")
        s = g.op("token", (), "send", [v, tok], ch, shape=f"({v.shape}, u32[], token[])",
                 pool=False, prefix="send")
        g.op("token", (), "send-done", [s], ch, shape="token[]", pool=False, prefix="sdone")
        keep |= g.names_since(mark)
    elif plant == "infeed":
        tok = g.op("token", (), "after-all", (), shape="token[]", pool=False, prefix="tok")
        inf = g.op("token", (), "infeed", [tok], shape=f"(({v.shape}), token[])",
                   pool=False, prefix="infeed")
        keep |= g.names_since(mark)
        mark = len(g.lines)
        g.op("token", (), "get-tuple-element", [inf], "index=0", shape=f"({v.shape})",
             pool=False, prefix="gte")
        gone |= g.names_since(mark)
    elif plant == "rng":
        lo = g.constant(et, (), "0")
        hi = g.constant(et, (), "1" if tc == "f" else "9")
        g.op(et, v.dims, "rng", [lo, hi], "distribution=rng_uniform", pool=False, prefix="rng")
        keep |= g.names_since(mark)
    elif plant == "control":
        x = g.op(et, v.dims, draw(st.sampled_from(UNARY[tc])), [v], pool=False, prefix="pred")
        g.op(et, v.dims, draw(st.sampled_from(UNARY[tc])), [v],
             f"control-predecessors={{%{x.name}}}", pool=False, prefix="succ")
        keep |= g.names_since(mark)
    elif plant in ("call_effect", "call_pure"):
        effect = plant == "call_effect"
        comp = _unary_comp(g, v, g.fresh("effect_fn" if effect else "pure_fn"), effect)
        g.op(et, v.dims, "call", [v], f"to_apply=%{comp}", pool=False, prefix="call")
        (keep if effect else gone).update(g.names_since(mark))
        (case["keep_c"] if effect else case["gone_c"]).add(comp)
    elif plant == "dead_reduce" and v.dims:
        init = g.constant(et, (), "0" if tc != "pred" else "false")
        comp = g.reducer(et, draw(st.sampled_from(REDUCERS[tc])), g.fresh("_dead"))
        g.op(et, v.dims[1:], "reduce", [v, init], f"dimensions={{0}}, to_apply=%{comp}",
             pool=False)
        gone |= g.names_since(mark)
        case["gone_c"].add(comp)
    elif plant == "after_all":
        g.op("token", (), "after-all", (), shape="token[]", pool=False, prefix="tok")
        gone |= g.names_since(mark)
    elif plant == "dead_tuple":
        t = g.op("token", (), "tuple", [v, v], shape=f"({v.shape}, {v.shape})", pool=False,
                 prefix="tuple")
        g.op(et, v.dims, "get-tuple-element", [t], "index=1", pool=False, prefix="gte")
        gone |= g.names_since(mark)
    elif plant == "inner_dead" and v.dims:
        name = g.fresh("live_red")
        s, x, y, d, r = _shape(et, ()), f"{name}_x", f"{name}_y", f"{name}_dead", f"{name}_r"
        red = REDUCERS[type_class(et)]
        g.comps[name] = (f"%{name} ({x}: {s}, {y}: {s}) -> {s} {{\n"
                         f"  %{x} = {s} parameter(0)\n  %{y} = {s} parameter(1)\n"
                         f"  %{d} = {s} {red[-1]}(%{x}, %{y})\n"
                         f"  ROOT %{r} = {s} {red[0]}(%{x}, %{x if draw(st.booleans()) else y})"
                         "\n}\n")  # (%y may stay unused: a parameter all the same)
        gone.add(d)
        case["keep_c"].add(name)
        init = g.constant(et, (), "0" if tc != "pred" else "false")
        return g.op(et, v.dims[1:], "reduce", [v, init], f"dimensions={{0}}, to_apply=%{name}",
                    pool=False)
    return None


@st.composite
def dce_cases(draw) -> Case:
    """A random live graph (only the last value and maybe one more reach the root, so the
    rest of it is dead) plus planted constructs: dead chains, dead pure custom-calls, calls,
    reduces (their computations become unreachable), tuples and lone after-alls (``gone``);
    side-effecting custom-calls, outfeeds, send/send-done, infeeds, rngs, control edges and
    calls of computations with an outfeed, all dead (``keep``, their operands with them);
    an unused parameter (``keep``); a live reduce whose computation holds a dead
    instruction."""
    et = draw(st.sampled_from(["f32", "s32"]))
    g = Graph("random_dce")
    dims = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
    g.param(et, dims)
    for _ in range(draw(st.integers(0, 2))):
        g.param(et, dims if draw(st.booleans()) else
                tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 2)))))
    unused = g.param(et, dims, pool=False)
    for _ in range(draw(st.integers(2, 10))):
        grow(draw, g, et)
    outputs = [g.pool[-1]]
    if len(g.pool) > 2 and draw(st.booleans()):
        outputs.append(draw(st.sampled_from(g.pool[:-1])))
    case = {"keep": {unused.name}, "gone": set(), "keep_c": set(), "gone_c": set(),
            "channel": 0}
    for plant in draw(st.lists(st.sampled_from(_PLANTS), min_size=1, max_size=6)):
        v = draw(st.sampled_from([w for w in g.pool if w.et == et]))
        extra = _plant(draw, g, et, plant, v, case)
        if extra is not None:
            outputs.append(extra)
    outs = list(dict.fromkeys(outputs))
    return Case(g.text(outs), keep=frozenset(case["keep"]), gone=frozenset(case["gone"]),
                keep_computations=frozenset(case["keep_c"]),
                gone_computations=frozenset(case["gone_c"]))


# ---- constant_folding: constant subgraphs of many types, mixed with parameters ----------

_CF_KINDS = ("unary", "unary", "binary", "binary", "binary", "compare", "select", "clamp",
             "convert", "convert", "reshape", "transpose", "slice", "reverse", "pad",
             "pad_splat", "concat", "broadcast", "reduce", "reduce", "dot", "tuple", "call",
             "call_rng", "rng", "control", "iota", "splat", "constant")


def _cf_leaf(draw, g: Graph, et: str, dims) -> Value:
    """A fresh constant-like value: a constant, a splat or an iota."""
    kind = draw(st.sampled_from(["constant", "constant", "splat"] +
                                (["iota"] if dims and et != "pred" else [])))
    if kind == "constant":
        return g.constant(et, dims, nest_literal(literal_values(draw, et, dims), dims),
                          pool=True)
    if kind == "splat":
        return g.splat(et, dims, draw(st.sampled_from(SCALARS[type_class(et)])), pool=True)
    return g.op(et, dims, "iota", (), f"iota_dimension={draw(st.integers(0, len(dims) - 1))}",
                prefix="iota")


def _operand_like(draw, g: Graph, v: Value, et: str | None = None) -> Value:
    """A pool value shaped like ``v`` (of type ``et``), or a fresh constant-like one."""
    same = g.like(v, et)
    if same and draw(st.booleans()):
        return draw(st.sampled_from(same))
    return _cf_leaf(draw, g, et or v.et, v.dims)


def _fn_comp(g: Graph, v: Value, opcode: str, rng: bool) -> str:
    """``(x, y) -> opcode(x, y)`` over ``v``'s shape; with ``rng``: ``x + rng(0, 1)``."""
    name = g.fresh("rng_fn" if rng else "fn")
    s = v.shape
    lines = [f"%{name} ({name}_x: {s}, {name}_y: {s}) -> {s} {{",
             f"  %{name}_x = {s} parameter(0)", f"  %{name}_y = {s} parameter(1)"]
    if rng:
        lines += [f"  %{name}_lo = {v.et}[] constant(0)", f"  %{name}_hi = {v.et}[] constant(1)",
                  f"  %{name}_r = {s} rng(%{name}_lo, %{name}_hi), distribution=rng_uniform",
                  f"  ROOT %{name}_o = {s} add(%{name}_x, %{name}_r)"]
    else:
        lines += [f"  ROOT %{name}_o = {s} {opcode}(%{name}_x, %{name}_y)"]
    g.comps[name] = "\n".join(lines + ["}", ""])
    return name


def _cf_step(draw, g: Graph, kind: str, types) -> None:
    consts = [w for w in g.pool if w.name.startswith(("c", "b", "iota"))]
    v = draw(st.sampled_from(consts if consts and draw(st.booleans()) else g.pool))
    et, dims, rank, tc = v.et, v.dims, len(v.dims), type_class(v.et)
    if kind == "unary":
        g.op(et, dims, draw(st.sampled_from(UNARY[tc])), [v])
    elif kind == "binary":
        w = _operand_like(draw, g, v)
        a, b = (v, w) if draw(st.booleans()) else (w, v)
        g.op(et, dims, draw(st.sampled_from(BINARY[tc])), [a, b])
    elif kind == "compare":
        dirs = ("EQ", "NE") if et == "pred" else DIRECTIONS
        g.op("pred", dims, "compare", [v, _operand_like(draw, g, v)],
             f"direction={draw(st.sampled_from(dirs))}")
    elif kind == "select":
        p = _operand_like(draw, g, v, "pred")
        g.op(et, dims, "select", [p, v, _operand_like(draw, g, v)])
    elif kind == "clamp" and et != "pred":
        g.op(et, dims, "clamp", [_cf_leaf(draw, g, et, dims), v, _cf_leaf(draw, g, et, dims)])
    elif kind == "convert":
        g.op(draw(st.sampled_from(ELEMENT_TYPES)), dims, "convert", [v])
    elif kind == "reshape":
        g.op(et, _factor_shape(draw, math.prod(dims)), "reshape", [v])
    elif kind == "transpose" and rank >= 2:
        perm = draw(st.permutations(range(rank)))
        g.op(et, tuple(dims[p] for p in perm), "transpose", [v], f"dimensions={_dims_list(perm)}")
    elif kind == "slice" and rank:
        ranges = []
        for d in dims:
            lo = draw(st.integers(0, d - 1))
            ranges.append((lo, draw(st.integers(lo + 1, d))))
        g.op(et, tuple(hi - lo for lo, hi in ranges), "slice", [v], _slice_spec(ranges))
    elif kind == "reverse" and rank:
        g.op(et, dims, "reverse", [v], f"dimensions={{{draw(st.integers(0, rank - 1))}}}")
    elif kind in ("pad", "pad_splat") and rank:
        if kind == "pad_splat":  # pad(broadcast(constant), constant): never folded
            v = g.splat(et, dims, draw(st.sampled_from(SCALARS[tc])), pool=True)
        lo, hi = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        pad = g.constant(et, (), draw(st.sampled_from(SCALARS[tc])))
        cfg = "x".join(["0_0"] * (rank - 1) + [f"{lo}_{hi}"])
        g.op(et, dims[:-1] + (dims[-1] + lo + hi,), "pad", [v, pad], f"padding={cfg}")
    elif kind == "concat" and rank:
        w = _operand_like(draw, g, v)
        d = draw(st.integers(0, rank - 1))
        new = tuple(x * 2 if i == d else x for i, x in enumerate(dims))
        g.op(et, new, "concatenate", [v, w], f"dimensions={{{d}}}")
    elif kind == "broadcast" and rank < 3:
        g.op(et, (draw(st.integers(1, 3)),) + dims, "broadcast", [v],
             f"dimensions={_dims_list(range(1, rank + 1))}")
    elif kind == "reduce" and rank:
        d = draw(st.integers(0, rank - 1))
        init = g.constant(et, (), draw(st.sampled_from(SCALARS[tc])))
        comp = g.reducer(et, draw(st.sampled_from(REDUCERS[tc])))
        g.op(et, tuple(x for i, x in enumerate(dims) if i != d), "reduce", [v, init],
             f"dimensions={{{d}}}, to_apply=%{comp}")
    elif kind == "dot" and et in ("f32", "f64", "s32") and 1 <= rank <= 2:
        k = dims[-1]
        n = draw(st.integers(1, 3))
        w = _cf_leaf(draw, g, et, (k, n)) if draw(st.booleans()) else \
            g.param(et, (k, n))
        g.op(et, dims[:-1] + (n,), "dot", [v, w],
             f"lhs_contracting_dims={{{rank - 1}}}, rhs_contracting_dims={{0}}")
    elif kind == "tuple":
        w = _operand_like(draw, g, v)
        t = g.op(et, dims, "tuple", [v, w], shape=f"({v.shape}, {w.shape})", pool=False,
                 prefix="tuple")
        g.op(et, dims, "get-tuple-element", [t], f"index={draw(st.integers(0, 1))}")
    elif kind in ("call", "call_rng") and (kind == "call" or et in ("f32", "f64")):
        ops = BINARY[tc] if kind == "call" else ("add",)
        comp = _fn_comp(g, v, draw(st.sampled_from(ops)), kind == "call_rng")
        g.op(et, dims, "call", [v, _operand_like(draw, g, v)], f"to_apply=%{comp}")
    elif kind == "rng" and et in ("f32", "f64"):
        lo, hi = g.constant(et, (), "0"), g.constant(et, (), "1")
        g.op(et, dims, "rng", [lo, hi], "distribution=rng_uniform", prefix="rng")
    elif kind == "control":
        x = draw(st.sampled_from([w for w in g.pool if w.name != v.name and
                                  not w.name.startswith("p")] or [v]))
        if x.name != v.name and not x.name.startswith("p"):
            g.op(et, dims, draw(st.sampled_from(UNARY[tc])), [v],
                 f"control-predecessors={{%{x.name}}}", prefix="ctrl")
    elif kind in ("iota", "splat", "constant"):
        et2 = draw(st.sampled_from(types))
        if kind == "iota" and (not dims or et2 == "pred"):
            return
        if kind == "iota":
            g.op(et2, dims, "iota", (), f"iota_dimension={draw(st.integers(0, rank - 1))}",
                 prefix="iota")
        elif kind == "splat":
            g.splat(et2, dims, draw(st.sampled_from(SCALARS[type_class(et2)])), pool=True)
        else:
            g.constant(et2, dims, nest_literal(literal_values(draw, et2, dims), dims),
                       pool=True)


@st.composite
def constant_folding_cases(draw) -> Case:
    """Constant subgraphs over 1-3 element types (pred, s8/s32/s64, u8/u32,
    f16/bf16/f32/f64): constants, iotas and broadcast constants through elementwise ops,
    compares, selects, clamps, converts between any two types, reshapes, transposes,
    slices, reverses, pads (also pad(broadcast(constant), constant), which is never folded),
    concatenates, broadcasts, reduces, dots, tuple/get-tuple-element, calls (one holding an
    rng, never folded), rngs and control edges; parameters mixed in.  Most unused values
    go to the root; about one in five is left dead (folding skips dead code)."""
    g = Graph("random_constant_folding")
    types = draw(st.lists(st.sampled_from(ELEMENT_TYPES), min_size=1, max_size=3,
                          unique=True))
    dims = tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(0, 2))))
    for et in types:
        if draw(st.integers(0, 2)) == 0:
            g.param(et, dims)
        _cf_leaf(draw, g, et, dims)
    for _ in range(draw(st.integers(3, 14))):
        _cf_step(draw, g, draw(st.sampled_from(_CF_KINDS)), types)
    outs = [v for v in g.unused() if draw(st.integers(0, 4))]  # the rest stays dead
    return Case(g.text(outs or g.pool[-1:]))


# ---- reshape-mover: elementwise ops over reshapes/transposes -----------------------------

def _other_factorization(draw, n: int, avoid) -> tuple | None:
    shapes = {s for s in (_factor_shape(draw, n) for _ in range(4)) if s not in avoid}
    return draw(st.sampled_from(sorted(shapes))) if shapes else None


@st.composite
def reshape_mover_cases(draw, copies: bool = True, wide_bitcasts: bool = True) -> Case:
    """Elementwise ops (unary, binary, compare, select, clamp, convert, same-width
    bitcast-convert; ``copies``: copy; ``wide_bitcasts``: bitcast-convert to u8, which XLA
    does not count as elementwise) whose operands are equivalent reshapes (or transposes)
    of parameters of one source shape (pred ones for select), mixed with operands that can
    take the inverse rearrange for free (constants, broadcast scalars, broadcasts whose
    dimensions stay in order, an rng with one user, nop reshapes) and ones that cannot
    (parameters and earlier results in the rearranged shape, reshapes from another shape,
    other transposes, broadcasts that reorder dimensions, an rng with two users); some
    rearranges also feed a reduce or the root, which keeps their other users from moving.
    Every value reaches the root."""
    et = draw(st.sampled_from(["f32", "s32"]))
    tc = type_class(et)
    g = Graph("random_reshape_mover")
    rank = draw(st.sampled_from([1, 2, 2, 3, 3]))
    src = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    transpose = rank >= 2 and draw(st.integers(0, 2)) > 0
    if transpose:  # 3-cycles often: unlike swaps they differ from their inverse
        perm = tuple(draw(st.sampled_from([(1, 2, 0), (2, 0, 1)])) if rank == 3 and
                     draw(st.booleans()) else draw(st.permutations(range(rank))))
        tgt = tuple(src[p] for p in perm)
    else:
        tgt = _factor_shape(draw, math.prod(src))
    sources = {t: [g.param(t, src, pool=False) for _ in range(draw(st.integers(1, 2)))]
               for t in (et, "pred")}
    made: list[Value] = []     # every value this case writes, for the root
    forced: list[Value] = []   # root operands even when used elsewhere
    earlier: dict = {et: [], "pred": []}   # results shaped tgt (not rearranges)
    rearranges: dict = {et: [], "pred": []}
    rngs: list[Value] = []

    def rearrange(p: Value, kind: str | None = None) -> Value:
        if transpose and kind != "reshape":
            return g.op(p.et, tgt, "transpose", [p], f"dimensions={_dims_list(perm)}",
                        prefix="t", pool=False)
        return g.op(p.et, tgt, "reshape", [p], prefix="r", pool=False)

    def bcast(t: str) -> Value:
        rk = len(tgt)
        if transpose and rk >= 2 and draw(st.booleans()):
            # two dimensions, in order: whether they stay in order under the inverse
            # transpose depends on the permutation
            keep = sorted(draw(st.sets(st.integers(0, rk - 1), min_size=2, max_size=2)))
        else:
            keep = sorted(draw(st.sets(st.integers(0, rk - 1), min_size=0,
                                       max_size=min(rk, 2))))
        if len(keep) == 2 and draw(st.integers(0, 3)) == 0:
            keep = keep[::-1]  # out of order: never trivially rearranged
        small = g.param(t, tuple(tgt[d] for d in keep), pool=False) if keep and \
            draw(st.booleans()) else g.constant(t, tuple(tgt[d] for d in keep), nest_literal(
                literal_values(draw, t, [tgt[d] for d in keep]), [tgt[d] for d in keep]))
        return g.op(t, tgt, "broadcast", [small], f"dimensions={_dims_list(keep)}",
                    prefix="b", pool=False)

    def operand(kind: str, t: str = et) -> Value:
        tt = type_class(t)
        if kind == "rearrange" or (kind == "earlier" and not earlier[t]):
            if rearranges[t] and draw(st.booleans()):
                return draw(st.sampled_from(rearranges[t]))
            r = rearrange(draw(st.sampled_from(sources[t])))
            rearranges[t].append(r)
            made.append(r)
            return r
        if kind == "constant":
            return g.constant(t, tgt, nest_literal(literal_values(draw, t, tgt), tgt))
        if kind == "splat":
            return g.splat(t, tgt, draw(st.sampled_from(SCALARS[tt])))
        if kind == "bcast" and tgt:
            return bcast(t)
        if kind == "rng" and t == et:
            if rngs and draw(st.booleans()):
                return rngs[0]  # a second user: no longer trivially rearranged
            if not rngs:
                lo, hi = g.constant(et, (), "0"), g.constant(et, (), "1" if tc == "f" else "9")
                rngs.append(g.op(et, tgt, "rng", [lo, hi], "distribution=rng_uniform",
                                 prefix="rng", pool=False))
                return rngs[0]
        if kind == "param":
            return g.param(t, tgt, pool=False)
        if kind == "nop":  # a reshape to its own shape: trivial
            return g.op(t, tgt, "reshape", [g.param(t, tgt, pool=False)], prefix="r",
                        pool=False)
        if kind == "other_source":  # a reshape/transpose no other operand matches
            if transpose:
                others = [q for q in itertools.permutations(range(rank))
                          if tuple(src[i] for i in q) == tgt and q != perm]
                if others:
                    q = draw(st.sampled_from(others))
                    return g.op(t, tgt, "transpose", [draw(st.sampled_from(sources[t]))],
                                f"dimensions={_dims_list(q)}", prefix="t", pool=False)
                return rearrange(draw(st.sampled_from(sources[t])), "reshape")
            other = _other_factorization(draw, math.prod(src), {src, tgt})
            if other is not None:
                return g.op(t, tgt, "reshape", [g.param(t, other, pool=False)], prefix="r",
                            pool=False)
        if kind == "earlier" and earlier[t]:
            return draw(st.sampled_from(earlier[t]))
        return operand("rearrange", t)

    kinds = st.sampled_from(["rearrange"] * 6 + ["constant", "splat", "bcast", "bcast",
                                                 "rng", "rng", "param", "nop",
                                                 "other_source", "earlier"])
    ops = ["unary", "unary", "binary", "binary", "binary", "compare", "select", "select",
           "clamp", "convert", "bitcast", "block"] + (["copy"] * 2 if copies else []) + \
        (["wide_bitcast"] * 2 if wide_bitcasts else [])
    for _ in range(draw(st.integers(2, 10))):
        op = draw(st.sampled_from(ops))
        if op == "unary":
            v = g.op(et, tgt, draw(st.sampled_from(UNARY[tc])), [operand(draw(kinds))])
        elif op == "copy":
            v = g.op(et, tgt, "copy", [operand(draw(kinds))])
        elif op == "binary":
            v = g.op(et, tgt, draw(st.sampled_from(BINARY[tc])),
                     [operand(draw(kinds)), operand(draw(kinds))])
        elif op == "compare":
            v = g.op("pred", tgt, "compare", [operand(draw(kinds)), operand(draw(kinds))],
                     f"direction={draw(st.sampled_from(DIRECTIONS))}")
        elif op == "select":
            v = g.op(et, tgt, "select", [operand(draw(kinds), "pred"), operand(draw(kinds)),
                                         operand(draw(kinds))])
        elif op == "clamp":
            v = g.op(et, tgt, "clamp", [operand(draw(kinds)) for _ in range(3)])
        elif op == "convert":
            v = g.op("s32" if tc == "f" else "f32", tgt, "convert", [operand(draw(kinds))])
        elif op == "bitcast":
            v = g.op("s32" if tc == "f" else "f32", tgt, "bitcast-convert",
                     [operand(draw(kinds))])
        elif op == "wide_bitcast":
            v = g.op("u8", tgt + (4,), "bitcast-convert", [operand(draw(kinds))])
        else:  # a rearrange also used by something that is not elementwise
            r = operand("rearrange", draw(st.sampled_from([et, "pred"])))
            if r.et == "pred" or not tgt or draw(st.booleans()):
                forced.append(r)  # the root uses it
                continue
            init = g.constant(et, (), "0")
            v = g.op(et, tgt[1:], "reduce", [r, init],
                     f"dimensions={{0}}, to_apply=%{g.reducer(et, 'add')}")
        made.append(v)
        if v.dims == tgt and v.et in earlier:
            earlier[v.et].append(v)
    outs = forced + [v for v in made if not g.uses.get(v.name) and v not in forced]
    return Case(g.text(dict.fromkeys(outs)))
