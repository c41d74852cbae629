"""Shape inference: the result shape an instruction must have given its operands,
attributes and called computations — XLA's ``ShapeInference`` plus the checks
``hlo_verifier.cc`` adds on top.

``infer_shape(inst)`` raises :class:`CannotInfer` when the shape is not determined by
the operands (a ``custom-call`` or ``parameter`` written without a shape, a ``convert``
without its result type) and :class:`ShapeError` (a subclass) when the operands or
attributes are invalid for the opcode.  Where part of the result is declared rather than
inferable (the element type of ``convert``/``dot``/``convolution``, the dims of
``broadcast``/``reshape``), the rule takes that part from ``inst.shape`` and checks the
rest, so comparing the declared and the inferred shape checks everything checkable.

Used by the parser (for instructions written without a shape) and by the verifier.
"""
from __future__ import annotations

from ..ir.instruction import Instruction
from ..ir.opcodes import OPCODES
from ..ir.shape import Shape
from . import collectives as coll
from . import control as ctl
from . import data, elementwise as ew, indexing, linalg, reduce as red
from .common import CannotInfer, ShapeError, compatible, compatible_ignoring_fp

RULES: dict[str, object] = {}
for _op, (_arity, _cat) in OPCODES.items():
    if _cat == "elementwise" and _arity == 1:
        RULES[_op] = ew.unary
    elif _cat == "elementwise" and _arity == 2:
        RULES[_op] = ew.binary

RULES.update({
    # elementwise specials
    "convert": ew.convert, "bitcast-convert": ew.bitcast_convert,
    "reduce-precision": ew.reduce_precision, "stochastic-convert": ew.stochastic_convert,
    "select": ew.select, "clamp": ew.clamp, "map": ew.map_, "copy": ew.unary,
    "domain": ew.unary,
    # data movement
    "broadcast": data.broadcast, "reshape": data.reshape,
    "dynamic-reshape": data.dynamic_reshape, "transpose": data.transpose,
    "slice": data.slice_, "dynamic-slice": data.dynamic_slice,
    "dynamic-update-slice": data.dynamic_update_slice, "pad": data.pad,
    "concatenate": data.concatenate, "reverse": data.reverse, "iota": data.iota,
    "bitcast": data.bitcast, "get-dimension-size": data.get_dimension_size,
    "set-dimension-size": data.set_dimension_size,
    "gather": indexing.gather, "scatter": indexing.scatter,
    # reductions
    "reduce": red.reduce, "reduce-window": red.reduce_window,
    "select-and-scatter": red.select_and_scatter, "sort": red.sort, "topk": red.topk,
    # linear algebra
    "dot": linalg.dot, "ragged-dot": linalg.ragged_dot, "convolution": linalg.convolution,
    "fft": linalg.fft, "cholesky": linalg.cholesky,
    "triangular-solve": linalg.triangular_solve,
    "batch-norm-training": linalg.batch_norm_training,
    "batch-norm-inference": linalg.batch_norm_inference,
    "batch-norm-grad": linalg.batch_norm_grad,
    # structure and control flow
    "tuple": ctl.tuple_, "get-tuple-element": ctl.get_tuple_element, "call": ctl.call,
    "while": ctl.while_, "conditional": ctl.conditional, "fusion": ctl.fusion,
    "custom-call": ctl.custom_call, "async-start": ctl.async_start,
    "async-update": ctl.async_update, "async-done": ctl.async_done,
    "opt-barrier": ctl.same_as_operand, "after-all": ctl.after_all,
    "add-dependency": ctl.add_dependency, "parameter": ctl.parameter,
    "constant": ctl.constant,
    # RNG
    "rng": ctl.rng, "rng-bit-generator": ctl.rng_bit_generator,
    "rng-get-and-update-state": ctl.rng_get_and_update_state,
    # I/O
    "infeed": ctl.infeed, "outfeed": ctl.outfeed, "send": ctl.send,
    "send-done": ctl.send_done, "recv": ctl.recv, "recv-done": ctl.recv_done,
    "copy-start": ctl.copy_start, "copy-done": ctl.copy_done,
    # collectives
    "all-reduce": coll.all_reduce, "all-reduce-start": coll.all_reduce,
    "all-reduce-done": ctl.same_as_operand, "collective-broadcast": coll.all_reduce,
    "all-gather": coll.all_gather, "all-gather-start": coll.all_gather,
    "all-gather-done": coll.all_gather_done, "reduce-scatter": coll.reduce_scatter,
    "all-to-all": coll.all_to_all, "ragged-all-to-all": coll.ragged_all_to_all,
    "collective-permute": coll.collective_permute,
    "collective-permute-start": coll.collective_permute_start,
    "collective-permute-done": coll.collective_permute_done,
    "partition-id": ctl.u32_scalar, "replica-id": ctl.u32_scalar,
})

# Opcodes XLA has no public shape rule for: the declared shape is taken as written.
DECLARED_ONLY = frozenset({"scaled-dot", "scan", "shuffle", "collective-reduce"})
for _op in DECLARED_ONLY:
    RULES[_op] = ctl.declared_only


def infer_shape(inst: Instruction) -> Shape:
    """The shape ``inst`` must have; see the module docstring for the two exceptions."""
    rule = RULES.get(inst.opcode)
    if rule is None:
        raise CannotInfer(f"no shape rule for {inst.opcode}")
    for op in inst.operands:
        if op.shape is None:
            raise CannotInfer(f"operand %{op.name} has no shape yet")
    return rule(inst)


__all__ = ["CannotInfer", "DECLARED_ONLY", "RULES", "ShapeError", "compatible",
           "compatible_ignoring_fp", "infer_shape"]
