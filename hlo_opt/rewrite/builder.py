"""Builder: create shape-correct instructions in a computation (XLA's MakeXxxHlo helpers).

Every method adds the new instruction to the computation and returns it.  The result
shape comes from ``shape_inference.RULES`` (the one definition of each shape rule, as
XLA's MakeXxxHlo helpers call ShapeInference); a builder only adds the layout rule
(:func:`built_shape`).  Methods whose result is declared rather than inferable (bitcast,
map, clone with a shape) take the shape.  Invalid operands raise the rule's ShapeError:
a pass building something invalid is a bug, not a case to paper over.
Builders remember what they created so a rule that gives up can be cleaned up.
"""
from __future__ import annotations

import numpy as np

from hlo_opt.ir.attributes import PaddingConfig, SliceSpec, int_list_text
from hlo_opt.ir.computation import Computation
from hlo_opt.ir.dimension_numbers import DotDimensionNumbers
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.literal import Literal
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import numpy_dtype
from hlo_opt.rewrite.dead import remove_dead
from hlo_opt.shape_inference import RULES


def slice_text(starts, limits, strides) -> str:
    return SliceSpec(list(zip(starts, limits, strides))).to_text()


def array_shape(et: str, dims) -> Shape:
    return Shape.array(et, tuple(int(d) for d in dims))


def scalar_literal(value, et: str) -> Literal:
    dt = numpy_dtype(et)
    with np.errstate(all="ignore"):
        if et == "pred":
            arr = np.array(bool(value))
        elif np.issubdtype(dt, np.complexfloating):
            arr = np.array(value, dtype=dt)
        elif np.issubdtype(dt, np.integer) or np.issubdtype(dt, np.bool_):
            arr = np.array(int(value)).astype(dt)
        else:
            arr = np.array(float(value) if not isinstance(value, complex) else value.real,
                           dtype=np.float64).astype(dt)
    return Literal(Shape.array(et, ()), arr.reshape(()))


def built_shape(inferred: Shape, keep_layout: bool = False) -> Shape:
    """The layout rule of built instructions: the default layout (none), except where
    the result is an operand's shape passed through (copy, tuple, get-tuple-element)."""
    if keep_layout or (inferred.layout is None and not inferred.is_tuple()):
        return inferred
    return inferred.without_layout()


def _ints(values) -> tuple:
    """An int-list attribute's typed value (what ``parse_int_list`` returns)."""
    return tuple(int(v) for v in values)


class Builder:
    def __init__(self, comp: Computation):
        self.comp = comp
        self.created: list[Instruction] = []
        self.created_set: set = set()

    # ---- bookkeeping --------------------------------------------------------------------
    def _add(self, opcode: str, shape: Shape, operands=(), attrs: dict | None = None,
             called=None, called_attr=None, payload: str = "") -> Instruction:
        inst = self.comp.add(opcode, shape, operands, attrs=attrs, called=called,
                             called_attr=called_attr, payload=payload)
        self.created.append(inst)
        self.created_set.add(inst)
        return inst

    def _infer(self, opcode: str, operands, attrs: dict | None = None,
               declared: Shape | None = None, called=None, called_attr=None,
               keep_layout: bool = False, typed: tuple | None = None) -> Instruction:
        """Add ``opcode`` with the shape ``RULES`` infers (``declared``: the part of the
        result the rule reads from the instruction, e.g. broadcast's dims; ``typed``:
        (name, value) of the one attribute whose typed value is known, so neither the
        rule nor a later reader parses its text again)."""
        inst = Instruction(opcode, declared, operands, attrs, opcode, "", called, called_attr)
        if typed is not None:
            inst.cache_attr(*typed)
        try:
            inferred = RULES[opcode](inst)
        except Exception:
            inst.detach_operands()
            raise
        inst.shape = built_shape(inferred, keep_layout)
        self.comp.add_instruction(inst)
        self.created.append(inst)
        self.created_set.add(inst)
        return inst

    def discard_since(self, mark: int) -> None:
        """Remove instructions created after ``mark`` that ended up unused."""
        created = self.created
        if len(created) <= mark:
            return
        for inst in reversed(created[mark:]):
            if inst.parent is self.comp and inst.user_count == 0 and not inst.is_root:
                remove_dead(self.comp, inst, set())
        del created[mark:]

    # ---- leaves -------------------------------------------------------------------------
    def constant(self, literal: Literal, text: str | None = None) -> Instruction:
        """A constant holding ``literal`` (``text``: its ``to_text()``, when known)."""
        inst = self._add("constant", literal.shape,
                         payload=text if text is not None else literal.to_text())
        inst.cache_literal(literal)
        return inst

    def constant_array(self, array, et: str) -> Instruction:
        arr = np.asarray(array).astype(numpy_dtype(et))
        return self.constant(Literal(Shape.array(et, arr.shape), arr))

    def scalar(self, value, et: str) -> Instruction:
        return self.constant(scalar_literal(value, et))

    def scalar_like(self, like: Instruction | Shape, value) -> Instruction:
        """XLA's MakeScalarLike: a constant of ``like``'s type, broadcast to its shape."""
        shape = like.shape if isinstance(like, Instruction) else like
        c = self.scalar(value, shape.element_type)
        if shape.rank == 0:
            return c
        return self.broadcast(c, shape.dims, ())

    def iota(self, et: str, dims, iota_dim: int) -> Instruction:
        return self._infer("iota", (), attrs={"iota_dimension": str(iota_dim)},
                           declared=array_shape(et, dims))

    # ---- shape ops ----------------------------------------------------------------------
    def broadcast(self, operand: Instruction, dims, bdims) -> Instruction:
        bdims = _ints(bdims)
        return self._infer("broadcast", (operand,), attrs={"dimensions": int_list_text(bdims)},
                           declared=array_shape(operand.shape.element_type, dims),
                           typed=("dimensions", bdims))

    def broadcast_to(self, operand: Instruction, shape: Shape, bdims) -> Instruction:
        return self.broadcast(operand, shape.dims, bdims)

    def reshape(self, operand: Instruction, dims) -> Instruction:
        return self._infer("reshape", (operand,),
                           declared=array_shape(operand.shape.element_type, dims))

    def bitcast(self, operand: Instruction, shape: Shape) -> Instruction:
        return self._add("bitcast", shape, [operand])

    def transpose(self, operand: Instruction, perm) -> Instruction:
        perm = _ints(perm)
        return self._infer("transpose", (operand,), attrs={"dimensions": int_list_text(perm)},
                           typed=("dimensions", perm))

    def maybe_transpose(self, operand: Instruction, perm) -> Instruction:
        if list(perm) == sorted(perm):
            return operand
        return self.transpose(operand, perm)

    def slice(self, operand: Instruction, starts, limits, strides=None) -> Instruction:
        strides = list(strides) if strides is not None else [1] * len(starts)
        spec = SliceSpec([(int(a), int(b), int(c)) for a, b, c in zip(starts, limits, strides)])
        return self._infer("slice", (operand,), attrs={"slice": spec.to_text()},
                           typed=("slice", spec))

    def pad(self, operand: Instruction, value: Instruction, config) -> Instruction:
        config = PaddingConfig([(int(lo), int(hi), int(it)) for lo, hi, it in config])
        return self._infer("pad", (operand, value), attrs={"padding": config.to_text()},
                           typed=("padding", config))

    def concatenate(self, operands, dim: int) -> Instruction:
        return self._infer("concatenate", operands, attrs={"dimensions": "{" + str(dim) + "}"},
                           typed=("dimensions", (int(dim),)))

    def reverse(self, operand: Instruction, dims) -> Instruction:
        dims = _ints(dims)
        return self._infer("reverse", (operand,), attrs={"dimensions": int_list_text(dims)},
                           typed=("dimensions", dims))

    def dynamic_slice(self, operand: Instruction, starts, sizes) -> Instruction:
        sizes = _ints(sizes)
        return self._infer("dynamic-slice", (operand, *starts),
                           attrs={"dynamic_slice_sizes": int_list_text(sizes)},
                           typed=("dynamic_slice_sizes", sizes))

    def dynamic_update_slice(self, operand, update, starts) -> Instruction:
        return self._infer("dynamic-update-slice", (operand, update, *starts))

    def tuple(self, operands) -> Instruction:
        return self._infer("tuple", operands, keep_layout=True)

    def gte(self, operand: Instruction, index: int) -> Instruction:
        return self._infer("get-tuple-element", (operand,), attrs={"index": str(index)},
                           keep_layout=True)

    def copy(self, operand: Instruction) -> Instruction:
        return self._infer("copy", (operand,), keep_layout=True)

    # ---- elementwise --------------------------------------------------------------------
    def unary(self, opcode: str, operand: Instruction, et: str | None = None) -> Instruction:
        """``et``: the declared result type, for the opcodes whose rule reads it
        (bitcast-convert, convert)."""
        shape = operand.shape
        return self._infer(opcode, (operand,),
                           declared=shape.with_element_type(et) if et is not None else shape)

    def convert(self, operand: Instruction, et: str) -> Instruction:
        if operand.shape.element_type == et:
            return operand
        return self._infer("convert", (operand,),
                           declared=operand.shape.with_element_type(et))

    def binary(self, opcode: str, lhs: Instruction, rhs: Instruction) -> Instruction:
        return self._infer(opcode, (lhs, rhs))

    def compare(self, lhs: Instruction, rhs: Instruction, direction: str,
                cmp_type: str | None = None) -> Instruction:
        attrs = {"direction": direction}
        if cmp_type:
            attrs["type"] = cmp_type
        return self._infer("compare", (lhs, rhs), attrs=attrs)

    def select(self, pred: Instruction, on_true: Instruction, on_false: Instruction
               ) -> Instruction:
        return self._infer("select", (pred, on_true, on_false))

    def clamp(self, lo: Instruction, x: Instruction, hi: Instruction) -> Instruction:
        return self._infer("clamp", (lo, x, hi))

    def clone(self, inst: Instruction, operands, shape: Shape | None = None) -> Instruction:
        """A copy of ``inst`` (attributes, called computations) with other operands."""
        new = Instruction(inst.opcode, shape or inst.shape, operands,
                          {k: v for k, v in inst.attrs.items() if k != "control-predecessors"},
                          inst.opcode, inst.payload, inst.called, inst.called_attr)
        new.cache_literal(inst.cached_literal)
        self.comp.add_instruction(new)
        self.created.append(new)
        self.created_set.add(new)
        return new

    # ---- reductions and linear algebra -----------------------------------------------------
    def reduce(self, operand: Instruction, init: Instruction, dims, comp: Computation
               ) -> Instruction:
        return self._infer("reduce", (operand, init),
                           attrs={"dimensions": int_list_text(sorted(dims)), "to_apply": ""},
                           called=[comp], called_attr="to_apply")

    def map(self, operands, comp: Computation, shape: Shape) -> Instruction:
        return self._add("map", shape, list(operands),
                         attrs={"dimensions": int_list_text(range(shape.rank)),
                                "to_apply": ""},
                         called=[comp], called_attr="to_apply")

    def dot(self, lhs: Instruction, rhs: Instruction, lb, lc, rb, rc, et: str,
            extra_attrs: dict | None = None) -> Instruction:
        attrs = DotDimensionNumbers(tuple(lb), tuple(lc), tuple(rb), tuple(rc)).attrs()
        for k, v in (extra_attrs or {}).items():
            attrs[k] = v
        return self._infer("dot", (lhs, rhs), attrs=attrs, declared=Shape.array(et, ()))


def dot_dims(inst: Instruction):
    """(lhs_batch, lhs_contracting, rhs_batch, rhs_contracting) as lists."""
    return inst.dot_dimension_numbers.lists()


def dot_extra_attrs(inst: Instruction, swap: bool = False) -> dict:
    """operand_precision / algorithm carried to a derived dot (swapped for swapped operands)."""
    out = {}
    prec = inst.attrs.get("operand_precision")
    if prec is not None:
        if swap:
            parts = [p.strip() for p in prec.strip("{}").split(",")]
            if len(parts) == 2:
                prec = "{" + parts[1] + "," + parts[0] + "}"
        out["operand_precision"] = prec
    if "algorithm" in inst.attrs:
        out["algorithm"] = inst.attrs["algorithm"]
    return out


def scalar_computation(module, opcode: str, et: str, name: str | None = None) -> Computation:
    """A ``(x, y) -> op(x, y)`` scalar computation (XLA's GetOrCreateScalarAddComputation)."""
    cname = name or f"scalar_{opcode}_computation_{et}"
    for c in module.computations:
        if c.name == cname and _is_scalar_binary(c, opcode, et):
            return c
    comp = Computation(cname)
    s = Shape.array(et, ())
    x = comp.add_parameter(s, "scalar_lhs")
    y = comp.add_parameter(s, "scalar_rhs")
    root = comp.add(opcode, s, [x, y], name=opcode)
    comp.root = root
    module.add_computation(comp, before=module.entry)
    return comp


def _is_scalar_binary(c: Computation, opcode: str, et: str) -> bool:
    r = c.root
    return (r is not None and r.opcode == opcode and len(c.parameters) == 2
            and r.operands == c.parameters and r.shape.element_type == et)
