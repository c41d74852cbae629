"""Structure and control flow: constant, tuple, get-tuple-element, call, fusion, while,
conditional, async wrappers, tokens and dependencies, I/O placeholders."""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from .registry import register, register_fast
from .values import TOKEN, scalar_int, zeros_for


def called_by(inst, attr: str):
    """The computation ``inst`` names in attribute ``attr`` (condition=, body=,
    true_computation=, ...), or None."""
    names = inst.called_attr
    if isinstance(names, tuple):
        for name, comp in zip(names, inst.called):
            if name == attr:
                return comp
        return None
    if names == attr and inst.called:
        return inst.called[0]
    return None


@register("parameter")
def _parameter(inst, args, ctx):
    raise UnsupportedError("parameters are bound by the evaluator, not executed")


@register("constant")
def _constant(inst, args, ctx):
    from .evaluator import _constant_value
    return _constant_value(inst)


@register_fast("tuple")
def _make_tuple(inst):
    return lambda *xs: xs


@register_fast("get-tuple-element")
def _make_gte(inst):
    index = inst.attr("index")
    if index is None:
        raise UnsupportedError("get-tuple-element needs index=")
    return lambda t: t[index]


@register("call", "fusion")
def _call(inst, args, ctx):
    if not inst.called:
        raise UnsupportedError(f"{inst.opcode} has no called computation")
    return ctx.call(inst.called[0], args)


@register("while")
def _while(inst, args, ctx):
    cond = called_by(inst, "condition")
    body = called_by(inst, "body")
    if cond is None or body is None:
        raise UnsupportedError("while needs condition= and body=")
    runner = getattr(ctx, "runner", None)
    if runner is None:  # a stand-in context: plain calls
        state = args[0]
        while ctx.call(cond, [state]):
            state = ctx.call(body, [state])
        return state
    test, step = runner(cond), runner(body)
    state = args[0]
    while test(state):
        state = step(state)
    return state


@register("conditional")
def _conditional(inst, args, ctx):
    selector = args[0]
    if inst.operands[0].shape.element_type == "pred":
        true_c = called_by(inst, "true_computation")
        false_c = called_by(inst, "false_computation")
        if true_c is None or false_c is None:
            raise UnsupportedError("a pred conditional needs true_computation= and "
                                   "false_computation=")
        if bool(np.asarray(selector)):
            return ctx.call(true_c, [args[1]])
        return ctx.call(false_c, [args[2]])
    branches = inst.called
    if not branches:
        raise UnsupportedError("conditional has no branch_computations")
    index = scalar_int(selector)
    if index < 0 or index >= len(branches):
        index = len(branches) - 1  # XLA: an out-of-range index runs the last branch
    return ctx.call(branches[index], [args[index + 1]])


# ---- async wrappers ---------------------------------------------------------------------
@register("async-start")
def _async_start(inst, args, ctx):
    if not inst.called:
        raise UnsupportedError("async-start has no called computation")
    result = ctx.call(inst.called[0], args)
    shapes = inst.shape.tuple_shapes
    if len(shapes) < 2:
        raise UnsupportedError("async-start must return (operands, result, ...)")
    operands = tuple(args) if shapes[0].is_tuple() else args[0]
    return (operands, result) + tuple(zeros_for(s) for s in shapes[2:])


@register_fast("async-update", "all-reduce-done")
def _make_pass_through(inst):
    return lambda x: x


@register_fast("async-done", "all-gather-done", "collective-permute-done")
def _make_second(inst):
    if not inst.operands[0].shape.is_tuple():
        return lambda x: x
    return lambda t: t[1]


@register_fast("copy-start")
def _make_copy_start(inst):
    shapes = inst.shape.tuple_shapes
    extra = tuple(zeros_for(s) for s in shapes[2:])
    return lambda x: (x, x) + extra


@register_fast("copy-done")
def _make_copy_done(inst):
    return lambda t: t[0]


# ---- tokens, dependencies, I/O ----------------------------------------------------------
@register("after-all")
def _after_all(inst, args, ctx):
    return TOKEN


@register_fast("add-dependency")
def _make_add_dependency(inst):
    return lambda x, token: x


@register("outfeed")
def _outfeed(inst, args, ctx):
    sink = getattr(ctx, "outfeed", None)
    if sink is None:
        sink = ctx.outfeed = []
    sink.append(args[0])
    return TOKEN


@register("infeed", "send", "send-done", "recv", "recv-done")
def _io(inst, args, ctx):
    raise UnsupportedError(f"{inst.opcode} talks to the host or another device; the "
                           "interpreter cannot execute it")


# ---- scan -------------------------------------------------------------------------------
@register("scan")
def _scan(inst, args, ctx):
    """XLA's ScanExpander semantics: operands are N inputs then C carries; for each index
    t along ``dimensions={d}`` (descending with is_reverse=true) call
    ``to_apply(input slices at t..., carries...) -> (outputs..., new carries...)`` and
    write each output at t of its result array; the result is (outputs..., carries...)."""
    comp = inst.to_apply
    dims = inst.dimensions
    if len(dims) != 1:
        raise UnsupportedError("scan needs dimensions={d}")
    d = dims[0]
    params = comp.parameters
    if len(params) != len(args):
        raise UnsupportedError(f"scan has {len(args)} operands but its computation takes "
                               f"{len(params)} parameters")
    nc = inst.attr("num_carries")
    if nc is None:  # carries keep their shape in the computation; inputs lose dim d
        nc = sum(1 for o, p in zip(inst.operands, params) if o.shape.rank == p.shape.rank)
    ni = len(args) - nc
    if ni < 1:
        raise UnsupportedError("scan needs at least one input")
    inputs, carries = [np.asarray(a) for a in args[:ni]], list(args[ni:])
    shapes = inst.shape.tuple_shapes if inst.shape.is_tuple() else (inst.shape,)
    n_out = len(shapes) - nc
    outs = [np.zeros(s.dims, dtype=s.dtype) for s in shapes[:n_out]]
    length = inputs[0].shape[d]
    reverse = inst.attrs.get("is_reverse", "false") == "true"
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        r = ctx.call(comp, [np.take(x, t, axis=d) for x in inputs] + carries)
        r = list(r) if isinstance(r, tuple) else [r]
        for o, v in zip(outs, r[:n_out]):
            index = [slice(None)] * o.ndim
            index[d] = t
            o[tuple(index)] = v
        carries = r[n_out:]
    result = outs + list(carries)
    return tuple(result) if inst.shape.is_tuple() else result[0]
