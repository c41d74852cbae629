"""Rules for ops that apply a called computation to groups of elements: reduce,
reduce-window, select-and-scatter, sort, topk — and the reducer signature check they
share with scatter (ShapeInference's VerifyReducerShape)."""
from __future__ import annotations

from ..ir.shape import Shape
from .common import (PRED_SCALAR, attr, called, check_dims_in_range, compatible,
                     compatible_ignoring_fp, expect_array, fail, int_attr, need_operands,
                     program_shape, resolved_called, same_dims, text, window_output_dims)


def called_by_name(inst) -> dict:
    """attribute name -> computation (``select=``/``scatter=``, ``condition=``/``body=``)."""
    names = inst.called_attr
    resolved_called(inst)
    if isinstance(names, tuple):
        return dict(zip(names, inst.called))
    if names is not None and len(inst.called) == 1:
        return {names: inst.called[0]}
    return {}


def verify_reducer(comp, init_shapes, input_types, what: str) -> list[Shape]:
    """Check ``comp`` is (acc..., x...) -> acc with scalar accumulators of the inputs'
    types; return the accumulator shapes."""
    n = len(input_types)
    params, result = program_shape(comp)
    name = f"{what} computation %{comp.name}"
    if len(params) != 2 * n:
        fail(f"{name} must take {2 * n} parameters, takes {len(params)}")
    if result.is_tuple():
        if len(result.tuple_shapes) != n:
            fail(f"{name} must return a tuple of {n} scalars, returns {text(result)}")
        accs = list(result.tuple_shapes)
    elif result.is_array():
        if n != 1:
            fail(f"{name} must return a tuple of {n} scalars, returns {text(result)}")
        accs = [result]
    else:
        fail(f"{name} must return scalars, returns {text(result)}")
    for a in accs:
        if not a.is_scalar():
            fail(f"{name} must return scalars, returns {text(result)}")
    for i in range(n):
        acc = accs[i]
        if not compatible(acc, params[i]):
            fail(f"{name} parameter {i} is {text(params[i])} but it returns {text(acc)} there")
        if not compatible_ignoring_fp(acc, init_shapes[i]):
            fail(f"{name} returns {text(acc)} at {i} but the init value is "
                 f"{text(init_shapes[i])}")
        elem = Shape.array(input_types[i], ())
        if not compatible_ignoring_fp(elem, params[n + i]):
            fail(f"{name} parameter {n + i} is {text(params[n + i])} but the input element "
                 f"type is {input_types[i]}")
        if not compatible_ignoring_fp(acc, params[n + i]):
            fail(f"{name} parameter {n + i} is {text(params[n + i])}, must match the result "
                 f"{text(acc)}")
    return accs


def _split_inputs(inst):
    ops = inst.operands
    if not ops or len(ops) % 2:
        fail(f"{inst.opcode} needs an even number of operands (inputs then init values), "
             f"has {len(ops)}")
    n = len(ops) // 2
    inputs = [o.shape for o in ops[:n]]
    inits = [o.shape for o in ops[n:]]
    for s in inputs:
        expect_array(s, f"input of {inst.opcode}")
        if not same_dims(s, inputs[0]):
            fail(f"{inst.opcode} inputs must have the same dimensions: {text(inputs[0])} and "
                 f"{text(s)}")
    for s in inits:
        if not s.is_scalar():
            fail(f"{inst.opcode} init values must be scalars, got {text(s)}")
    return inputs, inits


def reduce(inst) -> Shape:
    inputs, inits = _split_inputs(inst)
    arg = inputs[0]
    dims = attr(inst, "dimensions", required=True)
    check_dims_in_range(dims, arg.rank, "reduce")
    (comp,) = called(inst, 1)
    accs = verify_reducer(comp, inits, [s.element_type for s in inputs], "reduce")
    keep = [i for i in range(arg.rank) if i not in dims]
    out_dims = [arg.dims[i] for i in keep]
    out_dyn = [arg.dynamic[i] for i in keep]
    if not comp.root.shape.is_tuple():
        return Shape(accs[0].element_type, out_dims, out_dyn)
    return Shape.tuple(Shape(a.element_type, out_dims, out_dyn) for a in accs)


def reduce_window(inst) -> Shape:
    inputs, inits = _split_inputs(inst)
    (comp,) = called(inst, 1)
    accs = verify_reducer(comp, inits, [s.element_type for s in inputs], "reduce-window")
    window = attr(inst, "window")
    if window is None and inputs[0].rank:
        fail("reduce-window needs window=")
    outs = [Shape(init.element_type, window_output_dims(s.dims, window, "reduce-window"),
                  s.dynamic) for s, init in zip(inputs, inits)]
    del accs
    if not comp.root.shape.is_tuple():
        return outs[0]
    return Shape.tuple(outs)


def select_and_scatter(inst) -> Shape:
    need_operands(inst, 3)
    operand, source, init = (o.shape for o in inst.operands)
    expect_array(operand, "operand of select-and-scatter")
    comps = called_by_name(inst)
    select, scatter = comps.get("select"), comps.get("scatter")
    if select is None or scatter is None:
        fail("select-and-scatter needs select= and scatter= computations")
    params, result = program_shape(select)
    if len(params) != 2:
        fail(f"select computation %{select.name} must take 2 parameters, takes {len(params)}")
    if not compatible(result, PRED_SCALAR):
        fail(f"select computation %{select.name} must return pred[], returns {text(result)}")
    elem = Shape.array(operand.element_type, ())
    for i, p in enumerate(params):
        if not compatible_ignoring_fp(elem, p):
            fail(f"select computation %{select.name} parameter {i} is {text(p)}, expected "
                 f"{text(elem)}")
    verify_reducer(scatter, [init], [source.element_type], "scatter")
    window = attr(inst, "window")
    if window is None and operand.rank:
        fail("select-and-scatter needs window=")
    expected = Shape(operand.element_type,
                     window_output_dims(operand.dims, window, "select-and-scatter"))
    if not compatible_ignoring_fp(source, expected):
        fail(f"select-and-scatter source {text(source)} does not match the windowed operand "
             f"{text(expected)}")
    return operand


def sort(inst) -> Shape:
    shapes = [o.shape for o in inst.operands]
    if not shapes:
        fail("sort needs at least one operand")
    for s in shapes:
        expect_array(s, "operand of sort")
        if not same_dims(s, shapes[0]):
            fail(f"sort operands must have the same dimensions: {text(shapes[0])} and "
                 f"{text(s)}")
    dims = attr(inst, "dimensions", required=True)
    if len(dims) != 1 or not 0 <= dims[0] < shapes[0].rank:
        fail(f"sort dimension {{{','.join(map(str, dims))}}} is out of range for rank "
             f"{shapes[0].rank}")
    (comp,) = called(inst, 1)
    params, result = program_shape(comp)
    name = f"sort comparator %{comp.name}"
    if not compatible(result, PRED_SCALAR):
        fail(f"{name} must return pred[], returns {text(result)}")
    if len(params) != 2 * len(shapes):
        fail(f"{name} must take {2 * len(shapes)} parameters, takes {len(params)}")
    for i, p in enumerate(params):
        want = Shape.array(shapes[i // 2].element_type, ())
        if not compatible_ignoring_fp(want, p):
            fail(f"{name} parameter {i} is {text(p)}, expected {text(want)}")
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


def topk(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of topk")
    if s.rank < 1:
        fail("topk needs an operand of rank >= 1")
    k = int_attr(inst, "k")
    if k < 0 or s.dims[-1] < k:
        fail(f"topk k={k} exceeds the last dimension of {text(s)}")
    dims = s.dims[:-1] + (k,)
    return Shape.tuple([Shape(s.element_type, dims, s.dynamic),
                        Shape("s32", dims, s.dynamic)])
