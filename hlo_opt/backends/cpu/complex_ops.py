"""The IR of complex (c64/c128) values, one row per opcode, numpy's formulas (the
interpreter's) so results agree bitwise where numpy's own loops are plain C:

- add/subtract/negate: per part; multiply: ``(ac - bd) + (ad + bc)i`` with the fmas of
  numpy's vector loop;
- divide: Smith's algorithm as numpy's ``loops.c.src`` (a zero divisor divides by +0);
- abs: numpy's vector ``cabs`` (scaled, fma); exponential: glibc's ``cexp`` (``exp`` of
  the real part, scaled past overflow as glibc does, times libm ``cos``/``sin`` of the
  imaginary part, ``sin = x, cos = 1`` below the smallest normal; infinities and NaNs
  as glibc);
- real/imag/complex; compare EQ/NE; convert complex<->complex and real->complex.

``ROWS[op](cx, e, args)`` returns the register value, or raises ``NoRow`` (the step
then runs as a host library call): every other op on complex values does.
"""
from __future__ import annotations

from llvmlite import ir

from . import irtypes as T
from .ops import NoRow


def _parts(b, v):
    return b.extract_value(v, 0), b.extract_value(v, 1)


def _make(b, re, im, ty):
    v = b.insert_value(ir.Constant(ty, ir.Undefined), re, 0)
    return b.insert_value(v, im, 1)


def _is_c(dtype) -> bool:
    return dtype in T.COMPLEX


def _binary(fn):
    def row(cx, e, a):
        b = cx.b
        (xr, xi), (yr, yi) = _parts(b, a[0]), _parts(b, a[1])
        re, im = fn(b, xr, xi, yr, yi)
        return _make(b, re, im, a[0].type)
    return row


def _add(b, xr, xi, yr, yi):
    return b.fadd(xr, yr), b.fadd(xi, yi)


def _sub(b, xr, xi, yr, yi):
    return b.fsub(xr, yr), b.fsub(xi, yi)


def _mul(cx, e, a):
    """numpy's vector loop: ``re = fma(xr, yr, -(xi*yi))``, ``im = fma(xr, yi, xi*yr)``."""
    b = cx.b
    (xr, xi), (yr, yi) = _parts(b, a[0]), _parts(b, a[1])
    re = cx.intrinsic("llvm.fma", [xr, yr, b.fneg(b.fmul(xi, yi))])
    im = cx.intrinsic("llvm.fma", [xr, yi, b.fmul(xi, yr)])
    return _make(b, re, im, a[0].type)


def _div(cx, e, a):
    b = cx.b
    ty = a[0].type
    (xr, xi), (yr, yi) = _parts(b, a[0]), _parts(b, a[1])
    ft = xr.type
    one, zero = ir.Constant(ft, 1.0), ir.Constant(ft, 0.0)
    fabs = lambda v: cx.intrinsic("llvm.fabs", [v])  # noqa: E731
    ar, ai = fabs(yr), fabs(yi)
    # |yr| >= |yi|
    rat1 = b.fdiv(yi, yr)
    scl1 = b.fdiv(one, b.fadd(yr, b.fmul(yi, rat1)))
    r1 = b.fmul(b.fadd(xr, b.fmul(xi, rat1)), scl1)
    i1 = b.fmul(b.fsub(xi, b.fmul(xr, rat1)), scl1)
    # both zero: divide by +0
    rz, iz = b.fdiv(xr, ar), b.fdiv(xi, ar)
    both_zero = b.and_(b.fcmp_ordered("==", ar, zero), b.fcmp_ordered("==", ai, zero))
    r1, i1 = b.select(both_zero, rz, r1), b.select(both_zero, iz, i1)
    # |yr| < |yi|
    rat2 = b.fdiv(yr, yi)
    scl2 = b.fdiv(one, b.fadd(yi, b.fmul(yr, rat2)))
    r2 = b.fmul(b.fadd(b.fmul(xr, rat2), xi), scl2)
    i2 = b.fmul(b.fsub(b.fmul(xi, rat2), xr), scl2)
    # numpy's C compares ``in2r_abs >= in2i_abs``: false when either is NaN
    first = b.fcmp_ordered(">=", ar, ai)
    return _make(b, b.select(first, r1, r2), b.select(first, i1, i2), ty)


def _negate(cx, e, a):
    b = cx.b
    re, im = _parts(b, a[0])
    return _make(b, b.fneg(re), b.fneg(im), a[0].type)


def _abs(cx, e, a):
    """numpy's vector ``cabs``: an infinite part gives inf, else a NaN part NaN, else
    ``larger * sqrt(fma(r, r, 1))`` with ``r = smaller / larger`` (0 when larger is 0
    or smaller is inf)."""
    b = cx.b
    re, im = _parts(b, a[0])
    ft = re.type
    f = lambda v: ir.Constant(ft, v)  # noqa: E731
    inf, nan = f(float("inf")), f(float("nan"))
    re, im = cx.intrinsic("llvm.fabs", [re]), cx.intrinsic("llvm.fabs", [im])
    re_inf, im_inf = b.fcmp_ordered("==", re, inf), b.fcmp_ordered("==", im, inf)
    im = b.select(re_inf, inf, im)
    re = b.select(im_inf, inf, re)
    re_ok, im_ok = b.fcmp_ordered("==", re, re), b.fcmp_ordered("==", im, im)
    im = b.select(re_ok, im, nan)
    re = b.select(im_ok, re, nan)
    larger = cx.intrinsic("llvm.maxnum", [re, im])
    smaller = cx.intrinsic("llvm.minnum", [im, re])
    ok = b.not_(b.or_(b.fcmp_ordered("==", larger, f(0.0)),
                      b.fcmp_ordered("==", smaller, inf)))
    ratio = b.select(ok, b.fdiv(smaller, larger), f(0.0))
    return b.fmul(cx.intrinsic("llvm.sqrt", [cx.intrinsic("llvm.fma",
                                                          [ratio, ratio, f(1.0)])]), larger)


def _exp(cx, e, a):
    """glibc's ``cexp`` (numpy calls it): the finite case, then C99 Annex G's
    infinities and NaNs as glibc returns them."""
    b = cx.b
    re, im = _parts(b, a[0])
    ft = re.type
    f32 = ft == T.F32
    f = lambda v: ir.Constant(ft, v)  # noqa: E731
    inf, nan, zero = f(float("inf")), f(float("nan")), f(0.0)
    fabs = lambda v: cx.intrinsic("llvm.fabs", [v])  # noqa: E731
    copysign = lambda m, sg: cx.intrinsic("llvm.copysign", [m, sg])  # noqa: E731
    tiny = f(1.1754943508222875e-38 if f32 else 2.2250738585072014e-308)
    small = b.fcmp_ordered("<=", fabs(im), tiny)
    s0 = b.select(small, im, cx.call_libm("sin", [im], ft))
    c0 = b.select(small, f(1.0), cx.call_libm("cos", [im], ft))
    # finite: t = (int) ((MAX_EXP - 1) * ln 2); past t, scale by exp(t) up to twice
    t = f(88.0 if f32 else 709.0)
    exp_t = cx.call_libm("exp", [t], ft)
    x, s, c = re, s0, c0
    for _ in range(2):
        big = b.fcmp_ordered(">", x, t)
        x = b.select(big, b.fsub(x, t), x)
        s = b.select(big, b.fmul(s, exp_t), s)
        c = b.select(big, b.fmul(c, exp_t), c)
    over = b.fcmp_ordered(">", x, t)
    big_val = f(3.4028234663852886e38 if f32 else 1.7976931348623157e308)
    ev = b.select(over, big_val, cx.call_libm("exp", [x], ft))
    out_r, out_i = b.fmul(ev, c), b.fmul(ev, s)
    re_fin = b.fcmp_ordered("<", fabs(re), inf)
    im_fin = b.fcmp_ordered("<", fabs(im), inf)
    re_nan = b.fcmp_unordered("uno", re, re)
    im_zero = b.fcmp_ordered("==", im, zero)
    re_pos = b.fcmp_ordered(">", re, zero)
    # real part infinite, imaginary finite
    value = b.select(re_pos, inf, zero)
    inf_r = b.select(im_zero, value, copysign(value, c0))
    inf_i = b.select(im_zero, im, copysign(value, s0))
    # real part infinite, imaginary inf/NaN
    inf_r = b.select(im_fin, inf_r, b.select(re_pos, inf, zero))
    inf_i = b.select(im_fin, inf_i, b.select(re_pos, b.fsub(im, im), copysign(zero, im)))
    # real part finite, imaginary inf/NaN: NaN + iNaN
    fin_r = b.select(im_fin, out_r, nan)
    fin_i = b.select(im_fin, out_i, nan)
    # real part NaN: NaN + i(NaN, or the imaginary part when it is 0)
    nan_i = b.select(im_zero, im, nan)
    r = b.select(re_fin, fin_r, b.select(re_nan, nan, inf_r))
    i = b.select(re_fin, fin_i, b.select(re_nan, nan_i, inf_i))
    return _make(b, r, i, a[0].type)


def _real(cx, e, a):
    if not _is_c(e.args[0].dtype):
        return a[0]
    return cx.b.extract_value(a[0], 0)


def _imag(cx, e, a):
    if not _is_c(e.args[0].dtype):
        return ir.Constant(a[0].type, 0.0)
    return cx.b.extract_value(a[0], 1)


def _complex(cx, e, a):
    return _make(cx.b, a[0], a[1], T.reg(e.dtype))


def _compare(cx, e, a):
    b = cx.b
    direction, _ = e.attr
    (xr, xi), (yr, yi) = _parts(b, a[0]), _parts(b, a[1])
    if direction == "EQ":
        return b.and_(b.fcmp_ordered("==", xr, yr), b.fcmp_ordered("==", xi, yi))
    if direction == "NE":
        return b.or_(b.fcmp_unordered("!=", xr, yr), b.fcmp_unordered("!=", xi, yi))
    raise NoRow(f"compare {direction} on complex values")


def _convert(cx, e, a, real_convert):
    b = cx.b
    src, dst = e.args[0].dtype, e.dtype
    if not _is_c(dst):
        raise NoRow(f"convert {src} -> {dst}")
    part = T.PART[dst]
    ft = T.reg(part)
    if _is_c(src):
        if src == dst:
            return a[0]
        re, im = _parts(b, a[0])
        conv = b.fpext if ft == T.F64 else b.fptrunc
        return _make(b, conv(re, ft), conv(im, ft), T.reg(dst))
    re = real_convert(cx, src, part, a[0])
    return _make(b, re, ir.Constant(ft, 0.0), T.reg(dst))


ROWS = {
    "add": _binary(_add), "subtract": _binary(_sub), "multiply": _mul,
    "divide": _div, "negate": _negate, "abs": _abs, "exponential": _exp,
    "real": _real, "imag": _imag, "complex": _complex, "compare": _compare,
}
# ops whose operands or result may be complex and which have a row here (select needs
# none: it picks whole values)
HANDLED = frozenset(ROWS) | {"convert", "select"}
