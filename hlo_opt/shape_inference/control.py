"""Structure and control flow: tuple, get-tuple-element, call, while, conditional,
fusion, custom-call, async ops, tokens, parameters, constants, RNG and host transfers."""
from __future__ import annotations

import re

from ..ir.shape import Shape, tuple_limits
from ..ir.types import is_float, is_integral
from .common import (PRED_SCALAR, S32_SCALAR, TOKEN, U32_SCALAR, CannotInfer, attr, called,
                     compatible, declared, fail, need_operands, program_shape,
                     text)
from .reduce import called_by_name


def tuple_(inst) -> Shape:
    shape = Shape.tuple(o.shape for o in inst.operands)
    problem = tuple_limits(shape)
    if problem:
        fail(problem)
    return shape


def get_tuple_element(inst) -> Shape:
    need_operands(inst, 1)
    s = inst.operands[0].shape
    if not s.is_tuple():
        fail(f"get-tuple-element of a non-tuple {text(s)}")
    index = attr(inst, "index", required=True)
    if not 0 <= index < len(s.tuple_shapes):
        fail(f"get-tuple-element index {index} is out of range for a tuple of "
             f"{len(s.tuple_shapes)} elements")
    return s.tuple_shapes[index]


def _check_arguments(inst, comp, args, what: str) -> Shape:
    params, result = program_shape(comp)
    if len(params) != len(args):
        fail(f"{what} %{comp.name} takes {len(params)} parameter(s) but "
             f"{inst.opcode} passes {len(args)} operand(s)")
    for i, (p, a) in enumerate(zip(params, args)):
        if not compatible(p, a.shape):
            fail(f"{what} %{comp.name} parameter {i} is {text(p)} but operand {i} "
                 f"(%{a.name}) is {text(a.shape)}")
    return result


def call(inst) -> Shape:
    (comp,) = called(inst, 1)
    return _check_arguments(inst, comp, inst.operands, "called computation")


def fusion(inst) -> Shape:
    (comp,) = called(inst, 1, "fused computation")
    result = _check_arguments(inst, comp, inst.operands, "fused computation")
    _check_aliasing(inst, result)
    return result


def while_(inst) -> Shape:
    need_operands(inst, 1)
    comps = called_by_name(inst)
    cond, body = comps.get("condition"), comps.get("body")
    if cond is None or body is None:
        fail("while needs condition= and body= computations")
    init = inst.operands[0].shape
    cparams, cresult = program_shape(cond)
    bparams, bresult = program_shape(body)
    if len(cparams) != 1:
        fail(f"while condition %{cond.name} must take 1 parameter, takes {len(cparams)}")
    if len(bparams) != 1:
        fail(f"while body %{body.name} must take 1 parameter, takes {len(bparams)}")
    if not compatible(cresult, PRED_SCALAR):
        fail(f"while condition %{cond.name} must return pred[], returns {text(cresult)}")
    for s, what in ((cparams[0], f"condition %{cond.name} parameter"),
                    (bparams[0], f"body %{body.name} parameter"),
                    (bresult, f"body %{body.name} result")):
        if not compatible(s, init):
            fail(f"while {what} {text(s)} differs from the loop state {text(init)}")
    return init


def conditional(inst) -> Shape:
    if not inst.operands:
        fail("conditional needs a branch index operand")
    index = inst.operands[0].shape
    names = called_by_name(inst)
    if "true_computation" in names or "false_computation" in names:
        branches = [names.get("true_computation"), names.get("false_computation")]
        if None in branches:
            fail("conditional needs both true_computation= and false_computation=")
    else:
        branches = list(inst.called)
    if not branches:
        fail("conditional calls no branch computations")
    if compatible(index, PRED_SCALAR):
        if len(branches) != 2:
            fail(f"a pred conditional needs 2 branches, has {len(branches)}")
    elif not compatible(index, S32_SCALAR):
        fail(f"conditional branch index must be pred[] or s32[], got {text(index)}")
    if len(inst.operands) != len(branches) + 1:
        fail(f"conditional with {len(branches)} branches needs {len(branches) + 1} operands, "
             f"has {len(inst.operands)}")
    results = [_check_arguments(inst, b, [inst.operands[j + 1]], f"branch {j}")
               for j, b in enumerate(branches)]
    for j, r in enumerate(results):
        if not compatible(r, results[0]):
            fail(f"conditional branches return different shapes: branch 0 {text(results[0])}"
                 f", branch {j} (%{branches[j].name}) {text(r)}")
    return results[0]


_ALIAS_RE = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _subshape(shape: Shape, index):
    for i in index:
        if not shape.is_tuple() or not 0 <= i < len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


def _check_aliasing(inst, result: Shape) -> None:
    raw = inst.attrs.get("output_to_operand_aliasing")
    if not raw:
        return
    for out_idx, operand, op_idx in _ALIAS_RE.findall(raw):
        out_index = [int(x) for x in out_idx.split(",") if x.strip()]
        op_index = [int(x) for x in op_idx.split(",") if x.strip()]
        k = int(operand)
        if k >= len(inst.operands):
            fail(f"output_to_operand_aliasing names operand {k} of {len(inst.operands)}")
        out_sub = _subshape(result, out_index)
        op_sub = _subshape(inst.operands[k].shape, op_index)
        if out_sub is None or op_sub is None:
            fail(f"output_to_operand_aliasing has an invalid shape index: {raw}")
        if not compatible(out_sub, op_sub):
            fail(f"output_to_operand_aliasing pairs {text(out_sub)} with {text(op_sub)}")


def custom_call(inst) -> Shape:
    out = declared(inst, "shape")
    _check_aliasing(inst, out)
    return out


def async_start(inst) -> Shape:
    (comp,) = called(inst, 1, "async computation")
    result = _check_arguments(inst, comp, inst.operands, "async computation")
    out = inst.shape
    rest = list(out.tuple_shapes[2:]) if out is not None and out.is_tuple() else []
    return Shape.tuple([Shape.tuple(o.shape for o in inst.operands), result] + rest)


def async_update(inst) -> Shape:
    need_operands(inst, 1)
    return _async_operand(inst)


def async_done(inst) -> Shape:
    need_operands(inst, 1)
    return _async_operand(inst).tuple_shapes[1]


def _async_operand(inst) -> Shape:
    s = inst.operands[0].shape
    if not s.is_tuple() or len(s.tuple_shapes) < 2:
        fail(f"{inst.opcode} operand must be an async tuple of >= 2 elements, got {text(s)}")
    return s


def same_as_operand(inst) -> Shape:
    """opt-barrier, domain, async-update: the result is the operand."""
    need_operands(inst, 1)
    return inst.operands[0].shape


def _token_operand(inst, i: int) -> None:
    if len(inst.operands) <= i or not inst.operands[i].shape.is_token():
        got = text(inst.operands[i].shape) if len(inst.operands) > i else "nothing"
        fail(f"{inst.opcode} operand {i} must be a token, got {got}")


def after_all(inst) -> Shape:
    for i in range(len(inst.operands)):
        _token_operand(inst, i)
    return TOKEN


def add_dependency(inst) -> Shape:
    need_operands(inst, 2)
    _token_operand(inst, 1)
    return inst.operands[0].shape


def parameter(inst) -> Shape:
    return declared(inst, "shape")


def constant(inst) -> Shape:
    out = declared(inst, "shape")
    lit = inst.cached_literal  # only when already parsed: checking text here would not be linear
    if lit is not None and not compatible(lit.shape, out):
        fail(f"constant literal has shape {text(lit.shape)}, instruction says {text(out)}")
    return out


def rng(inst) -> Shape:
    need_operands(inst, 2)
    a, b = inst.operands[0].shape, inst.operands[1].shape
    if not a.is_scalar() or not b.is_scalar():
        fail(f"rng bounds must be scalars, got {text(a)} and {text(b)}")
    out = declared(inst, "shape")
    if a.element_type != b.element_type or out.element_type != a.element_type:
        fail(f"rng bounds {text(a)}, {text(b)} and result {text(out)} must share a type")
    dist = attr(inst, "distribution", "rng_uniform")
    t = a.element_type
    if dist == "rng_normal" and not is_float(t):
        fail(f"rng_normal needs floating-point bounds, got {t}")
    if dist == "rng_uniform" and not (is_float(t) or is_integral(t) or t == "pred"):
        fail(f"rng_uniform does not support {t}")
    return out


def rng_bit_generator(inst) -> Shape:
    need_operands(inst, 1)
    out = declared(inst, "shape")
    if not out.is_tuple():
        return out
    if len(out.tuple_shapes) != 2:
        fail(f"rng-bit-generator must return (state, bits), declares {text(out)}")
    return Shape.tuple([inst.operands[0].shape, out.tuple_shapes[1]])


def rng_get_and_update_state(inst) -> Shape:
    need_operands(inst, 0)
    return Shape.array("u64", (2,))


def infeed(inst) -> Shape:
    need_operands(inst, 1)
    _token_operand(inst, 0)
    out = declared(inst, "shape")
    if not out.is_tuple() or len(out.tuple_shapes) != 2:
        fail(f"infeed must return (data, token), declares {text(out)}")
    return Shape.tuple([out.tuple_shapes[0], TOKEN])


def outfeed(inst) -> Shape:
    need_operands(inst, 2)
    _token_operand(inst, 1)
    raw = inst.attrs.get("outfeed_shape")
    if raw:
        try:
            want = Shape.parse(raw)
        except ValueError:
            fail(f"bad outfeed_shape={raw}")
        if not compatible(want, inst.operands[0].shape):
            fail(f"outfeed_shape {text(want)} differs from the operand "
                 f"{text(inst.operands[0].shape)}")
    return TOKEN


def send(inst) -> Shape:
    need_operands(inst, 2)
    _token_operand(inst, 1)
    return Shape.tuple([inst.operands[0].shape, U32_SCALAR, TOKEN])


def send_done(inst) -> Shape:
    need_operands(inst, 1)
    return TOKEN


def recv(inst) -> Shape:
    need_operands(inst, 1)
    _token_operand(inst, 0)
    out = declared(inst, "shape")
    if not out.is_tuple() or len(out.tuple_shapes) < 1:
        fail(f"recv must return (data, u32[], token), declares {text(out)}")
    return Shape.tuple([out.tuple_shapes[0], U32_SCALAR, TOKEN])


def recv_done(inst) -> Shape:
    need_operands(inst, 1)
    s = inst.operands[0].shape
    if not s.is_tuple() or not s.tuple_shapes:
        fail(f"recv-done operand must be a recv tuple, got {text(s)}")
    return Shape.tuple([s.tuple_shapes[0], TOKEN])


def copy_start(inst) -> Shape:
    need_operands(inst, 1)
    s = inst.operands[0].shape
    return Shape.tuple([s, s, U32_SCALAR])


def copy_done(inst) -> Shape:
    need_operands(inst, 1)
    s = inst.operands[0].shape
    if not s.is_tuple() or len(s.tuple_shapes) < 2:
        fail(f"copy-done operand must be a copy-start tuple, got {text(s)}")
    if not compatible(s.tuple_shapes[0], s.tuple_shapes[1]):
        fail(f"copy-done source and destination differ: {text(s)}")
    return s.tuple_shapes[0]


def u32_scalar(inst) -> Shape:
    need_operands(inst, 0)
    return U32_SCALAR


def declared_only(inst) -> Shape:
    """Opcodes whose result shape the verifier takes as written (no public rule)."""
    for o in inst.operands:
        if o.shape is None:
            raise CannotInfer("operand shape unknown")
    return declared(inst, "shape")

