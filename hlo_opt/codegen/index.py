"""Layout-aware index expressions and their simplifier.

A *multi-index* is a tuple of ``s64`` :class:`~hlo_opt.codegen.expr.Expr`, one per
logical dimension.  ``linear_index(shape, idx)`` turns it into the element offset in the
physical buffer (honouring ``minor_to_major``); ``delinearize`` goes the other way for
row-major logical order (what reshape and bitcast mean).  Loop variables carry their
trip count, so the simplifier knows their ranges.

Simplification is a small table of rules applied bottom-up by :func:`simplify` (run by
every constructor here): constants fold, ``x*1``/``x+0`` vanish, and -- the rule that
makes reshapes and bitcasts inside a fusion cost no divisions where none are needed --
sums are kept as ``const + sum(coef * atom)`` so that ``floordiv``/``rem`` by ``c``
drop the terms whose coefficient ``c`` divides and vanish entirely when the rest is
known to lie in ``[0, c)``.  ``RULES`` lists them by name (``--stage`` output and tests
refer to the names).
"""
from __future__ import annotations

from .expr import Expr, const

S64 = "s64"


def loop_var(name: str, trip: int) -> Expr:
    """A loop variable ranging over ``[0, trip)``; ``attr`` is ``(name, trip)``, so the
    range travels with the node (renderers key loop variables by node).  A loop of one
    trip is the constant 0."""
    if trip == 1:
        return c(0)
    return Expr("var", S64, (), (name, int(trip)))


def c(v: int) -> Expr:
    return const(int(v), S64)


def bounds(e: Expr) -> tuple[int, int] | None:
    """Inclusive (lo, hi) of an index expression, or None when unknown."""
    op = e.op
    if op == "const":
        return (e.attr, e.attr)
    if op == "var":
        return (0, e.attr[1] - 1) if isinstance(e.attr, tuple) and e.attr[1] > 0 else None
    if op in ("add", "multiply", "floordiv", "rem", "minimum", "maximum"):
        a, b = bounds(e.args[0]), bounds(e.args[1])
        if a is None or b is None:
            if op == "rem" and e.args[1].is_const:
                return (0, e.args[1].attr - 1)
            return None
        if op == "add":
            return (a[0] + b[0], a[1] + b[1])
        if op == "multiply":
            ps = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
            return (min(ps), max(ps))
        if op == "floordiv" and b[0] > 0 and a[0] >= 0:
            return (a[0] // b[1], a[1] // b[0])
        if op == "rem" and b[0] > 0 and a[0] >= 0:
            return (0, min(a[1], b[1] - 1))
        if op == "minimum":
            return (min(a[0], b[0]), min(a[1], b[1]))
        if op == "maximum":
            return (max(a[0], b[0]), max(a[1], b[1]))
    if op == "convert" and e.args[0].dtype[0] in "su":
        return bounds(e.args[0])
    return None


# ---- sums as linear forms --------------------------------------------------------------
def _terms(e: Expr) -> tuple[int, dict]:
    """e == k + sum(coef * atom): returns (k, {atom: coef})."""
    if e.op == "const":
        return e.attr, {}
    if e.op == "add":
        k1, t1 = _terms(e.args[0])
        k2, t2 = _terms(e.args[1])
        t = dict(t1)
        for a, co in t2.items():
            t[a] = t.get(a, 0) + co
        return k1 + k2, {a: co for a, co in t.items() if co}
    if e.op == "multiply":
        a, b = e.args
        if b.is_const:
            k, t = _terms(a)
            return k * b.attr, {x: co * b.attr for x, co in t.items() if co * b.attr}
        if a.is_const:
            k, t = _terms(b)
            return k * a.attr, {x: co * a.attr for x, co in t.items() if co * a.attr}
    return 0, {e: 1}


def _from_terms(k: int, terms: dict) -> Expr:
    out = None
    for atom, co in terms.items():
        t = atom if co == 1 else Expr("multiply", S64, (atom, c(co)))
        out = t if out is None else Expr("add", S64, (out, t))
    if out is None:
        return c(k)
    return out if k == 0 else Expr("add", S64, (out, c(k)))


def _split(e: Expr, d: int):
    """(quotient terms, rest) such that e == d*quotient + rest."""
    k, terms = _terms(e)
    q = {a: co // d for a, co in terms.items() if co % d == 0}
    r = {a: co for a, co in terms.items() if co % d}
    qk, rk = divmod(k, d)
    return _from_terms(qk, q), _from_terms(rk, r)


# ---- the rule table ----------------------------------------------------------------------
def _fold(e):
    a = [x.attr for x in e.args]
    if e.op == "add":
        return c(a[0] + a[1])
    if e.op == "multiply":
        return c(a[0] * a[1])
    if e.op == "floordiv":
        return c(a[0] // a[1])
    if e.op == "rem":
        return c(a[0] % a[1])
    if e.op == "minimum":
        return c(min(a))
    if e.op == "maximum":
        return c(max(a))
    return None


def _identity(e):
    a, b = e.args
    if e.op == "add":
        if a.is_const and a.attr == 0:
            return b
        if b.is_const and b.attr == 0:
            return a
    if e.op == "multiply":
        for x, y in ((a, b), (b, a)):
            if y.is_const and y.attr == 1:
                return x
            if y.is_const and y.attr == 0:
                return c(0)
    if e.op in ("floordiv",) and b.is_const and b.attr == 1:
        return a
    if e.op == "rem" and b.is_const and b.attr == 1:
        return c(0)
    return None


def _div_by_const(e):
    a, b = e.args
    if not b.is_const or b.attr <= 0:
        return None
    d = b.attr
    lo = bounds(a)
    if lo is not None and 0 <= lo[0] and lo[1] < d:
        return c(0) if e.op == "floordiv" else a
    if a.op == "floordiv" and a.args[1].is_const and e.op == "floordiv":
        return Expr("floordiv", S64, (a.args[0], c(a.args[1].attr * d)))
    q, r = _split(a, d)
    rb = bounds(r)
    if rb is not None and 0 <= rb[0] and rb[1] < d:
        return q if e.op == "floordiv" else r
    if e.op == "floordiv" and not (q.is_const and q.attr == 0) and rb is not None \
            and rb[0] >= 0:
        return Expr("add", S64, (q, Expr("floordiv", S64, (r, b))))
    if e.op == "rem" and r is not a and rb is not None and rb[0] >= 0:
        return Expr("rem", S64, (r, b))
    return None


def _clamp_known(e):
    a, b = e.args
    ba, bb = bounds(a), bounds(b)
    if ba is None or bb is None:
        return None
    if e.op == "minimum":
        return a if ba[1] <= bb[0] else b if bb[1] <= ba[0] else None
    return a if ba[0] >= bb[1] else b if bb[0] >= ba[1] else None


RULES = [
    # (name, opcodes, rewrite(e) -> Expr or None)
    ("constant-fold", ("add", "multiply", "floordiv", "rem", "minimum", "maximum"),
     lambda e: _fold(e) if all(x.is_const for x in e.args) else None),
    ("identity", ("add", "multiply", "floordiv", "rem"), _identity),
    ("div-rem-by-constant", ("floordiv", "rem"), _div_by_const),
    ("clamp-known-range", ("minimum", "maximum"), _clamp_known),
]
_BY_OP: dict[str, list] = {}
for _name, _ops, _fn in RULES:
    for _op in _ops:
        _BY_OP.setdefault(_op, []).append(_fn)


def simplify(e: Expr) -> Expr:
    """Apply the rule table at the top node until nothing fires (children are assumed
    simplified, as every constructor below simplifies as it builds)."""
    for _ in range(16):
        for fn in _BY_OP.get(e.op, ()):
            new = fn(e)
            if new is not None and new is not e:
                e = new
                break
        else:
            return e
    return e


def add(a: Expr, b: Expr) -> Expr:
    return simplify(Expr("add", S64, (a, b)))


def mul(a: Expr, b: Expr) -> Expr:
    return simplify(Expr("multiply", S64, (a, b)))


def div(a: Expr, d: int) -> Expr:
    return simplify(Expr("floordiv", S64, (a, c(d))))


def rem(a: Expr, d: int) -> Expr:
    return simplify(Expr("rem", S64, (a, c(d))))


def clamp(x: Expr, lo: int, hi: int) -> Expr:
    x = simplify(Expr("maximum", S64, (x, c(lo))))
    return simplify(Expr("minimum", S64, (x, c(hi))))


# ---- layouts -----------------------------------------------------------------------------
def physical_strides(shape) -> list[int]:
    """Element stride of each logical dimension in the physical (layout) order."""
    m2m = shape.effective_layout().minor_to_major
    strides = [0] * len(shape.dims)
    s = 1
    for d in m2m:
        strides[d] = s
        s *= shape.dims[d]
    return strides


def row_major_strides(dims) -> list[int]:
    strides = [0] * len(dims)
    s = 1
    for d in range(len(dims) - 1, -1, -1):
        strides[d] = s
        s *= dims[d]
    return strides


def linear_index(shape, idx) -> Expr:
    """The physical element offset of multi-index ``idx`` in a buffer of ``shape``."""
    out = c(0)
    for i, st in zip(idx, physical_strides(shape)):
        out = add(out, mul(i, c(st)))
    return out


def logical_linear(dims, idx) -> Expr:
    out = c(0)
    for i, st in zip(idx, row_major_strides(dims)):
        out = add(out, mul(i, c(st)))
    return out


def delinearize(dims, linear: Expr) -> tuple:
    """Row-major multi-index of ``linear`` in ``dims`` (reshape semantics)."""
    out = []
    for d, st in zip(dims, row_major_strides(dims)):
        x = div(linear, st)
        out.append(rem(x, d) if d != 0 else x)
    return tuple(out)


def reshape_index(from_dims, to_dims, idx) -> tuple:
    """Multi-index into an operand of ``to_dims`` for output index ``idx`` of
    ``from_dims`` (both row-major logical; XLA's reshape)."""
    return delinearize(to_dims, logical_linear(from_dims, idx))


def count_divisions(e: Expr) -> int:
    from .expr import walk
    return sum(1 for n in walk(e) if n.op in ("floordiv", "rem"))
