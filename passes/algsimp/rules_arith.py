"""algsimp rules for arithmetic: abs add subtract multiply divide negate power remainder
exponential log sqrt rsqrt maximum minimum clamp.

Each rule names XLA's transform in its label.  ``exact=False`` marks rules that may change
float rounding (the differential tests state a tolerance for those).
"""
from __future__ import annotations

import math

import numpy as np

from hlo_opt.ir.literal import Literal
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import (BIT_WIDTH, is_complex, is_float, is_integral, is_signed_int,
                              numpy_dtype)

from hlo_opt.rewrite.rules import BSC, C, CHANGED, NC, P, RuleList, Rules, SC, X
from .predicates import (ALL, constant_array, floating, integral, is_all, is_fp_power_of_two,
                         is_nonnegative, max_value, min_value, reassociation_ok, scalar_value)

r = RuleList()


def _fast_math(opts) -> bool:
    return opts.enable_fast_math


def _approximate(opts) -> bool:
    return opts.approximate_float_rewrites


def _int_or_fast(ctx, inst) -> bool:
    return integral(inst) or ctx.opts.enable_fast_math


def _approx(ctx, inst) -> bool:
    return integral(inst) or ctx.opts.approximate_float_rewrites


def _const_sum(ctx, op, c1, c2, like):
    """op(c1, c2) (folded later by constant folding), broadcast to ``like`` when scalar."""
    s = ctx.b.binary(op, c1, c2)
    if s.shape.rank == 0 and like.shape.rank != 0:
        s = ctx.b.broadcast(s, like.shape.dims, ())
    return s


# ---- abs / negate --------------------------------------------------------------------------
@r(P("abs", X("a", pred=is_nonnegative)), "abs(A) => A for A >= 0")
def _abs(ctx, a):
    return a


@r(P("negate", P("negate", X("x"))), "negate(negate(A)) => A")
def _negneg(ctx, x):
    return x


# ---- add --------------------------------------------------------------------------------
def _signed_zero(ctx, zero, negative_is_exact: bool):
    """Floats: x + (+0) turns x = -0 into +0 (x - (-0) likewise), so those firings are
    marked inexact; x + (-0) and x - (+0) are exact."""
    if floating(ctx.inst) or ctx.inst.shape.element_type in ("c64", "c128"):
        v = scalar_value(zero)
        neg = v is not None and math.copysign(1.0, v.real if isinstance(v, complex) else v) < 0
        if neg != negative_is_exact or v is None:
            ctx.inexact = True


@r(P("add", X("a"), ALL(0, "z")), "A + 0 => A")
def _add0(ctx, a, z):
    _signed_zero(ctx, z, True)
    return a


@r(P("add", ALL(0, "z"), X("a")), "0 + A => A")
def _0add(ctx, a, z):
    _signed_zero(ctx, z, True)
    return a


@r(P("add", C("c"), NC("a")), "Const + A => A + Const")
def _add_canon(ctx, c, a):
    return ctx.b.binary("add", a, c)


def _fold_constants(op: str):
    """(A op C1) op C2 => A op (C1 op C2), when reassociating is allowed."""
    def fold(ctx, a, c1, c2):
        if not reassociation_ok(ctx, ctx.inst):
            return None
        return ctx.b.binary(op, a, _const_sum(ctx, op, c1, c2, ctx.inst))
    return fold


def _sub_add_constants(ctx, c1, a, c2):
    """(C1 - A) + C2 => (C1 + C2) - A, when reassociating is allowed."""
    if not reassociation_ok(ctx, ctx.inst):
        return None
    return ctx.b.binary("subtract", _const_sum(ctx, "add", c1, c2, ctx.inst), a)


r(P("add", P("add", NC("a"), C("c1")), C("c2")), "(A + C1) + C2 => A + (C1 + C2)",
  exact=False)(_fold_constants("add"))
r(P("add", P("add", NC("a"), BSC("c1")), BSC("c2")),
  "(A + bcast(C1)) + bcast(C2) => A + bcast(C1 + C2)", exact=False)(_fold_constants("add"))
r(P("add", P("subtract", C("c1"), NC("a")), C("c2")), "(C1 - A) + C2 => (C1 + C2) - A",
  exact=False)(_sub_add_constants)
r(P("add", P("subtract", BSC("c1"), NC("a")), BSC("c2")),
  "(bcast(C1) - A) + bcast(C2) => bcast(C1 + C2) - A", exact=False)(_sub_add_constants)


@r(P("add", X("x"), P("subtract", X("y"), X("x")), commute=True), "A + (B - A) => B")
def _add_sub_cancel(ctx, x, y):
    return y if _int_or_fast(ctx, ctx.inst) else None


@r(P("add", P("multiply", X(), X()), P("multiply", X(), X())), "A*C + B*C => (A+B)*C",
   exact=False)
def _distribute(ctx):
    lhs, rhs = ctx.inst.operands
    if lhs.user_count != 1 or rhs.user_count != 1:
        return None
    # XLA: lhs = mul(a, c) or mul(c, a); rhs = mul(c, b) in either order.
    for a, c in ((lhs.operands[0], lhs.operands[1]), (lhs.operands[1], lhs.operands[0])):
        r0, r1 = rhs.operands
        if r0 is c:
            b = r1
        elif r1 is c:
            b = r0
        else:
            continue
        if not (integral(ctx.inst) or ctx.opts.enable_floats_are_real or is_fp_power_of_two(c)):
            return None
        if floating(ctx.inst) and not ctx.opts.float_reassociation:
            return None
        return ctx.b.binary("multiply", ctx.b.binary("add", a, b), c)
    return None


@r(P("add", X("lhs"), P("dynamic-update-slice", name="dus"), commute=True),
   "A + dus(bcast(0), U, I) => dus(A, ds(A, I) + U, I)", exact=False)
def _add_sparse_update(ctx, lhs, dus):
    base = dus.operands[0]
    if base.opcode != "broadcast" or base.operands[0].opcode != "constant" \
            or base.operands[0].shape.num_elements() != 1 or not is_all(base, 0):
        return None
    if lhs is dus or not _approx(ctx, ctx.inst):  # -0 + 0 = +0 outside the update
        return None
    upd = dus.operands[1]
    idx = dus.operands[2:]
    ds = ctx.b.dynamic_slice(lhs, idx, upd.shape.dims)
    part = ctx.b.binary("add", ds, upd)
    return ctx.b.dynamic_update_slice(lhs, part, idx)


# ---- subtract ---------------------------------------------------------------------------
@r(P("subtract", X("a"), X("a")), "A - A => 0")
def _sub_self(ctx, a):
    return ctx.b.scalar_like(ctx.inst, 0) if _int_or_fast(ctx, ctx.inst) else None


@r(P("subtract", X("a"), ALL(0, "z")), "A - 0 => A")
def _sub0(ctx, a, z):
    _signed_zero(ctx, z, False)
    return a


@r(P("subtract", NC("a"), C("c")), "A - Const => A + (-Const)")
def _sub_const(ctx, a, c):
    return ctx.b.binary("add", a, ctx.b.unary("negate", c))


@r(P("subtract", NC("a"), P("broadcast", C("c"), name="bc")), "A - bcast(C) => A + bcast(-C)")
def _sub_bconst(ctx, a, c, bc):
    neg = ctx.b.broadcast(ctx.b.unary("negate", c), bc.shape.dims, bc.dimensions)
    return ctx.b.binary("add", a, neg)


@r(P("subtract", X("a"), P("subtract", X("a"), X("b"))), "A - (A - B) => B")
def _sub_sub(ctx, a, b):
    return b if _int_or_fast(ctx, ctx.inst) else None


@r(P("subtract", X("a"), P("add", X("a"), X("b"), commute=True)), "A - (A + B) => -B")
def _sub_add(ctx, a, b):
    return ctx.b.unary("negate", b) if _int_or_fast(ctx, ctx.inst) else None


@r(P("subtract", P("add", X("a"), X("b"), commute=True), X("a")), "(A + B) - A => B")
def _add_sub(ctx, a, b):
    return b if _int_or_fast(ctx, ctx.inst) else None


# ---- multiply ---------------------------------------------------------------------------
@r(P("multiply", X("a"), ALL(1)), "A * 1 => A")
def _mul1(ctx, a):
    return a


@r(P("multiply", ALL(1), X("a")), "1 * A => A")
def _1mul(ctx, a):
    return a


@r(P("multiply", ALL(0, "z"), X()), "0 * A => 0 (integers)")
def _0mul(ctx, z):
    return z if _int_or_fast(ctx, ctx.inst) else None


@r(P("multiply", X(), ALL(0, "z")), "A * 0 => 0 (integers)")
def _mul0(ctx, z):
    return z if _int_or_fast(ctx, ctx.inst) else None


@r(P("multiply", P("negate", X("a")), P("negate", X("b"))), "-A * -B => A * B")
def _negmul(ctx, a, b):
    m = ctx.inst
    m.replace_operand(0, a)
    m.replace_operand(1, b)
    return CHANGED


@r(P("multiply", P("abs", X("a"), name="ab"), P("abs", X("a"), name="ab")), "|A| * |A| => A * A")
def _absmul(ctx, a, ab):
    if is_complex(a.shape.element_type):
        return None
    ctx.inst.replace_operand(0, a)
    ctx.inst.replace_operand(1, a)
    return CHANGED


@r(P("multiply", X("x"), P("convert", X("p", pred=lambda i: i.shape.element_type == "pred")),
     commute=True), "A * convert(pred) => select(pred, A, 0)")
def _mul_pred(ctx, x, p):
    if not _approx(ctx, ctx.inst):  # floats: 0 * inf = nan, -5 * 0 = -0
        return None
    return ctx.b.select(p, x, ctx.b.scalar_like(ctx.inst, 0))


@r(P("multiply", P("multiply", NC("a"), C("c1"), commute=True),
     P("multiply", NC("b"), C("c2"), commute=True), commute=True),
   "(A * C1) * (B * C2) => (A * B) * (C1 * C2)", exact=False)
def _mul4(ctx, a, c1, b, c2):
    if not reassociation_ok(ctx, ctx.inst):
        return None
    prod = _const_sum(ctx, "multiply", c1, c2, ctx.inst)
    return ctx.b.binary("multiply", ctx.b.binary("multiply", a, b), prod)


r(P("multiply", P("multiply", NC("a"), C("c1"), commute=True), C("c2"), commute=True),
  "(A * C1) * C2 => A * (C1 * C2)", exact=False)(_fold_constants("multiply"))
r(P("multiply", P("multiply", NC("a"), BSC("c1")), BSC("c2")),
  "(A * bcast(C1)) * bcast(C2) => A * bcast(C1 * C2)", exact=False)(_fold_constants("multiply"))


@r(P("multiply", P("exponential", X("a")), P("exponential", X("b"))),
   "exp(A) * exp(B) => exp(A + B)", exact=False, when=_fast_math)
def _expmul(ctx, a, b):
    return ctx.b.unary("exponential", ctx.b.binary("add", a, b))


@r(P("multiply", P("sqrt", X("x")), P("sqrt", X("x"))), "sqrt(A) * sqrt(A) => A for A >= 0",
   exact=False)
def _sqrtsq(ctx, x):
    return x if is_nonnegative(x) and _approx(ctx, ctx.inst) else None


@r(P("multiply", P("rsqrt", X("x")), P("rsqrt", X("x"))), "rsqrt(A) * rsqrt(A) => 1 / A",
   exact=False)
def _rsqrtsq(ctx, x):
    if not (is_nonnegative(x) and _approx(ctx, ctx.inst)):
        return None
    return ctx.b.binary("divide", ctx.b.scalar_like(x, 1), x)


# ---- divide -----------------------------------------------------------------------------
@r(P("divide", X("a"), ALL(1)), "A / 1 => A")
def _div1(ctx, a):
    return a


def _scalar_const_of(inst):
    if inst.opcode == "constant" and inst.shape.num_elements() == 1:
        return inst
    if inst.opcode == "broadcast" and inst.operands[0].opcode == "constant" \
            and inst.operands[0].shape.num_elements() == 1:
        return inst.operands[0]
    return None


def _power_of_two(b):
    """2^k when ``b`` is an effective-scalar constant (or a broadcast of one) holding a
    positive power of two, else None."""
    c = _scalar_const_of(b)
    if c is None or c.literal.elided:
        return None
    v = scalar_value(c)
    return None if v <= 0 or v & (v - 1) else v


def _on_magnitude(ctx, a, op: str, k: int):
    """op(A, k); for signed A, op(|A|, k) with A's sign put back, so that division and
    remainder keep rounding toward zero."""
    bld = ctx.b
    if not is_signed_int(ctx.inst.shape.element_type):
        return bld.binary(op, a, bld.scalar_like(a, k))
    neg = bld.compare(a, bld.scalar_like(a, 0), "LT")
    absa = bld.select(neg, bld.unary("negate", a), a)
    q = bld.binary(op, absa, bld.scalar_like(absa, k))
    return bld.select(neg, bld.unary("negate", q), q)


@r(P("divide", X("a"), X("b"), pred=integral), "A / 2^k => A >> k (integers)")
def _div_shift(ctx, a, b):
    v = _power_of_two(b)
    if v is None:
        return None
    return _on_magnitude(ctx, a, "shift-right-logical", v.bit_length() - 1)


@r(P("divide", P("exponential", X("a")), P("exponential", X("b"))),
   "exp(A) / exp(B) => exp(A - B)", exact=False, when=_fast_math)
def _expdiv(ctx, a, b):
    return ctx.b.unary("exponential", ctx.b.binary("subtract", a, b))


@r(P("divide", X("a"), P("exponential", X("b"))), "A / exp(B) => A * exp(-B)", exact=False,
   when=_fast_math)
def _div_exp(ctx, a, b):
    return ctx.b.binary("multiply", a, ctx.b.unary("exponential", ctx.b.unary("negate", b)))


@r(P("divide", X("a"), P("power", X("b"), X("c"))), "A / pow(B, C) => A * pow(B, -C)",
   exact=False)
def _div_pow(ctx, a, b, c):
    if not _approx(ctx, ctx.inst) or integral(ctx.inst):
        return None
    return ctx.b.binary("multiply", a, ctx.b.binary("power", b, ctx.b.unary("negate", c)))


@r(P("divide", X("a"), P("sqrt", X("b"), name="s")), "A / sqrt(B) => A * rsqrt(B)", exact=False,
   when=_approximate)
def _div_sqrt(ctx, a, b, s):
    if s.user_count != 1:
        return None
    return ctx.b.binary("multiply", a, ctx.b.unary("rsqrt", b))


@r(P("divide", X("a"), P("rsqrt", X("b"), name="s")), "A / rsqrt(B) => A * sqrt(B)",
   exact=False, when=_approximate)
def _div_rsqrt(ctx, a, b, s):
    if s.user_count != 1:
        return None
    return ctx.b.binary("multiply", a, ctx.b.unary("sqrt", b))


def _exact_reciprocal(arr, t):
    """1/arr in the element type when every element's reciprocal is exact, else None."""
    with np.errstate(all="ignore"):
        recip = (np.ones_like(arr) / arr).astype(arr.dtype)
        vals = arr.astype(np.float64)
        ok = np.isfinite(vals) & (vals != 0)
        if not np.all(ok):
            return None
        m, _ = np.frexp(vals)
        if not np.all(np.abs(m) == 0.5):
            return None
        if not np.all(np.isfinite(recip.astype(np.float64))):
            return None
        if not np.all(recip.astype(np.float64) * vals == 1.0):
            return None
    return recip


_RECIPROCALS: dict = {}  # (id(literal), approximate) -> (literal, (1/literal, its text) or None)


def _reciprocal_literal(c, approximate: bool):
    """(Literal, text) of 1/C for constant ``c`` (exact unless ``approximate``), or None;
    cached per literal (literals are never mutated in place), so a divisor shared by many
    divides costs one numpy computation."""
    lit = c.literal
    key = (id(lit), approximate)
    hit = _RECIPROCALS.get(key)
    if hit is not None and hit[0] is lit:
        return hit[1]
    found = None
    arr = constant_array(c)
    if arr is not None:
        t = c.shape.element_type
        recip = _exact_reciprocal(arr, t) if is_float(t) else None
        if recip is None and approximate:
            with np.errstate(all="ignore"):
                recip = (np.ones_like(arr) / arr).astype(arr.dtype)
        if recip is not None:
            recip = np.asarray(recip).astype(numpy_dtype(t))
            inv = Literal(Shape.array(t, recip.shape), recip)
            found = (inv, inv.to_text())
    if len(_RECIPROCALS) > 10_000:
        _RECIPROCALS.clear()
    _RECIPROCALS[key] = (lit, found)
    return found


@r(P("divide", NC("a"), X("b"), pred=lambda i: not integral(i) and i.shape.element_type != "pred"),
   "A / Const => A * (1 / Const)")
def _div_const(ctx, a, b):
    c = b if b.opcode == "constant" else (
        b.operands[0] if b.opcode == "broadcast" and b.operands[0].opcode == "constant" else None)
    if c is None:
        return None
    found = _reciprocal_literal(c, ctx.opts.approximate_float_rewrites)
    if found is None:
        return None
    inv = ctx.b.constant(*found)
    if b is not c:
        inv = ctx.b.broadcast(inv, b.shape.dims, b.dimensions)
    return ctx.b.binary("multiply", a, inv)


@r(P("divide", P("divide", X("a"), X("b")), P("divide", X("c"), X("d"))),
   "(A / B) / (C / D) => (A * D) / (B * C)", exact=False, when=_approximate)
def _divdiv(ctx, a, b, c, d):
    if integral(ctx.inst):
        return None
    return ctx.b.binary("divide", ctx.b.binary("multiply", a, d), ctx.b.binary("multiply", b, c))


@r(P("divide", P("divide", X("a"), X("b")), X("c")), "(A / B) / C => A / (B * C)", exact=False,
   when=_approximate)
def _divdiv2(ctx, a, b, c):
    if integral(ctx.inst):
        return None
    return ctx.b.binary("divide", a, ctx.b.binary("multiply", b, c))


@r(P("divide", X("a"), P("divide", X("b"), X("c"))), "A / (B / C) => (A * C) / B", exact=False,
   when=_approximate)
def _divdiv3(ctx, a, b, c):
    if integral(ctx.inst):
        return None
    return ctx.b.binary("divide", ctx.b.binary("multiply", a, c), b)


# ---- power ------------------------------------------------------------------------------
@r(P("power", X(), ALL(0)), "pow(A, 0) => 1")
def _pow0(ctx):
    return ctx.b.scalar_like(ctx.inst, 1)


@r(P("power", X("a"), ALL(1)), "pow(A, 1) => A")
def _pow1(ctx, a):
    return a


@r(P("power", P("exponential", X("a")), X("b")), "pow(exp(A), B) => exp(A * B)", exact=False,
   when=_fast_math)
def _powexp(ctx, a, b):
    return ctx.b.unary("exponential", ctx.b.binary("multiply", a, b))


@r(P("power", X("a"), ALL(2)), "pow(A, 2) => A * A", exact=False)
def _pow2(ctx, a):
    return ctx.b.binary("multiply", a, a)


@r(P("power", X("a"), ALL(3)), "pow(A, 3) => A * A * A", exact=False)
def _pow3(ctx, a):
    if not _approx(ctx, ctx.inst):
        return None
    return ctx.b.binary("multiply", a, ctx.b.binary("multiply", a, a))


@r(P("power", X("a"), ALL(-1)), "pow(A, -1) => 1 / A", exact=False)
def _powm1(ctx, a):
    if integral(ctx.inst):
        return None  # XLA does it for ints too, but integer pow(A,-1) is 0 except |A| == 1
    return ctx.b.binary("divide", ctx.b.scalar_like(a, 1), a)


@r(P("power", X("a"), ALL(0.5)), "pow(A, 0.5) => sqrt(A) for A >= 0", exact=False,
   when=_approximate)
def _powhalf(ctx, a):
    if not (is_nonnegative(a) and floating(ctx.inst)):
        return None
    return ctx.b.unary("sqrt", a)


# ---- remainder --------------------------------------------------------------------------
@r(P("remainder", P("remainder", X(), X("b"), name="inner"), X("b")), "(A % B) % B => A % B")
def _remrem(ctx, inner, b):
    return inner


@r(P("remainder", X("a"), X("b"), pred=integral), "A % 2^k => A & (2^k - 1) (integers)")
def _rem_and(ctx, a, b):
    v = _power_of_two(b)
    if v is None:
        return None
    return _on_magnitude(ctx, a, "and", v - 1)


@r(P("remainder", P("iota", name="iota"), BSC("d")), "iota % N => iota when N >= size")
def _iota_rem(ctx, iota, d):
    if not integral(iota):
        return None
    n = iota.shape.dims[iota.attr("iota_dimension")]
    return iota if scalar_value(d) >= n else None


@r(P("remainder", P("add", P("iota", name="iota"), BSC("n"), commute=True, name="sum"),
     BSC("d", bcast="bd")), "(iota + N) % N => iota % N when iota + N cannot overflow")
def _iota_plus_n_rem(ctx, iota, n, sum, d, bd):
    if not integral(iota):
        return None
    nv, dv = scalar_value(n), scalar_value(d)
    if nv is None or nv != dv or isinstance(nv, bool):
        return None
    t = iota.shape.element_type
    bits = BIT_WIDTH[t]
    hi = (1 << (bits - 1)) - 1 if is_signed_int(t) else (1 << bits) - 1
    size = iota.shape.dims[iota.attr("iota_dimension")]
    if nv + size > hi:  # XLA's OverflowSafeAdd + FitsInIntegralType
        return None
    return ctx.b.binary("remainder", iota, bd)


# ---- exp / log / sqrt / rsqrt -----------------------------------------------------------
@r(P("exponential", X("z", pred=lambda i: is_all(i, 0) and (i.opcode == "constant" and
                                                          i.shape.rank == 0
                                                          or i.opcode == "broadcast"))),
   "exp(0) => 1")
def _exp0(ctx, z):
    return ctx.b.scalar_like(ctx.inst, 1)


@r(P("log", P("exponential", X("a"))), "log(exp(A)) => A", exact=False, when=_fast_math)
def _logexp(ctx, a):
    return a


@r(P("log", P("power", X("a"), X("b"))), "log(pow(A, B)) => B * log(|A|)", exact=False,
   when=_approximate)
def _logpow(ctx, a, b):
    bld = ctx.b
    absa = a if is_complex(a.shape.element_type) else bld.unary("abs", a)
    prod = bld.binary("multiply", bld.unary("log", absa), b)
    is0 = bld.compare(b, bld.scalar_like(b, 0), "EQ")
    return bld.select(is0, bld.scalar_like(ctx.inst, 0), prod)


@r(P("log", P("sqrt", X("a"))), "log(sqrt(A)) => 0.5 * log(A)", exact=False, when=_approximate)
def _logsqrt(ctx, a):
    return ctx.b.binary("multiply", ctx.b.unary("log", a), ctx.b.scalar_like(ctx.inst, 0.5))


@r(P("log", P("rsqrt", X("a"))), "log(rsqrt(A)) => -0.5 * log(A)", exact=False, when=_approximate)
def _logrsqrt(ctx, a):
    return ctx.b.binary("multiply", ctx.b.unary("log", a), ctx.b.scalar_like(ctx.inst, -0.5))


@r(P("sqrt", P("multiply", X("a"), X("a"))), "sqrt(A * A) => |A|", exact=False, when=_fast_math)
def _sqrtsq2(ctx, a):
    if is_complex(a.shape.element_type):
        comp = "f32" if a.shape.element_type == "c64" else "f64"
        return ctx.b.convert(ctx.b.unary("abs", a, comp), a.shape.element_type)
    return ctx.b.unary("abs", a)


@r(P("rsqrt", P("power", X("a"), ALL(-2))), "rsqrt(pow(A, -2)) => A for A >= 0", exact=False,
   when=_approximate)
def _rsqrtpow(ctx, a):
    return a if is_nonnegative(a) else None


@r(P("rsqrt", P("divide", ALL(1), X("a"))), "rsqrt(1 / A) => sqrt(A) for A >= 0", exact=False,
   when=_approximate)
def _rsqrtrecip(ctx, a):
    if not is_nonnegative(a):
        return None
    return ctx.b.unary("sqrt", a)


# ---- maximum / minimum / clamp --------------------------------------------------------------
def _minmax_rules(op: str, other: str, extreme, label_ext: str):
    @r(P(op, X("x"), X("x")), f"{op}(A, A) => A")
    def same(ctx, x):
        return x

    @r(P(op, X("a"), X("b")), f"{op}(A, {label_ext}) => A")
    def ext(ctx, a, b):
        t = ctx.inst.shape.element_type
        if not (is_integral(t) or (is_float(t) and ctx.opts.minmax_propagate_nan)):
            return None
        if b.shape.element_type == t and is_all(a, extreme(a.shape.element_type)):
            return b
        if a.shape.element_type == t and is_all(b, extreme(b.shape.element_type)):
            return a
        return None

    @r(P(op, P(op, X(), X(), name="inner"), X()), f"{op}({op}(A, B), B) => {op}(A, B)")
    def nested_l(ctx, inner):
        rhs = ctx.inst.operands[1]
        return inner if rhs in inner.operands else None

    @r(P(op, X("a"), P(op, X("a"), X(), name="inner")), f"{op}(A, {op}(A, B)) => {op}(A, B)")
    def nested_r(ctx, a, inner):
        return inner

    @r(P(op, X("b"), P(op, X("a"), X("b"))), f"{op}(B, {op}(A, B)) => {op}(B, A)")
    def nested_swap(ctx, b, a):
        ctx.inst.replace_operand(1, a)
        return CHANGED


_minmax_rules("maximum", "minimum", min_value, "min_value")
_minmax_rules("minimum", "maximum", max_value, "max_value")


def _clamp_if_ordered(ctx, lo_b, x, hi_b):
    lo = scalar_value(lo_b)
    hi = scalar_value(hi_b)
    if lo is None or hi is None or isinstance(lo, complex):
        return None
    if not lo < hi:
        return None
    return ctx.b.clamp(lo_b, x, hi_b)


def _bsc_eff(name):
    return P("broadcast", SC(), name=name)


@r(P("maximum", _bsc_eff("lo"), P("minimum", X("x"), _bsc_eff("hi"), commute=True),
     commute=True), "max(bcast(lo), min(A, bcast(hi))) => clamp(lo, A, hi)")
def _maxmin_clamp(ctx, lo, x, hi):
    return _clamp_if_ordered(ctx, lo, x, hi)


@r(P("minimum", _bsc_eff("hi"), P("maximum", X("x"), _bsc_eff("lo"), commute=True),
     commute=True), "min(bcast(hi), max(A, bcast(lo))) => clamp(lo, A, hi)")
def _minmax_clamp(ctx, hi, x, lo):
    return _clamp_if_ordered(ctx, lo, x, hi)


@r(P("maximum", X("m"), P("clamp", X("lo"), X(), X(), name="cl"), commute=True),
   "max(lo, clamp(lo, A, hi)) => clamp(lo, A, hi)")
def _max_clamp(ctx, m, lo, cl):
    # XLA does this for any bounds; it only holds when lo <= hi (else clamp gives hi < lo).
    if m is not lo:
        return None
    lv, hv = scalar_value(lo), scalar_value(cl.operands[2])
    if lv is None or hv is None or isinstance(lv, complex) or not lv <= hv:
        return None
    return cl


_MONO = frozenset(("cbrt", "erf", "logistic", "tanh"))


@r(P("maximum", P(_MONO, X("a"), name="fa"), P(_MONO, X("b"), name="fb")),
   "max(f(A), f(B)) => f(max(A, B)) for nondecreasing sublinear f")
def _max_mono(ctx, a, fa, b, fb):
    if fa.opcode != fb.opcode:
        return None
    return ctx.b.unary(fa.opcode, ctx.b.binary("maximum", a, b))


@r(P("clamp", X("lo"), P("clamp", X("lo"), X(), X("hi"), name="inner"), X("hi")),
   "clamp(a, clamp(a, x, b), b) => clamp(a, x, b)")
def _clampclamp(ctx, lo, inner, hi):
    return inner


RULES = Rules(r)
