"""What every shape rule shares: the two exceptions, shape comparisons, type classes,
attribute access and XLA's window arithmetic.

The comparisons follow ``xla/shape_util.h``: *compatible* means equal ignoring layouts and
dynamic-dimension bits (``ShapeUtil::Compatible``); an unbounded dimension (``?``, stored
as -1) matches any size.
"""
from __future__ import annotations

from ..errors import HloVerifyError
from ..ir.shape import Shape
from ..ir.types import BIT_WIDTH, is_complex, is_float, is_signed_int


class CannotInfer(Exception):
    """The result shape is not determined by the operands and attributes alone (the
    instruction declares it, e.g. ``custom-call``), or no rule exists."""


class ShapeError(CannotInfer):
    """The operands or attributes are invalid for the opcode: a verification error."""


def fail(message: str):
    raise ShapeError(message)


PRED_SCALAR = Shape.array("pred", ())
S32_SCALAR = Shape.array("s32", ())
U32_SCALAR = Shape.array("u32", ())
TOKEN = Shape.token()


# ---- comparisons --------------------------------------------------------------------
def _dims_match(a: tuple, b: tuple) -> bool:
    if a == b:
        return True
    if len(a) != len(b):
        return False
    return all(x == y or x < 0 or y < 0 for x, y in zip(a, b))


def compatible(a: Shape, b: Shape) -> bool:
    """ShapeUtil::Compatible: same element types and dimensions, any layout/dynamism."""
    if a is b:
        return True
    if a.element_type != b.element_type:
        return False
    if a.element_type == "tuple":
        return len(a.tuple_shapes) == len(b.tuple_shapes) and all(
            compatible(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    return _dims_match(a.dims, b.dims)


def compatible_ignoring_fp(a: Shape, b: Shape) -> bool:
    """ShapeUtil::CompatibleIgnoringFpPrecision."""
    if a.is_tuple() or b.is_tuple():
        return a.is_tuple() and b.is_tuple() and len(a.tuple_shapes) == len(
            b.tuple_shapes) and all(compatible_ignoring_fp(x, y)
                                    for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    return same_type_ignoring_fp(a, b) and _dims_match(a.dims, b.dims)


def compatible_ignoring_type(a: Shape, b: Shape) -> bool:
    """ShapeUtil::CompatibleIgnoringElementType (arrays only)."""
    if a.is_tuple() or b.is_tuple():
        return a.is_tuple() and b.is_tuple() and len(a.tuple_shapes) == len(
            b.tuple_shapes) and all(compatible_ignoring_type(x, y)
                                    for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    return a.is_array() == b.is_array() and _dims_match(a.dims, b.dims)


def same_dims(a: Shape, b: Shape) -> bool:
    return _dims_match(a.dims, b.dims)


def same_type_ignoring_fp(a: Shape, b: Shape) -> bool:
    ea, eb = a.element_type, b.element_type
    return ea == eb or (is_float(ea) and is_float(eb))


# ---- element types ------------------------------------------------------------------
_EXPONENT_BITS = {"f16": 5, "bf16": 8, "f32": 8, "f64": 11, "f8e5m2": 5, "f8e4m3": 4,
                  "f8e4m3fn": 4, "f8e4m3b11fnuz": 4, "f8e5m2fnuz": 5, "f8e4m3fnuz": 4,
                  "f8e3m4": 3, "f8e8m0fnu": 8, "f4e2m1fn": 2, "f6e2m3fn": 2, "f6e3m2fn": 3}


def _precision_key(t: str):
    comp = complex_component(t) if is_complex(t) else t
    fl = is_float(comp)
    return (is_complex(t), _EXPONENT_BITS.get(comp, -1) if fl else -1,
            (BIT_WIDTH[comp] - _EXPONENT_BITS.get(comp, 0)) if fl else -1,
            BIT_WIDTH.get(comp, 0), is_signed_int(comp))


def higher_precision(a: str, b: str) -> str:
    """primitive_util::HigherPrecisionType: complex > range > precision > width."""
    if a == b:
        return a
    return a if _precision_key(a) >= _precision_key(b) else b


def complex_component(t: str) -> str:
    return {"c64": "f32", "c128": "f64"}[t]


def is_signed(t: str) -> bool:
    """ShapeUtil::ElementIsSigned: signed integers and floating point."""
    return is_signed_int(t) or is_float(t)


def expect_array(shape: Shape, what: str) -> Shape:
    if shape is None or not shape.is_array():
        fail(f"expected an array for the {what}, got "
             f"{shape.to_text(False) if shape is not None else 'nothing'}")
    return shape


def text(shape: Shape) -> str:
    return shape.to_text(layout=False)


def operand_shapes(inst) -> list[Shape]:
    return [o.shape for o in inst.operands]


def need_operands(inst, count: int) -> None:
    if len(inst.operands) != count:
        fail(f"{inst.opcode} takes {count} operand(s), has {len(inst.operands)}")


def declared(inst, what: str) -> Shape:
    """The instruction's own shape, for rules whose result is not implied by operands."""
    if inst.shape is None:
        raise CannotInfer(f"{inst.opcode} must declare its {what}")
    return inst.shape


def attr(inst, name: str, default=None, required: bool = False):
    """A typed attribute; bad attribute text becomes a ShapeError."""
    try:
        value = inst.attr(name, default)
    except HloVerifyError as e:
        fail(str(e))
    if required and value is None:
        fail(f"{inst.opcode} needs the attribute {name}=")
    return value


def int_attr(inst, name: str, default=None) -> int:
    value = attr(inst, name, default, required=default is None)
    return int(value)


def resolved_called(inst) -> list:
    """``inst.called``; CannotInfer while the parser has not resolved the names yet."""
    if not inst.called and inst.called_attr is not None:
        raise CannotInfer(f"the computations {inst.opcode} calls are not resolved yet")
    return inst.called


def called(inst, count: int | None = None, what: str = "computation"):
    comps = resolved_called(inst)
    if count is not None and len(comps) != count:
        fail(f"{inst.opcode} must call {count} {what}(s), calls {len(comps)}")
    return comps


def program_shape(comp) -> tuple[list[Shape], Shape]:
    """(parameter shapes, result shape) of a computation, as ComputeProgramShape."""
    if comp.root is None:
        fail(f"called computation %{comp.name} has no root")
    params = comp.parameters
    if any(p is None for p in params):
        fail(f"called computation %{comp.name} has a gap in its parameter numbers")
    return [p.shape for p in params], comp.root.shape


def check_dims_in_range(dims, rank: int, what: str) -> None:
    seen = set()
    for d in dims:
        if d < 0 or d >= rank:
            fail(f"{what} dimension {d} is out of range for rank {rank}")
        if d in seen:
            fail(f"{what} dimension {d} is repeated")
        seen.add(d)


# ---- windows (xla/window_util.cc) ----------------------------------------------------
def dilated_bound(bound: int, dilation: int) -> int:
    return 0 if bound == 0 else (bound - 1) * dilation + 1


def strided_bound(bound: int, window: int, stride: int) -> int:
    if window > bound:
        return 0
    return (bound - window) // stride + 1


def window_output_dims(base_dims, window, what: str) -> list[int]:
    """InferWindowOutputShape: one output size per windowed dimension."""
    wdims = window.dims if window is not None else []
    if len(wdims) != len(base_dims):
        fail(f"{what}: window has {len(wdims)} dimensions but the base shape has rank "
             f"{len(base_dims)}")
    out = []
    for base, d in zip(base_dims, wdims):
        if d.size <= 0:
            fail(f"{what}: window has a non-positive size {d.size}")
        if d.stride <= 0:
            fail(f"{what}: window has a non-positive stride {d.stride}")
        if d.base_dilation < 1 or d.window_dilation < 1:
            fail(f"{what}: window has a non-positive dilation factor")
        padded = d.padding_low + dilated_bound(base, d.base_dilation) + d.padding_high
        out.append(strided_bound(padded, dilated_bound(d.size, d.window_dilation),
                                 d.stride))
    return out
