"""The LLVM IR of each value op, one row per opcode (tinygrad's ``code_for_op`` idea).

``OPS[op](cx, e, args)`` returns the register value of expression ``e`` given its
operands' register values ``args``; ``cx`` is the render context (``cx.b`` the IR
builder, ``cx.intrinsic(name, type)``, ``cx.libm(name, type)``).  Rows dispatch on the
element kind (``f`` float, ``s`` signed, ``u`` unsigned, ``p`` pred) of the operands.
Integer corners follow XLA (``x/0 = -1`` or all ones, ``x%0 = x``, ``INT_MIN/-1 =
INT_MIN``, over-wide shifts give 0 or the sign); max/min propagate NaN; float->int
converts saturate with NaN -> 0.  An op/type pair with no row raises ``NoRow`` and the
step runs as a host library call instead.
"""
from __future__ import annotations

from llvmlite import ir

from . import irtypes as T


class NoRow(Exception):
    pass


def _k(e, i=0):
    return T.kind(e.args[i].dtype)


def _c(v, ty):
    return ir.Constant(ty, v)


def _arith(fop, iop, pop=None):
    def row(cx, e, a):
        k = _k(e)
        b = cx.b
        if k == "f":
            return getattr(b, fop)(a[0], a[1])
        if k == "p":
            if pop is None:
                raise NoRow
            return getattr(b, pop)(a[0], a[1])
        return getattr(b, iop)(a[0], a[1])
    return row


def _divide(cx, e, a):
    b, k = cx.b, _k(e)
    if k == "f":
        return b.fdiv(a[0], a[1])
    if k == "p":
        raise NoRow
    x, y = a
    ty = x.type
    zero = b.icmp_unsigned("==", y, _c(0, ty))
    if k == "u":
        safe = b.select(zero, _c(1, ty), y)
        return b.select(zero, _c(-1, ty), b.udiv(x, safe))
    n = ty.width
    int_min = _c(1 << (n - 1), ty)
    ovf = b.and_(b.icmp_unsigned("==", x, int_min), b.icmp_signed("==", y, _c(-1, ty)))
    bad = b.or_(zero, ovf)
    safe = b.select(bad, _c(1, ty), y)
    q = b.sdiv(x, safe)
    return b.select(zero, _c(-1, ty), b.select(ovf, int_min, q))


def _remainder(cx, e, a):
    b, k = cx.b, _k(e)
    if k == "f":
        return cx.call_libm("fmod", [a[0], a[1]], a[0].type)
    if k == "p":
        raise NoRow
    x, y = a
    ty = x.type
    zero = b.icmp_unsigned("==", y, _c(0, ty))
    if k == "u":
        safe = b.select(zero, _c(1, ty), y)
        return b.select(zero, x, b.urem(x, safe))
    n = ty.width
    ovf = b.and_(b.icmp_unsigned("==", x, _c(1 << (n - 1), ty)),
                 b.icmp_signed("==", y, _c(-1, ty)))
    safe = b.select(b.or_(zero, ovf), _c(1, ty), y)
    r = b.srem(x, safe)
    return b.select(zero, x, b.select(ovf, _c(0, ty), r))


def _minmax(which):
    def row(cx, e, a):
        b, k = cx.b, _k(e)
        if k == "f":
            return cx.intrinsic("llvm." + which, [a[0], a[1]])
        if k == "p":
            return b.or_(a[0], a[1]) if which == "maximum" else b.and_(a[0], a[1])
        cmp = b.icmp_signed if k == "s" else b.icmp_unsigned
        gt = cmp(">" if which == "maximum" else "<", a[0], a[1])
        return b.select(gt, a[0], a[1])
    return row


def _logic(op):
    def row(cx, e, a):
        if _k(e) == "f":
            raise NoRow
        return getattr(cx.b, op)(a[0], a[1])
    return row


def _not(cx, e, a):
    if _k(e) == "f":
        raise NoRow
    return cx.b.not_(a[0])


def _shift(kind_):
    def row(cx, e, a):
        b, k = cx.b, _k(e)
        if k in ("f", "p"):
            raise NoRow
        x, s = a
        ty = x.type
        n = ty.width
        big = b.icmp_unsigned(">=", s, _c(n, ty))
        safe = b.select(big, _c(0, ty), s)
        if kind_ == "shl":
            return b.select(big, _c(0, ty), b.shl(x, safe))
        if kind_ == "lshr":
            return b.select(big, _c(0, ty), b.lshr(x, safe))
        return b.select(big, b.ashr(x, _c(n - 1, ty)), b.ashr(x, safe))
    return row


_FCMP = {"EQ": ("oeq", False), "NE": ("une", True), "LT": ("olt", False),
         "LE": ("ole", False), "GT": ("ogt", False), "GE": ("oge", False)}
_ICMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _total_order_key(cx, x):
    b = cx.b
    ity = T.I64 if x.type == T.F64 else T.I32
    i = b.bitcast(x, ity)
    n = ity.width
    neg = b.icmp_signed("<", i, _c(0, ity))
    return b.select(neg, b.xor(i, _c((1 << (n - 1)) - 1, ity)), i)


def _compare(cx, e, a):
    b, k = cx.b, _k(e)
    direction, ctype = e.attr
    x, y = a
    if k == "f":
        if ctype == "TOTALORDER":
            return b.icmp_signed(_ICMP[direction], _total_order_key(cx, x),
                                 _total_order_key(cx, y))
        pred, unordered = _FCMP[direction]
        if unordered:
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(_ICMP[direction], x, y)
    if k in ("s",):
        return b.icmp_signed(_ICMP[direction], x, y)
    return b.icmp_unsigned(_ICMP[direction], x, y)


def _select(cx, e, a):
    return cx.b.select(a[0], a[1], a[2])


def _clamp(cx, e, a):
    lo, x, hi = a
    k = T.kind(e.dtype)
    b = cx.b
    if k == "f":
        return cx.intrinsic("llvm.minimum", [cx.intrinsic("llvm.maximum", [x, lo]), hi])
    if k == "p":
        raise NoRow
    cmp = b.icmp_signed if k == "s" else b.icmp_unsigned
    x = b.select(cmp("<", x, lo), lo, x)
    return b.select(cmp(">", x, hi), hi, x)


def _negate(cx, e, a):
    k = _k(e)
    if k == "f":
        return cx.b.fneg(a[0])
    if k == "p":
        raise NoRow
    return cx.b.neg(a[0])


def _abs(cx, e, a):
    k = _k(e)
    if k == "f":
        return cx.intrinsic("llvm.fabs", [a[0]])
    if k == "u" or k == "p":
        return a[0]
    b = cx.b
    return b.select(b.icmp_signed("<", a[0], _c(0, a[0].type)), b.neg(a[0]), a[0])


def _sign(cx, e, a):
    b, k = cx.b, _k(e)
    x = a[0]
    ty = x.type
    if k == "f":
        one = cx.intrinsic("llvm.copysign", [ir.Constant(ty, 1.0), x])
        is_zero_or_nan = b.fcmp_unordered("==", x, ir.Constant(ty, 0.0))
        return b.select(is_zero_or_nan, x, one)
    if k == "u":
        return b.zext(b.icmp_unsigned("!=", x, _c(0, ty)), ty)
    if k == "p":
        return x
    pos = b.zext(b.icmp_signed(">", x, _c(0, ty)), ty)
    neg = b.zext(b.icmp_signed("<", x, _c(0, ty)), ty)
    return b.sub(pos, neg)


def _fintr(name):
    def row(cx, e, a):
        if _k(e) != "f":
            raise NoRow
        return cx.intrinsic(name, a)
    return row


def _flib(name):
    def row(cx, e, a):
        if _k(e) != "f":
            raise NoRow
        return cx.call_libm(name, a, a[0].type)
    return row


def _rsqrt(cx, e, a):
    if _k(e) != "f":
        raise NoRow
    x = a[0]
    return cx.b.fdiv(ir.Constant(x.type, 1.0), cx.intrinsic("llvm.sqrt", [x]))


def exp_f32(cx, x):
    """expf as straight-line code (Cephes' range reduction and degree-5 polynomial,
    about 1 ulp) so that loops containing it vectorise; XLA:CPU also emits its own
    polynomial exp instead of calling libm.  Overflow gives inf, underflow 0, NaN stays."""
    b = cx.b
    f = lambda v: ir.Constant(T.F32, v)  # noqa: E731
    hi, lo = 88.72283935546875, -87.33654475
    xc = b.select(b.fcmp_ordered(">", x, f(hi)), f(hi), x)
    xc = b.select(b.fcmp_ordered("<", xc, f(lo)), f(lo), xc)
    fx = cx.intrinsic("llvm.floor", [b.fadd(b.fmul(xc, f(1.44269504088896341)), f(0.5))])
    r = b.fsub(b.fsub(xc, b.fmul(fx, f(0.693359375))), b.fmul(fx, f(-2.12194440e-4)))
    z = b.fmul(r, r)
    y = f(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
              5.0000001201e-1):
        y = b.fadd(b.fmul(y, r), f(c))
    y = b.fadd(b.fadd(b.fmul(y, z), r), f(1.0))
    n = b.fptosi(fx, T.I32)   # in [-126, 128]: scale by 2^h * 2^(n-h), both normal
    h = b.ashr(n, ir.Constant(T.I32, 1))

    def pow2(k):
        return b.bitcast(b.shl(b.add(k, ir.Constant(T.I32, 127)), ir.Constant(T.I32, 23)),
                         T.F32)
    out = b.fmul(b.fmul(y, pow2(h)), pow2(b.sub(n, h)))
    out = b.select(b.fcmp_ordered(">", x, f(hi)), f(float("inf")), out)
    out = b.select(b.fcmp_ordered("<", x, f(-103.972)), f(0.0), out)
    return b.select(b.fcmp_unordered("uno", x, x), x, out)


def log_f32(cx, x):
    """logf as straight-line code (Cephes' logf: the mantissa in [sqrt(1/2), sqrt(2)),
    a degree-9 polynomial of m - 1, the exponent added back in two parts; about 1 ulp)
    so that loops containing it vectorise, as XLA:CPU replaces ``llvm.log`` by its own
    polynomial.  Denormals are scaled into the normal range first; log(0) = -inf,
    log(x < 0) = NaN, log(inf) = inf, NaN stays."""
    b = cx.b
    f = lambda v: ir.Constant(T.F32, v)  # noqa: E731
    i = lambda v: ir.Constant(T.I32, v)  # noqa: E731
    tiny = b.fcmp_ordered("<", x, f(1.1754943508222875e-38))
    xs = b.select(tiny, b.fmul(x, f(8388608.0)), x)           # * 2^23
    bits = b.bitcast(xs, T.I32)
    e = b.sub(b.lshr(bits, i(23)), i(126))                    # frexp: m in [0.5, 1)
    e = b.select(tiny, b.sub(e, i(23)), e)
    m = b.bitcast(b.or_(b.and_(bits, i(0x007FFFFF)), i(0x3F000000)), T.F32)
    small = b.fcmp_ordered("<", m, f(0.707106781186547524))
    e = b.select(small, b.sub(e, i(1)), e)
    m = b.fsub(b.select(small, b.fadd(m, m), m), f(1.0))
    z = b.fmul(m, m)
    y = f(7.0376836292e-2)
    for c in (-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
              -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1):
        y = b.fadd(b.fmul(y, m), f(c))
    y = b.fmul(b.fmul(y, m), z)
    fe = b.sitofp(e, T.F32)
    y = b.fadd(y, b.fmul(fe, f(-2.12194440e-4)))
    y = b.fadd(y, b.fmul(z, f(-0.5)))
    out = b.fadd(b.fadd(m, y), b.fmul(fe, f(0.693359375)))
    out = b.select(b.fcmp_ordered("==", x, f(float("inf"))), x, out)
    out = b.select(b.fcmp_ordered("==", x, f(0.0)), f(float("-inf")), out)
    return b.select(b.fcmp_unordered("<", x, f(0.0)), f(float("nan")), out)


# log1p(x) = x - x^2/2 + x^3 P(x)/Q(x) for |x| < sqrt(2) - 1 (Cephes' log1p rational
# approximation, as XLA's elemental emitter), log(1 + x) beyond
_LOG1P_P = (2.0039553499201281259648e1, 5.7112963590585538103336e1,
            6.0949667980987787057556e1, 2.9911919328553073277375e1,
            6.5787325942061044846969e0, 4.9854102823193375972212e-1,
            4.5270000862445199635215e-5)
_LOG1P_Q = (6.0118660497603843919306e1, 2.1642788614495947685003e2,
            3.0909872225312059774938e2, 2.2176239823732856465394e2,
            8.3047565967967209469434e1, 1.5062909083469192043167e1, 1.0)


def log1p_f32(cx, x):
    """log1pf as straight-line code (XLA's EmitLog1p with :func:`log_f32`)."""
    b = cx.b
    f = lambda v: ir.Constant(T.F32, v)  # noqa: E731

    def poly(coeffs):   # lowest power first
        acc = f(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = b.fadd(b.fmul(acc, x), f(c))
        return acc
    x2 = b.fmul(x, x)
    r = b.fdiv(poly(_LOG1P_P), poly(_LOG1P_Q))
    near = b.fadd(x, b.fadd(b.fmul(f(-0.5), x2), b.fmul(b.fmul(x, x2), r)))
    far = log_f32(cx, b.fadd(x, f(1.0)))
    small = b.fcmp_ordered("<", cx.intrinsic("llvm.fabs", [x]), f(0.41421356237309504880))
    return b.select(small, near, far)


def tanh_f32(cx, x):
    """tanhf as a clamped rational polynomial (the approximation Eigen and XLA:CPU use),
    straight-line so loops vectorise; tiny inputs return x, NaN stays NaN."""
    b = cx.b
    f = lambda v: ir.Constant(T.F32, v)  # noqa: E731
    lim = 7.90531110763549805
    xc = b.select(b.fcmp_ordered(">", x, f(lim)), f(lim), x)
    xc = b.select(b.fcmp_ordered("<", xc, f(-lim)), f(-lim), xc)
    x2 = b.fmul(xc, xc)
    p = f(-2.76076847742355e-16)
    for c in (2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
              1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03):
        p = b.fadd(b.fmul(p, x2), f(c))
    p = b.fmul(p, xc)
    q = f(1.19825839466702e-06)
    for c in (1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03):
        q = b.fadd(b.fmul(q, x2), f(c))
    out = b.fdiv(p, q)
    tiny = b.fcmp_ordered("<", cx.intrinsic("llvm.fabs", [x]), f(0.0004))
    out = b.select(tiny, x, out)
    return b.select(b.fcmp_unordered("uno", x, x), x, out)


def _float_unary(f32_fn, wider):
    """A float op's handler: f32 as straight-line code (``f32_fn(cx, x)``, so loops
    vectorise), other widths through ``wider(cx, args)`` (libm or an LLVM intrinsic)."""
    def handler(cx, e, a):
        if _k(e) != "f":
            raise NoRow
        if a[0].type == T.F32:
            return f32_fn(cx, a[0])
        return wider(cx, a)
    return handler


_tanh = _float_unary(tanh_f32, lambda cx, a: cx.call_libm("tanh", a, a[0].type))
_exp = _float_unary(exp_f32, lambda cx, a: cx.intrinsic("llvm.exp", a))
_log = _float_unary(log_f32, lambda cx, a: cx.intrinsic("llvm.log", a))
_log1p = _float_unary(log1p_f32, lambda cx, a: cx.call_libm("log1p", a, a[0].type))


def _logistic(cx, e, a):
    if _k(e) != "f":
        raise NoRow
    b, x = cx.b, a[0]
    one = ir.Constant(x.type, 1.0)
    ex = exp_f32(cx, b.fneg(x)) if x.type == T.F32 else cx.intrinsic("llvm.exp", [b.fneg(x)])
    return b.fdiv(one, b.fadd(one, ex))


def _is_finite(cx, e, a):
    if _k(e) != "f":
        raise NoRow
    x = a[0]
    return cx.b.fcmp_ordered("<", cx.intrinsic("llvm.fabs", [x]),
                             ir.Constant(x.type, float("inf")))


def _power(cx, e, a):
    if _k(e) != "f":
        raise NoRow
    return cx.intrinsic("llvm.pow", a)


def _atan2(cx, e, a):
    if _k(e) != "f":
        raise NoRow
    return cx.call_libm("atan2", a, a[0].type)


def _popcnt(cx, e, a):
    if _k(e) in ("f", "p"):
        raise NoRow
    return cx.intrinsic("llvm.ctpop", a)


def _clz(cx, e, a):
    if _k(e) in ("f", "p"):
        raise NoRow
    return cx.intrinsic("llvm.ctlz", [a[0], ir.Constant(T.I1, 0)], overload=[a[0].type])


def _convert(cx, e, a):
    return convert_value(cx, e.args[0].dtype, e.dtype, a[0])


def convert_value(cx, src, dst, x):
    """``x`` (a register of ``src``) converted to ``dst``, both real types."""
    b = cx.b
    ks, kd = T.kind(src), T.kind(dst)
    to = T.reg(dst)
    if src == dst or (ks == "f" and kd == "f" and x.type == to and src not in ("f64",)
                      and dst not in ("bf16", "f16")):
        return x
    if kd == "p":
        if ks == "f":
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        if ks == "p":
            return x
        return b.icmp_unsigned("!=", x, _c(0, x.type))
    if ks == "p":
        if kd == "f":
            return b.uitofp(x, to)
        return b.zext(x, to)
    if ks == "f" and kd == "f":
        if x.type == T.F64 and to == T.F32:
            v = b.fptrunc(x, T.F32)
            if dst in ("bf16", "f16"):
                raise NoRow  # double rounding; the host does it exactly
            return v
        if x.type == T.F32 and to == T.F64:
            return b.fpext(x, T.F64)
        return T.round_narrow(b, x, dst)
    if ks == "f":
        name = "llvm.fptosi.sat" if kd == "s" else "llvm.fptoui.sat"
        return cx.intrinsic(name, [x], overload=[to, x.type])
    if kd == "f":
        v = b.sitofp(x, to) if ks == "s" else b.uitofp(x, to)
        if dst in ("bf16", "f16"):
            if T.bits(src) > 24:
                raise NoRow  # double rounding through f32
            v = T.round_narrow(b, v, dst)
        return v
    # int -> int
    ws, wd = x.type.width, to.width
    if wd == ws:
        return x
    if wd < ws:
        return b.trunc(x, to)
    return b.sext(x, to) if ks == "s" else b.zext(x, to)


def _bitcast_convert(cx, e, a):
    src, dst = e.args[0].dtype, e.dtype
    if T.bits(src) != T.bits(dst) or "pred" in (src, dst):
        raise NoRow
    if src in T.SUB_BYTE or dst in T.SUB_BYTE:
        return a[0]   # s4 <-> u4, s2 <-> u2: the same register bits
    b = cx.b
    bits = T.to_storage(b, a[0], src)
    if src in ("bf16", "f16") or dst in ("bf16", "f16"):
        v = bits if bits.type == T.I16 else b.bitcast(bits, T.I16)
        return T.from_storage(b, v, dst) if dst in ("bf16", "f16") else \
            b.bitcast(v, T.storage(dst))
    return b.bitcast(bits, T.reg(dst))


def _real_of_real(cx, e, a):
    return a[0]


def _imag_of_real(cx, e, a):
    if _k(e) != "f":
        raise NoRow
    return ir.Constant(a[0].type, 0.0)


def _index_div(cx, e, a):
    return cx.b.sdiv(a[0], a[1])


def _index_rem(cx, e, a):
    return cx.b.srem(a[0], a[1])


OPS = {
    "add": _arith("fadd", "add", "or_"), "subtract": _arith("fsub", "sub"),
    "multiply": _arith("fmul", "mul", "and_"), "divide": _divide,
    "remainder": _remainder, "maximum": _minmax("maximum"),
    "minimum": _minmax("minimum"), "and": _logic("and_"), "or": _logic("or_"),
    "xor": _logic("xor"), "not": _not, "shift-left": _shift("shl"),
    "shift-right-logical": _shift("lshr"), "shift-right-arithmetic": _shift("ashr"),
    "compare": _compare, "select": _select, "clamp": _clamp, "negate": _negate,
    "abs": _abs, "sign": _sign, "floor": _fintr("llvm.floor"),
    "ceil": _fintr("llvm.ceil"), "round-nearest-even": _fintr("llvm.roundeven"),
    "round-nearest-afz": _fintr("llvm.round"), "sqrt": _fintr("llvm.sqrt"),
    "rsqrt": _rsqrt, "cbrt": _flib("cbrt"), "exponential": _exp,
    "exponential-minus-one": _flib("expm1"), "log": _log,
    "log-plus-one": _log1p, "logistic": _logistic, "sine": _fintr("llvm.sin"),
    "cosine": _fintr("llvm.cos"), "tan": _flib("tan"), "tanh": _tanh,
    "atan": _flib("atan"), "asin": _flib("asin"), "acos": _flib("acos"),
    "sinh": _flib("sinh"), "cosh": _flib("cosh"), "asinh": _flib("asinh"),
    "acosh": _flib("acosh"), "atanh": _flib("atanh"), "erf": _flib("erf"),
    "is-finite": _is_finite, "power": _power, "atan2": _atan2, "popcnt": _popcnt,
    "count-leading-zeros": _clz, "convert": _convert,
    "bitcast-convert": _bitcast_convert, "floordiv": _index_div, "rem": _index_rem,
    "real": _real_of_real, "imag": _imag_of_real,
}
# Ops whose result must be re-rounded when the result type is f16/bf16 (computed in f32).
NO_ROUND = frozenset({"compare", "is-finite", "select", "convert", "bitcast-convert",
                      "floordiv", "rem", "abs", "negate", "maximum", "minimum", "clamp",
                      "sign", "floor", "ceil", "round-nearest-even", "round-nearest-afz",
                      "real", "imag"})
# libm functions the renderer may call (bound by name when the object is loaded).
LIBM = ("fmod", "sin", "cos", "exp", "cbrt", "expm1", "log1p", "tan", "tanh",
        "atan", "asin", "acos", "sinh",
        "cosh", "asinh", "acosh", "atanh", "erf", "atan2")
