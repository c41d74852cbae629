"""The kernel layer's expressions (``hlo_opt/codegen/expr.py``) as CUDA C++: a table from
``op`` to a C expression (as tinygrad's ``code_for_op``), with the 16/8-bit float
overrides, and a small statement builder that names every non-trivial value once (CSE by
the hash-consed ``Expr``) and opens one loop per inner ``reduce``.

16- and 8-bit floats live in ``float`` registers, already rounded to their type; loads and
stores convert from/to their bits (``prelude.cuh``).  Nothing here imports CUDA.
"""
from __future__ import annotations

import math

from ...errors import UnsupportedError

# register type of each XLA element type
CTYPE = {
    "pred": "bool", "s8": "int8_t", "s16": "int16_t", "s32": "int32_t", "s64": "int64_t",
    "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
    "f16": "float", "bf16": "float", "f32": "float", "f64": "double",
    "f8e4m3fn": "float", "f8e5m2": "float",
}
# memory type (what a buffer holds)
STORAGE = dict(CTYPE, f16="uint16_t", bf16="uint16_t", f8e4m3fn="uint8_t", f8e5m2="uint8_t")
NARROW_FLOAT = {"f16": "f16", "bf16": "bf16", "f8e4m3fn": "f8e4m3fn", "f8e5m2": "f8e5m2"}
FLOATS = {"f16", "bf16", "f32", "f64", "f8e4m3fn", "f8e5m2"}
SIGNED = {"s8", "s16", "s32", "s64"}
UNSIGNED = {"u8", "u16", "u32", "u64"}
BITS = {"pred": 8, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64,
        "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8e4m3fn": 8, "f8e5m2": 8}
UTYPE = {8: "uint8_t", 16: "uint16_t", 32: "uint32_t", 64: "uint64_t"}
STYPE = {8: "int8_t", 16: "int16_t", 32: "int32_t", 64: "int64_t"}
INT_RANGE = {t: ((-(1 << (BITS[t] - 1)), (1 << (BITS[t] - 1)) - 1) if t in SIGNED
                 else (0, (1 << BITS[t]) - 1)) for t in SIGNED | UNSIGNED}


def check_type(dtype: str, what: str = "") -> None:
    if dtype not in CTYPE:
        raise UnsupportedError(f"cuda: element type {dtype} is not supported"
                               + (f" ({what})" if what else ""))


def from_storage(dtype: str, code: str) -> str:
    """A value read from memory as its register type."""
    if dtype in NARROW_FLOAT:
        return f"hlo_{dtype}_to_f32({code})"
    return code


def to_storage(dtype: str, code: str) -> str:
    if dtype in NARROW_FLOAT:
        return f"hlo_f32_to_{dtype}({code})"
    return code


def rounded(dtype: str, code: str) -> str:
    """Round a float-register result to a narrow float type."""
    if dtype in ("f16", "bf16"):
        return f"hlo_round_{dtype}({code})"
    if dtype in ("f8e4m3fn", "f8e5m2"):
        return f"hlo_{dtype}_to_f32(hlo_f32_to_{dtype}({code}))"
    return code


def literal(value, dtype: str) -> str:
    check_type(dtype, "constant")
    if dtype == "pred":
        return "true" if value else "false"
    if dtype in FLOATS:
        v = float(value)
        wide = dtype == "f64"
        if math.isnan(v):
            return "__longlong_as_double(0x7ff8000000000000LL)" if wide else \
                "__int_as_float(0x7fc00000)"
        if math.isinf(v):
            if wide:
                return f"__longlong_as_double({'0xfff0000000000000LL' if v < 0 else '0x7ff0000000000000LL'})"
            return f"__int_as_float({'(int)0xff800000' if v < 0 else '0x7f800000'})"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"({text})" if wide else f"({text}f)" if v < 0 else (text if wide else text + "f")
    v = int(value)
    lo, hi = INT_RANGE[dtype]
    v = v & ((1 << BITS[dtype]) - 1)
    if dtype in SIGNED and v > hi:
        v -= 1 << BITS[dtype]
    if dtype in SIGNED:
        if v == lo:
            return f"(({CTYPE[dtype]})({v + 1}LL - 1))"
        return f"(({CTYPE[dtype]}){v}LL)" if BITS[dtype] < 64 else f"({v}LL)"
    return f"(({CTYPE[dtype]}){v}ULL)"


# ---- the table: op -> (renderer, expr, [argument codes]) -> C expression ---------------------
def _wrap_int(t: str, a: str, op: str, b: str) -> str:
    """Two's-complement wrapping integer arithmetic (C's signed overflow is undefined)."""
    u = UTYPE[BITS[t]]
    return f"(({CTYPE[t]})(({u}){a} {op} ({u}){b}))"


def _arith(op):
    def f(r, e, a):
        t = e.dtype
        if t in FLOATS:
            return r.round(t, f"({a[0]} {op} {a[1]})")
        if t == "pred":
            return {"+": f"({a[0]} || {a[1]})", "*": f"({a[0]} && {a[1]})",
                    "-": f"({a[0]} != {a[1]})"}[op]
        return _wrap_int(t, a[0], op, a[1])
    return f


def _divide(r, e, a):
    t = e.dtype
    if t in FLOATS:
        return r.round(t, f"({a[0]} / {a[1]})")
    return f"hlo_{'s' if t in SIGNED else 'u'}div<{CTYPE[t]}>({a[0]}, {a[1]})"


def _remainder(r, e, a):
    t = e.dtype
    if t in FLOATS:
        return r.round(t, f"{_fn(t, 'fmod')}({a[0]}, {a[1]})")
    return f"hlo_{'s' if t in SIGNED else 'u'}rem<{CTYPE[t]}>({a[0]}, {a[1]})"


def _minmax(which):
    def f(r, e, a):
        t = e.dtype
        if t in FLOATS:
            return f"hlo_f{which}<{CTYPE[t]}>({a[0]}, {a[1]})"
        if t == "pred":
            return f"({a[0]} {'||' if which == 'max' else '&&'} {a[1]})"
        return f"hlo_i{which}<{CTYPE[t]}>({a[0]}, {a[1]})"
    return f


def _fn(t: str, name: str) -> str:
    return name if t == "f64" else name + "f"


def _unary_float(name):
    def f(r, e, a):
        t = e.dtype
        if t not in FLOATS:
            raise UnsupportedError(f"cuda: {e.op} on {t}")
        return r.round(t, f"{_fn(t, name)}({a[0]})")
    return f


def _rsqrt(r, e, a):
    t = e.dtype
    return r.round(t, f"(({CTYPE[t]})1 / {_fn(t, 'sqrt')}({a[0]}))")


def _logistic(r, e, a):
    t = e.dtype
    return r.round(t, f"hlo_logistic(({'double' if t == 'f64' else 'float'}){a[0]})")


def _negate(r, e, a):
    t = e.dtype
    if t in FLOATS:
        return f"(-{a[0]})"
    return f"(({CTYPE[t]})(0 - ({UTYPE[BITS[t]]}){a[0]}))"


def _abs(r, e, a):
    t = e.dtype
    if t in FLOATS:
        return f"{_fn(t, 'fabs')}({a[0]})"
    if t in UNSIGNED:
        return a[0]
    return f"(({CTYPE[t]})({a[0]} < 0 ? 0 - ({UTYPE[BITS[t]]}){a[0]} : ({UTYPE[BITS[t]]}){a[0]}))"


def _sign(r, e, a):
    t = e.dtype
    if t in FLOATS:
        return f"hlo_sign<{CTYPE[t]}>({a[0]})"
    return f"hlo_isign<{CTYPE[t]}>({a[0]})"


def _bitwise(op, pred_op):
    def f(r, e, a):
        t = e.dtype
        if t == "pred":
            return f"({a[0]} {pred_op} {a[1]})"
        return f"(({CTYPE[t]})({a[0]} {op} {a[1]}))"
    return f


def _not(r, e, a):
    if e.dtype == "pred":
        return f"(!{a[0]})"
    return f"(({CTYPE[e.dtype]})~{a[0]})"


def _shift(kind):
    def f(r, e, a):
        t = e.dtype
        return f"hlo_{kind}<{CTYPE[t]}>({a[0]}, {a[1]}, {BITS[t]})"
    return f


def _power(r, e, a):
    t = e.dtype
    if t in FLOATS:
        return r.round(t, f"{_fn(t, 'pow')}({a[0]}, {a[1]})")
    return f"hlo_ipow<{CTYPE[t]}>({a[0]}, {a[1]})"


def _atan2(r, e, a):
    t = e.dtype
    return r.round(t, f"{_fn(t, 'atan2')}({a[0]}, {a[1]})")


_CMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _compare(r, e, a):
    direction, ctype = (e.attr or ("", ""))[:2]
    op = _CMP.get(direction)
    if op is None:
        raise UnsupportedError(f"cuda: compare direction '{direction}'")
    src = e.args[0].dtype
    if ctype == "TOTALORDER" and src in FLOATS:
        w = "double" if src == "f64" else "float"
        return f"(hlo_total_key(({w}){a[0]}) {op} hlo_total_key(({w}){a[1]}))"
    return f"({a[0]} {op} {a[1]})"


def _select(r, e, a):
    return f"({a[0]} ? {a[1]} : {a[2]})"


def _clamp(r, e, a):
    t = e.dtype
    k = "f" if t in FLOATS else "i"
    return f"hlo_{k}min<{CTYPE[t]}>(hlo_{k}max<{CTYPE[t]}>({a[1]}, {a[0]}), {a[2]})"


def _convert(r, e, a):
    src, dst = e.args[0].dtype, e.dtype
    x = a[0]
    if src == dst:
        return x
    check_type(src, "convert")
    check_type(dst, "convert")
    if dst == "pred":
        return f"({x} != 0)"
    if dst in FLOATS:
        if src in FLOATS:
            if dst == "f64":
                return f"((double){x})"
            return r.round(dst, f"((float){x})")
        return r.round(dst, f"(({'double' if dst == 'f64' else 'float'}){x})")
    # to an integer
    if src in FLOATS:
        lo, hi = INT_RANGE[dst]
        return (f"hlo_f2i<{CTYPE[dst]}>({x}, {literal(lo, dst)}, {literal(hi, dst)})")
    return f"(({CTYPE[dst]}){x})"


def _bitcast_convert(r, e, a):
    src, dst = e.args[0].dtype, e.dtype
    if BITS[src] != BITS[dst]:
        raise UnsupportedError("cuda: bitcast-convert between widths")
    x = a[0]
    if src in NARROW_FLOAT:
        x = f"hlo_f32_to_{src}({x})"
    elif src == "pred":
        x = f"((uint8_t){x})"
    u = UTYPE[BITS[src]]
    bits = f"hlo_bitcast<{u}>(({STORAGE[src] if src != 'pred' else 'uint8_t'}){x})"
    if dst in NARROW_FLOAT:
        return f"hlo_{dst}_to_f32({bits})"
    if dst == "pred":
        return f"({bits} != 0)"
    return f"hlo_bitcast<{CTYPE[dst]}>({bits})"


def _popcnt(r, e, a):
    return f"hlo_popcnt<{CTYPE[e.dtype]}>({a[0]})"


def _clz(r, e, a):
    return f"hlo_clz<{CTYPE[e.dtype]}>({a[0]})"


def _is_finite(r, e, a):
    return f"isfinite({a[0]})"


def _reduce_precision(r, e, a):
    ebits, mbits = e.attr
    t = e.dtype
    if t == "f64":
        return f"hlo_reduce_precision_f64({a[0]}, {ebits}, {mbits})"
    return r.round(t, f"hlo_reduce_precision_f32((float){a[0]}, {ebits}, {mbits})")


def _floordiv(r, e, a):
    return f"({a[0]} / {a[1]})"


def _rem(r, e, a):
    return f"({a[0]} % {a[1]})"


def _round_even(r, e, a):
    return r.round(e.dtype, f"{_fn(e.dtype, 'rint')}({a[0]})")


CODE_FOR_OP = {
    "add": _arith("+"), "subtract": _arith("-"), "multiply": _arith("*"),
    "divide": _divide, "remainder": _remainder,
    "maximum": _minmax("max"), "minimum": _minmax("min"),
    "and": _bitwise("&", "&&"), "or": _bitwise("|", "||"), "xor": _bitwise("^", "!="),
    "not": _not, "negate": _negate, "abs": _abs, "sign": _sign,
    "exponential": _unary_float("exp"), "exponential-minus-one": _unary_float("expm1"),
    "log": _unary_float("log"), "log-plus-one": _unary_float("log1p"),
    "sqrt": _unary_float("sqrt"), "rsqrt": _rsqrt, "cbrt": _unary_float("cbrt"),
    "tanh": _unary_float("tanh"), "sine": _unary_float("sin"), "cosine": _unary_float("cos"),
    "tan": _unary_float("tan"), "erf": _unary_float("erf"), "logistic": _logistic,
    "acos": _unary_float("acos"), "acosh": _unary_float("acosh"), "asin": _unary_float("asin"),
    "asinh": _unary_float("asinh"), "atan": _unary_float("atan"),
    "atanh": _unary_float("atanh"), "cosh": _unary_float("cosh"), "sinh": _unary_float("sinh"),
    "floor": _unary_float("floor"), "ceil": _unary_float("ceil"),
    "round-nearest-afz": _unary_float("round"), "round-nearest-even": _round_even,
    "is-finite": _is_finite, "power": _power, "atan2": _atan2,
    "compare": _compare, "select": _select, "clamp": _clamp,
    "convert": _convert, "bitcast-convert": _bitcast_convert,
    "shift-left": _shift("shl"), "shift-right-logical": _shift("shr_logical"),
    "shift-right-arithmetic": _shift("shr_arith"),
    "popcnt": _popcnt, "count-leading-zeros": _clz, "reduce-precision": _reduce_precision,
    "floordiv": _floordiv, "rem": _rem,
}


class Block:
    """Statements of one kernel body with scoped value names (CSE per scope)."""

    def __init__(self, load, indent: int = 1):
        self.load = load          # (input_number, index code, dtype) -> C expression
        self.lines: list[str] = []
        self.scopes: list[dict] = [{}]
        self.bindings: dict = {}  # var name -> C name (reducer acc/x, loop vars)
        self.indent = indent
        self._n = 0
        self.no_round = False     # inside a reducer: narrow floats accumulate in f32

    def round(self, dtype: str, code: str) -> str:
        return code if self.no_round else rounded(dtype, code)

    def round_narrow(self, accs, dtypes) -> None:
        """Round f32-accumulated narrow-float results to their type."""
        for a, dt in zip(accs, dtypes):
            if dt in NARROW_FLOAT:
                self.emit(f"{a} = {rounded(dt, a)};")

    def fresh(self, stem: str = "v") -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def open(self, header: str) -> None:
        self.emit(header + " {")
        self.indent += 1
        self.scopes.append({})

    def close(self) -> None:
        self.scopes.pop()
        self.indent -= 1
        self.emit("}")

    def _lookup(self, e):
        for s in reversed(self.scopes):
            hit = s.get(e)
            if hit is not None:
                return hit
        return None

    def value(self, e) -> str:
        """C code (a name or a literal) of ``e``, emitting the statements it needs."""
        hit = self._lookup(e)
        if hit is not None:
            return hit
        # iterative post-order: operands first; reduce bodies are rendered by _reduce
        stack = [(e, False)]
        while stack:
            n, ready = stack.pop()
            if self._lookup(n) is not None:
                continue
            if not ready:
                stack.append((n, True))
                for a in reversed(n.args):
                    if self._lookup(a) is None:
                        stack.append((a, False))
                continue
            self.scopes[-1][n] = self._node(n)
        return self._lookup(e)

    def _node(self, n) -> str:
        op = n.op
        if op == "const":
            return literal(n.attr, n.dtype)
        if op == "var":
            name = n.attr[0] if isinstance(n.attr, tuple) else n.attr
            c = self.bindings.get(name)
            if c is None:
                raise KeyError(f"unbound variable {name}")
            return c
        args = [self._lookup(a) for a in n.args]
        if op == "load":
            code = self.load(n.attr, args[0], n.dtype)
        elif op == "reduce":
            return self._reduce(n, args)
        elif op == "tuple-get":
            return self._lookup_multi(n.args[0])[n.attr]
        else:
            check_type(n.dtype, op)
            rule = CODE_FOR_OP.get(op)
            if rule is None:
                raise UnsupportedError(f"cuda: no rendering for '{op}' ({n.dtype})")
            code = rule(self, n, args)
        name = self.fresh()
        self.emit(f"const {CTYPE[n.dtype]} {name} = {code};")
        return name

    # reduce: one loop nest per distinct ReduceSpec (ignoring which result a node takes)
    def _lookup_multi(self, n):
        key = ("multi", _spec_key(n.attr), n.args)
        for s in reversed(self.scopes):
            if key in s:
                return s[key]
        raise KeyError("reduce not rendered")

    def _reduce(self, n, init_codes) -> str:
        spec = n.attr
        key = ("multi", _spec_key(spec), n.args)
        for s in reversed(self.scopes):
            if key in s:
                return s[key][spec.result]
        accs = self.reduce_loops(spec, init_codes, [a.dtype for a in n.args])
        self.scopes[-1][key] = accs
        return accs[spec.result]

    def reduce_loops(self, spec, init_codes, dtypes, loop_header=None) -> list[str]:
        """Declare accumulators, open the loops of ``spec`` (``loop_header(name, trip)``
        overrides the ``for`` line, for thread-strided loops), accumulate, close."""
        accs = []
        for k, (code, dt) in enumerate(zip(init_codes, dtypes)):
            a = self.fresh("acc")
            self.emit(f"{CTYPE[dt]} {a} = {code};")
            accs.append(a)
        for name, trip in spec.loop_vars:
            c = self.fresh("i")
            self.bindings[name] = c
            header = loop_header(c, trip, name) if loop_header else \
                f"for (int64_t {c} = 0; {c} < {trip}; ++{c})"
            self.open(header)
        self.accumulate(spec, accs, [self.value(v) for v in spec.values], dtypes)
        for _ in spec.loop_vars:
            self.close()
        self.round_narrow(accs, dtypes)
        return accs

    def accumulate(self, spec, accs, xs, dtypes) -> None:
        """accs = combiner(accs, xs), all at once (the combiner reads the old values)."""
        self.combine_into(spec, accs, accs, xs, dtypes)

    def combine_into(self, spec, targets, accs, xs, dtypes) -> None:
        self.scopes.append({})
        for name, c in zip(spec.acc_names, accs):
            self.bindings[name] = c
        for name, c in zip(spec.x_names, xs):
            self.bindings[name] = c
        saved, self.no_round = self.no_round, True
        outs = [self.value(c) for c in spec.combiner]
        self.no_round = saved
        self.scopes.pop()
        for t, o in zip(targets, outs):
            self.emit(f"{t} = {o};")


def _spec_key(spec):
    return (spec.loop_vars, spec.values, spec.combiner, spec.acc_names, spec.x_names)
