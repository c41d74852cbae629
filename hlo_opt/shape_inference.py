"""Shape inference: the result shape an instruction must have given its operands.

Used by the parser for instructions written without a shape and by the verifier.
"""
from __future__ import annotations

from .ir.instruction import Instruction
from .ir.opcodes import is_elementwise
from .ir.shape import Shape


class CannotInfer(Exception):
    pass


def infer_shape(inst: Instruction) -> Shape:
    op = inst.opcode
    ops = inst.operands
    if op == "tuple":
        return Shape.tuple(o.shape for o in ops)
    if op == "get-tuple-element":
        return ops[0].shape.tuple_shapes[inst.attr("index")]
    if is_elementwise(op) and ops and op not in ("compare", "convert", "bitcast-convert",
                                                 "reduce-precision", "real", "imag",
                                                 "complex", "is-finite", "select",
                                                 "stochastic-convert"):
        return ops[-1].shape if op == "clamp" else ops[0].shape
    if op == "compare" or op == "is-finite":
        return ops[0].shape.with_element_type("pred")
    if op == "select":
        return ops[1].shape
    if op == "after-all":
        return Shape.token()
    raise CannotInfer(f"no shape rule for {op}")
