"""algsimp rules for logic, comparisons, selects, conversions, tuples and leaves:
and or not xor compare select convert bitcast-convert complex real imag
get-tuple-element iota constant reduce-precision.
"""
from __future__ import annotations

import numpy as np

from hlo_opt.ir.literal import Literal
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_complex, is_float, is_integral, is_unsigned_int

from hlo_opt.rewrite.rules import CHANGED, P, RuleList, Rules, X
from .predicates import (ALL, cast_preserves_values, constant_array, is_all,
                         is_nonnegative, is_pred, scalar_value)

r = RuleList()


def _both_pred(inst):
    return all(o.shape.element_type == "pred" for o in inst.operands)


# ---- and / or / xor / not ----------------------------------------------------------------
@r(P("and", X("a"), ALL(1), pred=_both_pred), "A && true => A")
def _and_true(ctx, a):
    return a


@r(P("and", ALL(1), X("a"), pred=_both_pred), "true && A => A")
def _true_and(ctx, a):
    return a


@r(P("and", X(), ALL(0, "z")), "A && false => false, A & 0 => 0")
def _and_false(ctx, z):
    return z


@r(P("and", ALL(0, "z"), X()), "false && A => false, 0 & A => 0")
def _false_and(ctx, z):
    return z


def _lt_info(cmp):
    """(var, bound) for compare(var, s32 scalar const, LT) or compare(const, var, GT)."""
    if cmp.opcode != "compare":
        return None
    d = cmp.comparison_direction
    a, b = cmp.operands

    def sconst(i):
        return (i.opcode == "constant" and i.shape.num_elements() == 1
                and i.shape.element_type == "s32" and not i.literal.elided)
    if d == "LT" and sconst(b):
        return a, scalar_value(b)
    if d == "GT" and sconst(a):
        return b, scalar_value(a)
    return None


@r(P("and", P("compare", X(), X()), P("compare", X(), X())),
   "(x < c1) && (x < c2) => x < min(c1, c2)")
def _tautological(ctx):
    li = _lt_info(ctx.inst.operands[0])
    ri = _lt_info(ctx.inst.operands[1])
    if li is None or ri is None or li[0] is not ri[0]:
        return None
    var = li[0]
    bound = ctx.b.scalar_like(var, min(li[1], ri[1]))
    return ctx.b.compare(var, bound, "LT")


@r(P("or", X(), ALL(1, "t"), pred=_both_pred), "A || true => true")
def _or_true(ctx, t):
    return t


@r(P("or", ALL(1, "t"), X(), pred=_both_pred), "true || A => true")
def _true_or(ctx, t):
    return t


@r(P("or", X("a"), ALL(0)), "A || false => A, A | 0 => A")
def _or_false(ctx, a):
    return a


@r(P("or", ALL(0), X("a")), "false || A => A, 0 | A => A")
def _false_or(ctx, a):
    return a


@r(P("xor", X("a"), X("a")), "A ^ A => 0")
def _xor_self(ctx, a):
    return ctx.b.scalar_like(ctx.inst, 0)


@r(P("xor", X("a"), ALL(0)), "A ^ 0 => A")
def _xor0(ctx, a):
    return a


@r(P("xor", ALL(0), X("a")), "0 ^ A => A")
def _0xor(ctx, a):
    return a


@r(P("not", P("not", X("x"))), "not(not(A)) => A")
def _notnot(ctx, x):
    return x


# ---- compare ---------------------------------------------------------------------------
def _dir(inst):
    return inst.comparison_direction


def _total_order(inst):
    return inst.attrs.get("type") == "TOTALORDER"


@r(P("compare", X("a"), X("b")), "unsigned X < 0 => false, X >= 0 => true, 0 > X, 0 <= X")
def _cmp_unsigned(ctx, a, b):
    if not is_unsigned_int(a.shape.element_type):
        return None
    d = _dir(ctx.inst)
    if d == "LT" and is_all(b, 0):
        return ctx.b.scalar_like(ctx.inst, False)
    if d == "GE" and is_all(b, 0):
        return ctx.b.scalar_like(ctx.inst, True)
    if d == "GT" and is_all(a, 0):
        return ctx.b.scalar_like(ctx.inst, False)
    if d == "LE" and is_all(a, 0):
        return ctx.b.scalar_like(ctx.inst, True)
    return None


@r(P("compare", X("a"), X("b")), "A < 0 => false, 0 > A => false for A >= 0")
def _cmp_nonneg(ctx, a, b):
    if _total_order(ctx.inst):
        return None
    d = _dir(ctx.inst)
    # NaN compares false, so the 'false' results hold for floats too; the 'true' ones
    # (A >= 0, 0 <= A) do not hold for NaN and are only done for integers (or when
    # approximate float rewrites are allowed, as XLA does unconditionally).
    exact_true = is_integral(a.shape.element_type) or ctx.opts.approximate_float_rewrites
    if d == "LT" and is_all(b, 0) and is_nonnegative(a):
        return ctx.b.scalar_like(ctx.inst, False)
    if d == "GT" and is_all(a, 0) and is_nonnegative(b):
        return ctx.b.scalar_like(ctx.inst, False)
    if exact_true and d == "GE" and is_all(b, 0) and is_nonnegative(a):
        return ctx.b.scalar_like(ctx.inst, True)
    if exact_true and d == "LE" and is_all(a, 0) and is_nonnegative(b):
        return ctx.b.scalar_like(ctx.inst, True)
    return None


@r(P("compare", X("a"), X("a")), "compare(A, A) => constant (integers)")
def _cmp_self(ctx, a):
    t = a.shape.element_type
    if not (is_integral(t) or t == "pred"):
        return None
    d = _dir(ctx.inst)
    if d in ("GT", "LT", "NE"):
        return ctx.b.scalar_like(ctx.inst, False)
    if d in ("EQ", "GE", "LE"):
        return ctx.b.scalar_like(ctx.inst, True)
    return None


@r(P("compare", X("a"), X("b"), pred=_both_pred), "A != false => A, A == true => A")
def _cmp_pred(ctx, a, b):
    d = _dir(ctx.inst)
    if d == "NE":
        if is_all(b, False):
            return a
        if is_all(a, False):
            return b
    elif d == "EQ":
        if is_all(b, True):
            return a
        if is_all(a, True):
            return b
    return None


@r(P("compare", P("select", P("compare", X(), X(), name="c0"), X("t"), X("f")), ALL(0)),
   "select(a >= b, 1, 0) != 0 => a >= b")
def _cmp_mask(ctx, c0, t, f):
    if _dir(ctx.inst) != "NE" or _dir(c0) != "GE":
        return None
    if is_all(t, 1) and is_all(f, 0) and ctx.opts.same_shape(ctx.inst.shape, c0.shape):
        return c0
    return None


@r(P("compare", X("l"), X("r")), "max(a, b) > a => b > a, a > min(a, b) => a > b")
def _cmp_minmax(ctx, l, r):
    if _dir(ctx.inst) != "GT":
        return None
    if l.opcode == "maximum":
        a, b = l.operands
        if r is a:
            ctx.inst.replace_operand(0, b)
            return CHANGED
        if r is b:
            ctx.inst.replace_operand(0, a)
            return CHANGED
    elif r.opcode == "minimum":
        a, b = r.operands
        if l is a:
            ctx.inst.replace_operand(1, b)
            return CHANGED
        if l is b:
            ctx.inst.replace_operand(1, a)
            return CHANGED
    return None


# ---- select ------------------------------------------------------------------------------
@r(P("select", X(), X("x"), X("x")), "select(p, A, A) => A")
def _sel_same(ctx, x):
    return x


@r(P("select", ALL(True), X("x"), X()), "select(true, A, B) => A")
def _sel_true(ctx, x):
    return x


@r(P("select", ALL(False), X(), X("y")), "select(false, A, B) => B")
def _sel_false(ctx, y):
    return y


@r(P("select", P("not", X("p")), X("a"), X("b")), "select(not(p), A, B) => select(p, B, A)")
def _sel_not(ctx, p, a, b):
    return ctx.b.select(p, b, a)


@r(P("select", X("p"), X("t"), X("f"), pred=is_pred), "select on preds => p, not(p), and, or")
def _sel_pred(ctx, p, t, f):
    if is_all(t, True) and is_all(f, False):
        return p
    if is_all(t, False) and is_all(f, True):
        return ctx.b.unary("not", p)
    if p.opcode == "compare" and p.operands[0] is t and p.operands[1] is f:
        d = _dir(p)
        if d in ("GT", "GE"):
            return ctx.b.binary("or", t, f)
        if d in ("LT", "LE"):
            return ctx.b.binary("and", t, f)
        if d == "EQ":
            return f
        if d == "NE":
            return t
    return None


@r(P("select", X("p"), X("a"), X("c")), "select(p, xs, dus(xs, x, i)) => dus(xs, select(...), i)")
def _sel_dus(ctx, p, a, c):
    for left, upd, other in ((True, c, a), (False, a, c)):
        if upd.opcode != "dynamic-update-slice" or upd.user_count != 1 \
                or upd.operands[0] is not other:
            continue
        xs, x, idx = other, upd.operands[1], upd.operands[2:]
        bld = ctx.b
        if p.shape.rank == 0:
            new_p = p
        else:
            new_p = bld.dynamic_slice(p, idx, x.shape.dims)
        new_x = bld.dynamic_slice(xs, idx, x.shape.dims)
        sel = bld.select(new_p, new_x, x) if left else bld.select(new_p, x, new_x)
        return bld.dynamic_update_slice(xs, sel, idx)
    return None


# ---- convert / bitcast-convert ---------------------------------------------------------
@r(P("convert", X("x")), "convert(A) => A when the type does not change")
def _convert_nop(ctx, x):
    return x if x.shape.element_type == ctx.inst.shape.element_type else None


@r(P("convert", P("convert", X("a"), name="mid")), "convert(convert(A, T1), T0) => A for upcasts")
def _convert_pair(ctx, a, mid):
    src = a.shape.element_type
    if src == ctx.inst.shape.element_type and cast_preserves_values(src, mid.shape.element_type):
        return a
    return None


@r(P("convert", P("constant", name="c")), "convert(constant) => constant")
def _convert_const(ctx, c):
    from hlo_opt.ir.types import BIT_WIDTH
    src, dst = c.shape.element_type, ctx.inst.shape.element_type
    if not ctx.opts.use_convert_constant_folding or c.user_count != 1 or c.literal.elided:
        return None
    if BIT_WIDTH[dst] > BIT_WIDTH[src] or BIT_WIDTH[dst] < 8:
        return None
    from hlo_opt.ir.types import numpy_dtype
    with np.errstate(all="ignore"):
        arr = constant_array(c).astype(numpy_dtype(dst))
    return ctx.b.constant(Literal(Shape.array(dst, arr.shape), arr))


_NARROWABLE = frozenset(("add", "subtract", "multiply", "divide", "remainder"))


@r(P("convert", P(_NARROWABLE, P("convert", X("a"), name="ca"),
                  P("convert", X("b"), name="cb"), name="op")),
   "convert(op(convert(A), convert(B))) => op(A, B) for integer up/down casts")
def _narrow_binop(ctx, a, ca, b, cb, op):
    from hlo_opt.ir.types import is_signed_int
    if op.user_count != 1 or ca.user_count != 1 or cb.user_count != 1:
        return None
    final = ctx.inst.shape.element_type
    mid = op.shape.element_type
    if a.shape.element_type != final or b.shape.element_type != final:
        return None
    if not (is_integral(final) and is_integral(mid)):
        return None
    from hlo_opt.ir.types import BIT_WIDTH
    if BIT_WIDTH[final] < 8 or BIT_WIDTH[mid] < 8:
        return None
    if is_signed_int(final) != is_signed_int(mid):
        return None
    if op.opcode in ("divide", "remainder") and not is_unsigned_int(mid):
        return None
    if not cast_preserves_values(final, mid):
        return None
    return ctx.b.binary(op.opcode, a, b)


@r(P("bitcast-convert", P("bitcast-convert", X("x"))), "bitcast-convert chain => last one")
def _bc_chain(ctx, x):
    if x.shape.element_type == ctx.inst.shape.element_type and \
            x.shape.same_dims_and_type(ctx.inst.shape):
        return x
    return ctx.b._add("bitcast-convert", ctx.inst.shape.without_layout(), [x])


@r(P("bitcast-convert", P("concatenate", name="cat")),
   "bitcast-convert(concat(bitcast-convert(A_i))) => concat(A_i)")
def _bc_concat(ctx, cat):
    to = ctx.inst.shape.element_type
    ins = []
    for o in cat.operands:
        if o.opcode != "bitcast-convert" or o.operands[0].shape.element_type != to:
            return None
        ins.append(o.operands[0])
    return ctx.b.concatenate(ins, cat.dimensions[0])


@r(P("bitcast-convert", X("x")), "bitcast-convert(A) => A for the same shape")
def _bc_same(ctx, x):
    return x


# ---- complex / real / imag --------------------------------------------------------------
@r(P("complex", P("real", X("c")), P("imag", X("c"))), "complex(real(C), imag(C)) => C")
def _complex_ri(ctx, c):
    return c


@r(P("real", P("complex", X("r"), X())), "real(complex(R, I)) => R")
def _real_c(ctx, r):
    return r


@r(P("real", X("x", pred=lambda i: not is_complex(i.shape.element_type))), "real(A) => A for reals")
def _real_real(ctx, x):
    return x


@r(P("imag", P("complex", X(), X("i"))), "imag(complex(R, I)) => I")
def _imag_c(ctx, i):
    return i


@r(P("imag", X(pred=lambda i: not is_complex(i.shape.element_type))), "imag(A) => 0 for reals")
def _imag_real(ctx):
    return ctx.b.scalar_like(ctx.inst, 0)


# ---- tuples / leaves -------------------------------------------------------------------
@r(P("get-tuple-element", P("tuple", name="t")), "get-tuple-element(tuple(..., A_i, ...), i) => A_i")
def _gte_tuple(ctx, t):
    return t.operands[ctx.inst.attr("index")]


@r(P("iota"), "iota over a dimension of size <= 1 => 0")
def _iota_trivial(ctx):
    i = ctx.inst
    if i.shape.dims[i.attr("iota_dimension")] > 1:
        return None
    return ctx.b.scalar_like(i, 0)


def _tuple_constant(ctx, lit):
    if lit.shape.is_tuple():
        return ctx.b.tuple([_tuple_constant(ctx, e) for e in lit.elements])
    return ctx.b.constant(lit)


@r(P("constant", pred=lambda i: i.shape.is_tuple()), "tuple constant => tuple(constants)")
def _const_tuple(ctx):
    lit = ctx.inst.literal
    if lit.elided or any(e.elided for e in lit.elements):
        return None
    return _tuple_constant(ctx, lit)


@r(P("constant", pred=lambda i: i.shape.is_array() and i.shape.num_elements() > 1),
   "constant with one repeated value => broadcast(scalar), 0..n-1 => iota")
def _const_splat(ctx):
    arr = constant_array(ctx.inst)
    if arr is None:
        return None
    t = ctx.inst.shape.element_type
    flat = arr.reshape(-1)
    first = flat[:1]
    if flat.tobytes() == first.tobytes() * flat.size:
        scalar = ctx.b.constant(Literal(Shape.array(t, ()), first.reshape(())))
        return ctx.b.broadcast(scalar, ctx.inst.shape.dims, ())
    if ctx.inst.shape.rank == 1 and (is_integral(t) or is_float(t)):
        n = flat.size
        vals = flat.astype(np.float64) if is_float(t) else flat.astype(np.int64)
        if np.array_equal(vals, np.arange(n)):
            return ctx.b.iota(t, (n,), 0)
        if is_integral(t):
            stride = int(vals[1]) if n > 1 else 0
            if stride > 1 and np.array_equal(vals, np.arange(n, dtype=np.int64) * stride):
                iota = ctx.b.iota(t, (n,), 0)
                return ctx.b.binary("multiply", iota, ctx.b.scalar_like(iota, stride))
    return None


@r(P("reduce-precision", X("x")), "reduce-precision to its own type => A")
def _rp_nop(ctx, x):
    from .predicates import _float_info
    if not ctx.opts.enable_remove_no_op_reduce_precision:
        return None
    t = x.shape.element_type
    if not is_float(t):
        return None
    nmant, minexp, maxexp = _float_info(t)
    exp_bits = int(np.log2(maxexp)) + 1 if maxexp > 0 else 0
    if ctx.inst.attr("mantissa_bits") == nmant and ctx.inst.attr("exponent_bits") == exp_bits:
        return x
    return None


RULES = Rules(r)
