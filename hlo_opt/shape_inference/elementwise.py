"""Elementwise rules: unary, binary, compare, select/clamp, the converts and map
(ShapeInference::InferUnaryOpShape / InferBinaryOpShape / InferTernaryOpShape ...).

HLO has no implicit broadcasting: every array operand of an elementwise op has the
result's dimensions (hlo_verifier's CheckElementwiseInstruction).
"""
from __future__ import annotations

from ..ir.shape import Shape
from ..ir.types import BIT_WIDTH, is_complex, is_float, is_integral, is_unsigned_int
from .common import (CannotInfer, compatible_ignoring_fp, complex_component, expect_array,
                     fail, higher_precision, is_signed, need_operands, program_shape,
                     called, same_dims, same_type_ignoring_fp, text, attr, int_attr)

_FLOAT_ONLY = frozenset("floor ceil round-nearest-afz round-nearest-even".split())
_FLOAT_OR_COMPLEX = frozenset("""cosine sine tan exponential exponential-minus-one log
log-plus-one logistic rsqrt sqrt cbrt tanh acos acosh asin asinh atan atanh cosh sinh
erf""".split())
_INTEGRAL = frozenset(["count-leading-zeros", "popcnt"])


def _bad_type(op: str, want: str, shape: Shape):
    fail(f"{op} expects {want} operands, got {shape.element_type}")


def unary(inst) -> Shape:
    op = inst.opcode
    need_operands(inst, 1)
    s = inst.operands[0].shape
    if op in ("copy", "domain"):
        return s
    expect_array(s, f"operand of {op}")
    t = s.element_type
    if op in _FLOAT_ONLY:
        if not is_float(t):
            _bad_type(op, "floating-point", s)
        return s
    if op in _FLOAT_OR_COMPLEX:
        if not (is_float(t) or is_complex(t)):
            _bad_type(op, "floating-point or complex", s)
        return s
    if op in ("real", "imag"):
        if is_complex(t):
            return s.with_element_type(complex_component(t))
        if not is_float(t):
            _bad_type(op, "floating-point or complex", s)
        return s
    if op == "abs":
        if is_complex(t):
            return s.with_element_type(complex_component(t))
        if not is_signed(t):
            _bad_type(op, "signed, floating-point or complex", s)
        return s
    if op in _INTEGRAL:
        if not is_integral(t):
            _bad_type(op, "integral", s)
        return s
    if op == "negate":
        if not (is_integral(t) or is_float(t) or is_complex(t)):
            _bad_type(op, "integral, floating-point or complex", s)
        return s
    if op == "sign":
        if not (is_signed(t) or is_complex(t)):
            _bad_type(op, "signed or complex", s)
        return s
    if op == "not":
        if not (t == "pred" or is_integral(t)):
            _bad_type(op, "pred or integral", s)
        return s
    if op == "is-finite":
        if not is_float(t):
            _bad_type(op, "floating-point", s)
        return s.with_element_type("pred")
    fail(f"no unary rule for {op}")


_NO_PRED = frozenset("""subtract atan2 power divide remainder shift-left
shift-right-arithmetic shift-right-logical""".split())
_LOGICAL = frozenset(["and", "or", "xor"])
_COMPARE_DIRECTIONS = frozenset(["EQ", "NE", "GE", "GT", "LE", "LT"])


def _same_shape_operands(inst, lhs: Shape, rhs: Shape) -> Shape:
    if (lhs.element_type == rhs.element_type and lhs.dims == rhs.dims
            and lhs.dynamic == rhs.dynamic and lhs.is_array()):
        return lhs  # the common case, without building a new Shape
    op = inst.opcode
    expect_array(lhs, f"lhs of {op}")
    expect_array(rhs, f"rhs of {op}")
    if not same_type_ignoring_fp(lhs, rhs):
        fail(f"{op} operands have different element types: {text(lhs)} and {text(rhs)}")
    if not same_dims(lhs, rhs):
        fail(f"{op} operands have different dimensions (HLO has no implicit "
             f"broadcast): {text(lhs)} and {text(rhs)}")
    dynamic = tuple(a or b for a, b in zip(lhs.dynamic, rhs.dynamic))
    return Shape(higher_precision(lhs.element_type, rhs.element_type), lhs.dims, dynamic)


def binary(inst) -> Shape:
    op = inst.opcode
    need_operands(inst, 2)
    lhs, rhs = inst.operands[0].shape, inst.operands[1].shape
    if op in _NO_PRED and (lhs.element_type == "pred" or rhs.element_type == "pred"):
        fail(f"{op} expects arithmetic operands, got pred")
    if op in _LOGICAL and lhs.is_array() and not (
            lhs.element_type == "pred" or is_integral(lhs.element_type)):
        _bad_type(op, "pred or integral", lhs)
    if op in ("shift-left", "shift-right-arithmetic", "shift-right-logical",
              "mulhi") and lhs.is_array() and not is_integral(lhs.element_type):
        _bad_type(op, "integral", lhs)
    out = _same_shape_operands(inst, lhs, rhs)
    if op == "complex":
        if lhs.element_type not in ("f32", "f64") or rhs.element_type != lhs.element_type:
            fail(f"complex expects two f32 or two f64 operands, got {lhs.element_type} "
                 f"and {rhs.element_type}")
        return out.with_element_type("c64" if lhs.element_type == "f32" else "c128")
    if op == "compare":
        _check_comparison(inst, lhs)
        return out.with_element_type("pred")
    return out


def _check_comparison(inst, operand: Shape) -> None:
    direction = attr(inst, "direction")
    if direction is None:
        fail("compare needs direction=")
    if direction not in _COMPARE_DIRECTIONS:
        fail(f"compare has an unknown direction '{direction}'")
    ctype = attr(inst, "type")
    if ctype is None:
        return
    t = operand.element_type
    if is_float(t):
        ok = ctype in ("FLOAT", "TOTALORDER")
        want = "FLOAT or TOTALORDER"
    else:
        want = "FLOAT" if is_complex(t) else "SIGNED" if t[0] == "s" else "UNSIGNED"
        ok = ctype == want
    if not ok:
        fail(f"compare of {t} operands needs type={want}, has type={ctype}")


def select(inst) -> Shape:
    need_operands(inst, 3)
    pred, on_true, on_false = (o.shape for o in inst.operands)
    expect_array(pred, "predicate of select")
    expect_array(on_true, "on-true operand of select")
    expect_array(on_false, "on-false operand of select")
    if not compatible_ignoring_fp(on_true, on_false):
        fail(f"select branches differ: {text(on_true)} and {text(on_false)}")
    if pred.element_type != "pred":
        fail(f"select's predicate must be pred, got {text(pred)}")
    if not same_dims(pred, on_true):
        fail(f"select's predicate {text(pred)} and branches {text(on_true)} have different "
             "dimensions")
    return Shape(higher_precision(on_true.element_type, on_false.element_type), pred.dims,
                 tuple(a or b or c for a, b, c in
                       zip(pred.dynamic, on_true.dynamic, on_false.dynamic)))


def clamp(inst) -> Shape:
    need_operands(inst, 3)
    lo, x, hi = (o.shape for o in inst.operands)
    for s, what in ((lo, "min"), (x, "operand"), (hi, "max")):
        expect_array(s, f"{what} of clamp")
    for s in (lo, hi):
        if not (compatible_ignoring_fp(s, x) or (s.is_scalar() and
                                                 same_type_ignoring_fp(s, x))):
            fail(f"clamp bounds must be scalars or match the operand: "
                 f"{text(lo)}, {text(x)}, {text(hi)}")
    return x


def convert(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of convert")
    return s.with_element_type(_declared_type(inst))


def _declared_type(inst) -> str:
    if inst.shape is None:
        raise CannotInfer(f"{inst.opcode} must declare its result element type")
    if not inst.shape.is_array():
        fail(f"{inst.opcode} must produce an array, declares {text(inst.shape)}")
    return inst.shape.element_type


def bitcast_convert(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of bitcast-convert")
    new = _declared_type(inst)
    old = s.element_type
    if is_complex(old) != is_complex(new):
        fail(f"bitcast-convert between complex and real types: {old} => {new}")
    wi, wo = BIT_WIDTH[old], BIT_WIDTH[new]
    if max(wi, wo) % min(wi, wo):
        fail(f"bitcast-convert between types of indivisible bit widths: {old} => {new}")
    ratio = max(wi, wo) // min(wi, wo)
    if wi > wo:
        return Shape(new, s.dims + (ratio,), s.dynamic + (False,))
    if wi < wo:
        if not s.dims or s.dims[-1] != ratio:
            fail(f"bitcast-convert {old} => {new} needs a last dimension of {ratio}, "
                 f"operand is {text(s)}")
        return Shape(new, s.dims[:-1], s.dynamic[:-1])
    return s.with_element_type(new)


def stochastic_convert(inst) -> Shape:
    need_operands(inst, 2)
    s, r = inst.operands[0].shape, inst.operands[1].shape
    expect_array(s, "operand of stochastic-convert")
    expect_array(r, "random operand of stochastic-convert")
    if not is_unsigned_int(r.element_type):
        fail(f"stochastic-convert's random numbers must be unsigned, got {text(r)}")
    if not is_float(s.element_type):
        fail(f"stochastic-convert converts floating-point operands, got {text(s)}")
    if BIT_WIDTH[s.element_type] != BIT_WIDTH[r.element_type]:
        fail("stochastic-convert's random numbers must have the operand's bit width")
    if s.dims != r.dims:
        fail(f"stochastic-convert operand {text(s)} and random {text(r)} differ in shape")
    return s.with_element_type(_declared_type(inst))


def reduce_precision(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of reduce-precision")
    if not is_float(s.element_type):
        _bad_type("reduce-precision", "floating-point", s)
    if int_attr(inst, "exponent_bits") < 1:
        fail("reduce-precision needs exponent_bits >= 1")
    if int_attr(inst, "mantissa_bits") < 0:
        fail("reduce-precision needs mantissa_bits >= 0")
    return s


def map_(inst) -> Shape:
    """InferMapShape: operands of one shape, a scalar computation of matching arity."""
    shapes = [o.shape for o in inst.operands]
    if not shapes:
        fail("map needs at least one operand")
    first = shapes[0]
    for s in shapes:
        expect_array(s, "operand of map")
        if not same_dims(s, first):
            fail("map operands must have the same dimensions; got "
                 + ", ".join(text(x) for x in shapes))
    # XLA's verifier maps over all dimensions whatever ``dimensions=`` says.
    (comp,) = called(inst, 1)
    params, result = program_shape(comp)
    if len(params) != len(shapes):
        fail(f"map computation %{comp.name} takes {len(params)} parameter(s) but map has "
             f"{len(shapes)} operand(s)")
    if not result.is_scalar():
        fail(f"map computation %{comp.name} must return a scalar, returns {text(result)}")
    for i, (p, s) in enumerate(zip(params, shapes)):
        if not p.is_scalar() or p.element_type != s.element_type:
            fail(f"map computation %{comp.name} parameter {i} is {text(p)}, expected "
                 f"{s.element_type}[]")
    return Shape(result.element_type, first.dims)
