"""algsimp rules for reductions and friends: reduce reduce-window sort map gather scatter."""
from __future__ import annotations

import numpy as np

from hlo_opt.ir.attributes import Window, WindowDim
from hlo_opt.ir.clone import clone_computation
from hlo_opt.ir.opcodes import is_elementwise
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_float

from hlo_opt.rewrite.builder import dot_dims
from hlo_opt.rewrite.rules import P, RuleList, Rules, X
from hlo_opt.analysis.shape_util import dims_unmodified_by_reshape
from .options import layout_free
from .predicates import (is_reduction_identity, is_tuple_reduction_identity, max_value,
                         min_value, root_is_binary_of_params, same_literal, scalar_value)

r = RuleList()


def _reduce_parts(red):
    n = len(red.operands) // 2
    return red.operands[:n], red.operands[n:]


def _result_shape(red):
    return red.shape.tuple_shapes[0] if red.shape.is_tuple() else red.shape


def _is_add(comp):
    return root_is_binary_of_params(comp, ("add",)) is not None


def _equivalent_computations(a, b) -> bool:
    if a is b:
        return True
    ka = root_is_binary_of_params(a, ("add", "multiply", "and", "or"))
    kb = root_is_binary_of_params(b, ("add", "multiply", "and", "or"))
    return ka is not None and ka == kb


def _reassoc_float(ctx, inst):
    t = _result_shape(inst).element_type
    return not is_float(t) or ctx.opts.float_reassociation


# ---- reduce -----------------------------------------------------------------------------
def _zero_elements(red) -> bool:
    return red.operands[0].shape.num_elements() == 0 or _result_shape(red).num_elements() == 0


def _keeps_every_element(red) -> bool:
    return _result_shape(red).num_elements() == red.operands[0].shape.num_elements()


@r(P("reduce", pred=_zero_elements), "reduce of/to zero elements => broadcast(init)")
def _reduce_empty(ctx):
    red = ctx.inst
    inputs, inits = _reduce_parts(red)
    if red.shape.is_tuple():
        return ctx.b.tuple([ctx.b.broadcast(i, s.dims, ())
                            for i, s in zip(inits, red.shape.tuple_shapes)])
    return ctx.b.broadcast(inits[0], red.shape.dims, ())


@r(P("reduce", pred=_keeps_every_element), "reduce that keeps every element => reshape",
   exact=False, when=layout_free)
def _reduce_reshape(ctx):
    red = ctx.inst
    inputs, inits = _reduce_parts(red)
    rs = _result_shape(red)
    # XLA assumes the init value is the reducer's identity; we check it (for a variadic
    # reduce: a tuple of independent reducers, each from its identity).
    comp = red.to_apply
    if comp.root is not None and comp.root.opcode == "tuple":
        if not is_tuple_reduction_identity(inits, comp):
            return None
    elif len(inits) != 1 or not is_reduction_identity(inits[0], comp):
        return None
    if red.shape.is_tuple():
        return ctx.b.tuple([ctx.b.reshape(i, s.dims)
                            for i, s in zip(inputs, red.shape.tuple_shapes)])
    return ctx.b.reshape(inputs[0], rs.dims)


def _single(red):
    return not red.shape.is_tuple() and len(red.operands) == 2


@r(P("reduce", P("negate", X("a")), X("init")), "reduce(-A, +, 0) => -reduce(A, +, 0)",
   exact=False)
def _reduce_negate(ctx, a, init):
    red = ctx.inst
    if ctx.opts.is_layout_sensitive or not is_float(red.shape.element_type):
        return None
    if not (init.opcode == "constant" and init.shape.num_elements() == 1
            and _scalar_zero(init) and _is_add(red.to_apply)):
        return None
    new = ctx.b.reduce(a, init, red.dimensions, red.to_apply)
    return ctx.b.unary("negate", new)


def _scalar_zero(c):
    from .predicates import scalar_value
    v = scalar_value(c)
    return v is not None and v == 0


@r(P("reduce", P("transpose", X("a"), name="tr"), X("init")),
   "reduce(transpose(A)) => reduce(A) with permuted dimensions", exact=False)
def _reduce_transpose(ctx, a, tr, init):
    red = ctx.inst
    if ctx.opts.is_layout_sensitive or not _reassoc_float(ctx, red):
        return None
    if not (ctx.opts.unconditionally_simplify_reduce_of_transpose_or_reshape
            or red.shape.rank < 2 or tr.user_count == 1
            or all(u.opcode == "reduce" for u in tr.users)):
        return None
    tdims = tr.dimensions
    new_dims = [tdims[d] for d in red.dimensions]
    new_red = ctx.b.reduce(a, init, new_dims, red.to_apply)
    keep = [d for d in tdims if d not in new_dims]
    if keep == sorted(keep):
        return new_red
    perm = [d - sum(1 for rd in new_dims if rd < d) for d in keep]
    return ctx.b.transpose(new_red, perm)


@r(P("reduce", P("reduce", X("a"), X("init2"), name="inner"), X("init")),
   "reduce(reduce(A)) => reduce(A) over both dimension sets", exact=False)
def _reduce_reduce(ctx, a, init2, inner, init):
    red = ctx.inst
    if ctx.opts.is_layout_sensitive or not _reassoc_float(ctx, red):
        return None
    if not same_literal(init, init2) or not _equivalent_computations(red.to_apply,
                                                                     inner.to_apply):
        return None
    if not is_reduction_identity(init, red.to_apply):
        return None  # the merged reduce applies the init value once instead of twice
    arg_dims = sorted(inner.dimensions)
    red_dims = sorted(red.dimensions)
    for ad in arg_dims:
        red_dims = [d + 1 if d >= ad else d for d in red_dims]
    return ctx.b.reduce(a, init, sorted(arg_dims + red_dims), red.to_apply)


@r(P("reduce", P("reshape", X("a"), name="rs"), X("init")),
   "reduce(reshape(A)) => reduce(A) or reshape(reduce(A))", exact=False)
def _reduce_reshape_arg(ctx, a, rs, init):
    red = ctx.inst
    if ctx.opts.is_layout_sensitive or not ctx.opts.enable_reduce_of_reshape:
        return None
    if not _reassoc_float(ctx, red):
        return None
    unmod = dims_unmodified_by_reshape(a.shape.dims, rs.shape.dims)
    rank = rs.shape.rank
    in_output = [True] * rank
    for d in red.dimensions:
        in_output[d] = False
    unmodified = [False] * rank
    for _, o in unmod:
        unmodified[o] = True
    if all(unmodified[i] or not in_output[i] for i in range(rank)):
        not_reduced = {i for i, o in unmod if in_output[o]}
        dims = [i for i in range(a.shape.rank) if i not in not_reduced]
        return ctx.b.reduce(a, init, dims, red.to_apply)
    if (rs.user_count == 1 or ctx.opts.unconditionally_simplify_reduce_of_transpose_or_reshape) \
            and all(unmodified[d] for d in red.dimensions):
        back = {o: i for i, o in unmod}
        new_red = ctx.b.reduce(a, init, [back[d] for d in red.dimensions], red.to_apply)
        return ctx.b.reshape(new_red, red.shape.dims)
    return None


@r(P("reduce", P("concatenate", name="cat"), X("init")),
   "reduce(concat(A, B)) over the concat dim => map(reduce(A), reduce(B))", exact=False)
def _reduce_concat(ctx, cat, init):
    red = ctx.inst
    if ctx.opts.is_layout_sensitive or not _reassoc_float(ctx, red):
        return None
    if cat.dimensions[0] not in red.dimensions or not is_reduction_identity(init, red.to_apply):
        return None
    same = all(o.shape.same_dims_and_type(cat.operands[0].shape) for o in cat.operands)
    if not (ctx.opts.enable_unconditional_reduce_of_concat_replacement or same
            or red.shape.rank == 0):
        return None
    prev = None
    for o in cat.operands:
        new = ctx.b.reduce(o, init, red.dimensions, red.to_apply)
        prev = new if prev is None else ctx.b.map([prev, new], red.to_apply, red.shape)
    return prev


@r(P("reduce", P("dot", X("lhs"), X("rhs"), name="dot"), X("init")),
   "reduce(dot(A, B)) over batch dims => dot(A, B) contracting them", exact=False)
def _reduce_dot(ctx, lhs, rhs, dot, init):
    red = ctx.inst
    opts = ctx.opts
    if opts.is_layout_sensitive or not (opts.supports_non_canonical_dots
                                        and opts.enable_dot_strength_reduction):
        return None
    if dot.user_count != 1 or not _is_add(red.to_apply) or not _reassoc_float(ctx, red):
        return None
    lb, lc, rb, rc = dot_dims(dot)
    nb = len(lb)
    if not any(d < nb for d in red.dimensions):
        return None
    from .predicates import scalar_value
    if init.opcode != "constant" or scalar_value(init) != 0:
        return None  # the dot cannot apply the init value
    nlb, nrb, nlc, nrc = [], [], list(lc), list(rc)
    removed = 0
    for b in range(nb):
        if b in red.dimensions:
            nlc.append(lb[b])
            nrc.append(rb[b])
            removed += 1
        else:
            nlb.append(lb[b])
            nrb.append(rb[b])
    from hlo_opt.rewrite.builder import dot_extra_attrs
    new_dot = ctx.b.dot(lhs, rhs, nlb, nlc, nrb, nrc, dot.shape.element_type,
                        dot_extra_attrs(dot))
    rest = [d - removed for d in red.dimensions if d >= nb]
    if not rest:
        return new_dot if new_dot.shape.element_type == red.shape.element_type else None
    return ctx.b.reduce(new_dot, init, rest, red.to_apply)


_MINMAX_ANDOR = ("maximum", "minimum", "and", "or")


@r(P("reduce", P("broadcast", X("x", pred=lambda i: i.shape.rank == 0)), X("init")),
   "reduce(bcast(x), op) over all dims => op(x, init) for min/max/and/or")
def _reduce_bcast_scalar(ctx, x, init):
    red = ctx.inst
    op = root_is_binary_of_params(red.to_apply, _MINMAX_ANDOR)
    if op is None or len(red.dimensions) != red.operands[0].shape.rank:
        return None
    return ctx.b.binary(op, x, init)


@r(P("reduce", P("broadcast", X("a"), name="bc"), X("init")),
   "reduce(broadcast(A)) over A's dims => broadcast(reduce(A))", exact=False)
def _reduce_bcast_commute(ctx, a, bc, init):
    red = ctx.inst
    if ctx.opts.is_layout_sensitive:
        return None
    bdims = list(bc.dimensions)
    new_dims = []
    for d in red.dimensions:
        if d not in bdims:
            return None
        new_dims.append(bdims.index(d))
    new_red = ctx.b.reduce(a, init, new_dims, red.to_apply)
    out_dims = []
    for od in range(a.shape.rank):
        if od in new_dims:
            continue
        bd = bdims[od]
        out_dims.append(bd - sum(1 for d in red.dimensions if d < bd))
    return ctx.b.broadcast(new_red, red.shape.dims, out_dims)


@r(P("reduce", P("broadcast", X("a"), name="bc"), X("init")),
   "reduce(broadcast(A), +) over added dims => broadcast(init + A * n)", exact=False)
def _reduce_bcast_add(ctx, a, bc, init):
    red = ctx.inst
    if not _is_add(red.to_apply) or list(bc.dimensions) != sorted(bc.dimensions):
        return None
    if not _reassoc_float(ctx, red):
        return None
    prod = 1
    new_bdims = []
    ncommon = 0
    for i in range(bc.shape.rank):
        added = i not in bc.dimensions
        removed = i in red.dimensions
        if removed and not added:
            return None
        if removed and added:
            prod *= bc.shape.dims[i]
            ncommon += 1
        elif not removed and not added:
            new_bdims.append(i - ncommon)
    bld = ctx.b
    mul = bld.binary("multiply", a, bld.scalar_like(a, prod))
    add = bld.binary("add", bld.broadcast(init, mul.shape.dims, ()), mul)
    return bld.broadcast(add, red.shape.dims, new_bdims)


# ---- variadic reduce: trivial tuples, arg-max/arg-min of a broadcast --------------------------
def _unary_variadic(red) -> bool:
    return (red.shape.is_tuple() and len(red.shape.tuple_shapes) == 1
            and red.to_apply.root is not None
            and red.to_apply.root.opcode == "tuple")


@r(P("reduce", X("a"), X("init"), pred=_unary_variadic),
   "reduce returning a 1-tuple => tuple(reduce)")
def _reduce_unary_variadic(ctx, a, init):
    """HandleReduce: a variadic reduce of one input becomes a plain reduce whose reducer
    returns the scalar, wrapped in a tuple."""
    red = ctx.inst
    comp = _untupled_reducer(ctx.module, red.to_apply)
    new = ctx.b.reduce(a, init, red.dimensions, comp)
    return ctx.b.tuple([new])


def _untupled_reducer(module, comp):
    """A copy of ``comp`` (``..., tuple(x)``) that returns ``x`` (XLA's CloneWithReplacements
    with the tuple dropped, suffix "clone")."""
    new = clone_computation(comp, {}, name=comp.name + ".clone")
    old_root = new.root
    new.root = old_root.operands[0]
    new.remove_instruction(old_root)
    module.add_computation(new, before=module.entry)
    return new


def _is_param(i, n) -> bool:
    return i.opcode == "parameter" and i.parameter_number == n


def _cmp(i, a, b, direction) -> bool:
    return (i.opcode == "compare" and i.comparison_direction == direction
            and _is_param(i.operands[0], a) and _is_param(i.operands[1], b))


def _value_pred(i, is_max) -> bool:
    """OrAnyOrder(Compare(p0, p2, GT or LT), Compare(p0, p0, NE))."""
    if i.opcode != "or":
        return False
    x, y = i.operands
    d = "GT" if is_max else "LT"
    return (_cmp(x, 0, 2, d) and _cmp(y, 0, 0, "NE")) or (_cmp(y, 0, 2, d) and _cmp(x, 0, 0, "NE"))


def _arg_min_max_reducer(comp, is_max) -> bool:
    """XLA's MatchArgMinMax on the reducer's root."""
    t = comp.root
    if t is None or t.opcode != "tuple" or len(t.operands) != 2:
        return False
    v, k = t.operands
    if not (v.opcode == "select" and _value_pred(v.operands[0], is_max)
            and _is_param(v.operands[1], 0) and _is_param(v.operands[2], 2)):
        return False
    if not (k.opcode == "select" and _is_param(k.operands[1], 1) and _is_param(k.operands[2], 3)):
        return False
    c = k.operands[0]
    if c.opcode != "or":
        return False

    def tie(i):
        return (i.opcode == "and" and _cmp(i.operands[0], 0, 2, "EQ")
                and _cmp(i.operands[1], 1, 3, "LT"))
    x, y = c.operands
    return (_value_pred(x, is_max) and tie(y)) or (_value_pred(y, is_max) and tie(x))


def _scalar_extreme(c, highest: bool) -> bool:
    """IsScalarConstantInf / IsScalarConstantNegInf: +-inf for floats, max/lowest for ints."""
    v = scalar_value(c) if c.opcode == "constant" else None
    if v is None or isinstance(v, (complex, bool)):
        return False
    t = c.shape.element_type
    return v == (max_value(t) if highest else min_value(t))


def _arg_min_max(red):
    """XLA's MatchArgMax / MatchArgMin: 'max', 'min' or None."""
    if not red.shape.is_tuple():
        return None
    init_v, init_i = red.operands[2], red.operands[3]
    if init_i.opcode != "constant" or scalar_value(init_i) != 0:
        return None
    if _scalar_extreme(init_v, False) and _arg_min_max_reducer(red.to_apply, True):
        return "max"
    if _scalar_extreme(init_v, True) and _arg_min_max_reducer(red.to_apply, False):
        return "min"
    return None


@r(P("reduce", P("broadcast", P("constant", name="c", pred=lambda i: i.shape.rank == 0)),
     P("iota", name="iota"), X(), X(), pred=lambda i: _arg_min_max(i) is not None),
   "arg-max/arg-min reduce of broadcast(C) => (broadcast(C), 0)", when=layout_free)
def _argminmax_of_bcast(ctx, c, iota):
    """HandleReduce: every element is C, so the first index wins."""
    red = ctx.inst
    if iota.attr("iota_dimension") not in red.dimensions:
        return None
    vs, ks = red.shape.tuple_shapes
    b = ctx.b
    return b.tuple([b.broadcast(c, vs.dims, ()),
                    b.broadcast(b.scalar(0, ks.element_type), ks.dims, ())])


# ---- reduce-window -------------------------------------------------------------------------
@r(P("reduce-window"), "reduce-window of/to zero elements => broadcast(init)")
def _rw_empty(ctx):
    rw = ctx.inst
    inputs, inits = _reduce_parts(rw)
    if inputs[0].shape.num_elements() != 0 and _result_shape(rw).num_elements() != 0:
        return None
    if rw.shape.is_tuple():
        return ctx.b.tuple([ctx.b.broadcast(i, s.dims, ())
                            for i, s in zip(inits, rw.shape.tuple_shapes)])
    return ctx.b.broadcast(inits[0], rw.shape.dims, ())


@r(P("reduce-window", X("x", pred=lambda i: i.shape.rank == 0), X("init")),
   "reduce-window of a scalar => A", exact=False)
def _rw_scalar(ctx, x, init):
    return x if is_reduction_identity(init, ctx.inst.to_apply) else None


def _window(rw):
    return rw.attr("window").dims


@r(P("reduce-window", X("x"), X("init")),
   "reduce-window with a 1x..x1 window => op(A, init) (+ pad)")
def _rw_trivial(ctx, x, init):
    rw = ctx.inst
    win = _window(rw)
    if not all(d.size == 1 and d.stride == 1 and d.window_dilation == 1 and
               d.base_dilation == 1 and not d.window_reversal for d in win):
        return None
    op = root_is_binary_of_params(rw.to_apply, ("add", "minimum", "maximum"))
    if op is None:
        return None
    bld = ctx.b
    new = bld.binary(op, x, bld.broadcast(init, x.shape.dims, ()))
    if any(d.padding_low > 0 or d.padding_high > 0 for d in win):
        new = bld.pad(new, init, [(d.padding_low, d.padding_high, 0) for d in win])
    return new


@r(P("reduce-window", X("x"), X("init")),
   "reduce-window whose windows span whole dims => reshape(reduce)", exact=False)
def _rw_to_reduce(ctx, x, init):
    rw = ctx.inst
    if not ctx.opts.enable_window_reduce_to_reduce_replacement or not _reassoc_float(ctx, rw):
        return None
    win = _window(rw)
    if any(d.stride != 1 or d.window_dilation != 1 or d.base_dilation != 1
           or d.padding_low or d.padding_high or d.window_reversal for d in win):
        return None
    dims = []
    for i, d in enumerate(win):
        if d.size == 1:
            continue
        if rw.shape.dims[i] == 1:
            dims.append(i)
        else:
            return None
    if not dims:
        return None
    red = ctx.b.reduce(x, init, dims, rw.to_apply)
    return ctx.b.reshape(red, rw.shape.dims)


def _trivial_window_dim(d) -> bool:
    return (d.size == 1 and d.stride == 1 and d.padding_low == 0 and d.padding_high == 0
            and d.base_dilation == 1 and d.window_dilation == 1 and not d.window_reversal)


_CUMSUM_PASS = frozenset(("reshape", "bitcast", "convert", "slice", "copy"))


@r(P("reduce-window", X("x"), X("init"), pred=lambda i: not i.shape.is_tuple()),
   "reduce-window prefix sum of broadcast(C) => broadcast(C) * (iota + 1)", exact=False)
def _rw_cumsum_of_constant(ctx, x, init):
    """HandleReduceWindow's cumsum of a broadcast constant: a window spanning the dimension,
    padded low by size-1 (a prefix sum), over copies of one constant C is C * count."""
    rw = ctx.inst
    real = x
    while real.opcode in _CUMSUM_PASS:
        real = real.operands[0]
    if real.opcode != "broadcast" or real.operands[0].shape.rank != 0:
        return None
    if init.opcode != "constant" or init.shape.num_elements() != 1 or \
            scalar_value(init) != 0 or not _is_add(rw.to_apply):
        return None
    val = real.operands[0]
    while val.opcode in ("convert", "reshape", "bitcast"):
        val = val.operands[0]
    if val.opcode != "constant" or val.literal.elided:
        return None
    reduction_dim = -1
    for i, d in enumerate(_window(rw)):
        if d.size > 1:
            if reduction_dim != -1:
                return None
            reduction_dim = i
            if (d.size != x.shape.dims[i] or d.stride != 1 or d.padding_low != d.size - 1
                    or d.padding_high != 0 or d.window_dilation != 1 or d.base_dilation != 1
                    or d.window_reversal):
                return None
        elif d.padding_low != 0 or d.padding_high != 0 or d.base_dilation != 1:
            return None
    if reduction_dim == -1:
        return None
    b = ctx.b
    et = rw.shape.element_type
    c = b.constant_array(np.asarray(val.literal.array).reshape(()), et)
    iota_type = "s64" if et == "s64" else "s32"
    count = b.binary("add", b.iota(iota_type, rw.shape.dims, reduction_dim),
                     b.scalar_like(Shape.array(iota_type, rw.shape.dims), 1))
    if et != iota_type:
        count = b.convert(count, et)
    return b.binary("multiply", b.broadcast(c, rw.shape.dims, ()), count)


def _literals_equivalent(pad_value, init) -> bool:
    """The pad value is the init value (the same instruction, or constants equal after
    converting the pad value to the init's type)."""
    if pad_value is init:
        return True
    if pad_value.opcode != "constant" or init.opcode != "constant" or \
            pad_value.literal.elided or init.literal.elided:
        return False
    a = np.asarray(pad_value.literal.array)
    bv = np.asarray(init.literal.array)
    if a.shape != bv.shape:
        return False
    with np.errstate(all="ignore"):
        conv = a.astype(bv.dtype)
    return conv.tobytes() == bv.tobytes()


@r(P("reduce-window", X("x", pred=lambda i: i.opcode in ("pad", "convert"),
                        hint={"pad", "convert"}), X("init"),
     pred=lambda i: not i.shape.is_tuple()),
   "reduce-window(pad(A, init)) => reduce-window(A) with the padding in the window")
def _rw_fold_pad(ctx, x, init):
    """HandleReduceWindow: a pad (possibly under a convert) whose value is the init value
    becomes window padding (interior padding becomes base dilation); a pad that leaves one
    real element per window of 1-sized dims is a broadcast."""
    rw = ctx.inst
    win = _window(rw)
    convert = None
    if x.opcode == "pad":
        pad = x
    elif x.opcode == "convert" and x.operands[0].opcode == "pad":
        convert, pad = x, x.operands[0]
        nontrivial = [i for i, d in enumerate(win) if not _trivial_window_dim(d)]
        if len(nontrivial) == 1:
            dim = nontrivial[0]
            lo, hi, _ = pad.attr("padding").dims[dim]
            if (lo + hi) / x.shape.dims[dim] < 0.1:
                return None
    else:
        return None
    cfg = [tuple(d) for d in pad.attr("padding").dims]
    if any(it for _, _, it in cfg) and any(d.base_dilation != 1 for d in win):
        return None
    if not _literals_equivalent(pad.operands[1], init):
        return None
    a = pad.operands[0]
    b = ctx.b
    new_operand = b.convert(a, convert.shape.element_type) if convert is not None else a

    def effective_broadcast():
        if any(d.stride != 1 for d in win):
            return False
        if any(lo != hi for lo, hi, _ in cfg) or any(it for _, _, it in cfg):
            return False
        for i, (lo, hi, _) in enumerate(cfg):
            if (lo or hi) and a.shape.dims[i] != 1:
                return False
        for i, ((lo, hi, _), d) in enumerate(zip(cfg, win)):
            if (lo or hi) and d.size < lo + 1:
                return False
            if a.shape.dims[i] != 1 and d.size != 1:
                return False
        return True

    if effective_broadcast():
        # XLA assumes the init value is the reducer's identity; we check it.
        if not is_reduction_identity(init, rw.to_apply):
            return None
        keep = [i for i, n in enumerate(new_operand.shape.dims) if n != 1]
        squeezed = b.reshape(new_operand, [new_operand.shape.dims[i] for i in keep]) \
            if len(keep) != new_operand.shape.rank else new_operand
        out_dims = [i for i in keep]
        return b.broadcast(squeezed, rw.shape.dims, out_dims)
    dims = []
    for (lo, hi, it), d in zip(cfg, win):
        dims.append(WindowDim(size=d.size, stride=d.stride,
                              padding_low=d.padding_low + d.base_dilation * lo,
                              padding_high=d.padding_high + d.base_dilation * hi,
                              base_dilation=(1 + it) if it else d.base_dilation,
                              window_dilation=d.window_dilation,
                              window_reversal=d.window_reversal))
    new = b.clone(rw, [new_operand, init])
    new.set_attr("window", Window(dims))
    return new


# ---- sort / map / gather / scatter --------------------------------------------------------
@r(P("sort"), "sort over a dimension of size <= 1 => its operand(s)")
def _sort_trivial(ctx):
    s = ctx.inst
    op = s.operands[0]
    d = s.dimensions[0]
    if op.shape.num_elements() != 0 and op.shape.dims[d] > 1:
        return None
    if len(s.operands) == 1:
        return op
    return ctx.b.tuple(s.operands)


@r(P("map"), "map whose computation returns a parameter => that operand")
def _map_param(ctx):
    m = ctx.inst
    root = m.to_apply.root
    if root.opcode != "parameter":
        return None
    return m.operands[root.parameter_number]


@r(P("map"), "map whose computation returns a constant => broadcast(constant)")
def _map_const(ctx):
    m = ctx.inst
    root = m.to_apply.root
    if root.opcode != "constant" or root.shape.rank != 0 or root.literal.elided:
        return None
    c = ctx.b.constant(root.literal)
    if m.shape.rank == 0:
        return c
    return ctx.b.broadcast(c, m.shape.dims, ())


@r(P("map"), "map of an elementwise op over parameters => the op")
def _map_inline(ctx):
    m = ctx.inst
    root = m.to_apply.root
    if root.opcode == "fusion" or not is_elementwise(root.opcode):
        return None
    if any(o.opcode != "parameter" for o in root.operands):
        return None
    ops = [m.operands[o.parameter_number] for o in root.operands]
    return ctx.b.clone(root, ops, m.shape.without_layout())


@r(P("gather", X("op"), X()), "gather from a zero-element operand => 0")
def _gather_empty(ctx, op):
    if op.shape.num_elements() != 0:
        return None
    return ctx.b.scalar_like(ctx.inst, 0)


@r(P("gather", X("op"), X()), "gather from an effective scalar => broadcast(scalar)")
def _gather_scalar(ctx, op):
    if op.shape.num_elements() != 1:
        return None
    s = op if op.shape.rank == 0 else ctx.b.reshape(op, ())
    return ctx.b.broadcast(s, ctx.inst.shape.dims, ())


@r(P("gather", X("op"), X("idx")), "gather from a tiny 1-D operand => select chain")
def _gather_small(ctx, op, idx):
    g = ctx.inst
    n = ctx.opts.very_small_gather_size
    if op.shape.rank != 1 or op.shape.dims[0] > n:
        return None
    dnums = g.gather_dimension_numbers
    if dnums.index_vector_dim != idx.shape.rank or len(dnums.collapsed_slice_dims) != 1:
        return None
    bld = ctx.b

    def value(i):
        sl = bld.slice(op, [i], [i + 1])
        return bld.broadcast(bld.reshape(sl, ()), g.shape.dims, ())
    # The index is broadcast along the gather's offset dims (none here: slice size 1
    # collapsed), so the result shape equals the index shape.
    if tuple(g.shape.dims) != tuple(idx.shape.dims):
        return None
    result = value(0)
    for i in range(op.shape.dims[0]):
        mask = bld.compare(idx, bld.scalar_like(idx, i), "GE")
        result = bld.select(mask, value(i), result)
    return result


def _gather_passthrough(g) -> dict:
    """hlo_sharding_util::GetGatherOperandPassthroughDims: operand dim -> output dim for the
    dims a gather copies whole (not collapsed or batching, slice size == operand size)."""
    op = g.operands[0]
    collapsed = set(g.attr("collapsed_slice_dims", ())) | set(g.attr("operand_batching_dims", ()))
    offset_dims = list(g.attr("offset_dims", ()))
    sizes = list(g.attr("slice_sizes", ()))
    out, k = {}, 0
    for i, n in enumerate(op.shape.dims):
        if i in collapsed:
            continue
        if k < len(offset_dims) and sizes[i] == n:
            out[i] = offset_dims[k]
        k += 1
    return out


def _padded_dims(pad):
    return [i for i, (lo, hi, it) in enumerate(pad.attr("padding").dims) if lo or hi or it]


def _gather_then_pad(ctx, g, source, pad, dim_of, passthrough, indices=None, batching=()):
    """gather(source) then pad: ``dim_of`` maps each padded dim of ``pad`` to the gathered
    operand's dim (the identity, or through a reshape); ``passthrough`` maps operand dims to
    output dims.  Padded explicit batching dims (``batching``) keep their slice size of 1
    and gather from the unpadded ``indices``."""
    cfg = pad.attr("padding").dims
    padded = _padded_dims(pad)
    dims = list(g.shape.dims)
    sizes = list(g.attr("slice_sizes", ()))
    out_cfg = [(0, 0, 0)] * g.shape.rank
    for p in padded:
        d = dim_of[p]
        n = pad.operands[0].shape.dims[p]
        dims[passthrough[d]] = n
        if d not in batching:
            sizes[d] = n
        out_cfg[passthrough[d]] = tuple(cfg[p])
    idx = indices if indices is not None else g.operands[1]
    new = ctx.b.clone(g, [source, idx], Shape.array(g.shape.element_type, dims))
    new.set_attr("slice_sizes", sizes)
    return ctx.b.pad(new, pad.operands[1], out_cfg)


def _batching_output_dims(g) -> dict:
    """GetStartIndicesDimToOutputDimForExplicitBatchingDims: start-indices batching dim ->
    output dim (the output's non-offset dims follow the indices' dims, index vector dim
    left out)."""
    offset = set(g.attr("offset_dims", ()))
    ivd = g.attr("index_vector_dim")
    batch_out = [d for d in range(g.shape.rank) if d not in offset]
    idx_dims = [d for d in range(g.operands[1].shape.rank) if d != ivd]
    by_idx = dict(zip(idx_dims, batch_out))
    return {d: by_idx[d] for d in g.attr("start_indices_batching_dims", ())}


@r(P("gather", P("pad", X("a"), X(), name="pad"), X()),
   "gather(pad(A)) over pass-through dims => pad(gather(A))")
def _gather_of_pad(ctx, a, pad):
    """HandleGather: a pad of dims the gather copies whole moves after the gather; so does
    a pad of explicit batching dims when the indices are padded the same way along their
    batching dims, and nowhere else (XLA's CheckPaddedDimsForGatherOfPad)."""
    g = ctx.inst
    passthrough = _gather_passthrough(g)
    padded = _padded_dims(pad)
    if not padded:
        return None
    op_batch = list(g.attr("operand_batching_dims", ()))
    idx_batch = list(g.attr("start_indices_batching_dims", ()))
    idx = g.operands[1]
    cfg = pad.attr("padding").dims
    batching = []
    for p in padded:
        if p in passthrough:
            continue
        if p not in op_batch or idx.opcode != "pad":
            return None
        d = idx_batch[op_batch.index(p)]
        if tuple(idx.attr("padding").dims[d]) != tuple(cfg[p]):
            return None
        batching.append(p)
    if not batching:
        return _gather_then_pad(ctx, g, a, pad, {p: p for p in padded}, passthrough)
    if len(batching) != len(_padded_dims(idx)):
        return None  # the indices are padded along other dims too
    out_of = _batching_output_dims(g)
    mapping = dict(passthrough)
    for p in batching:
        mapping[p] = out_of[idx_batch[op_batch.index(p)]]
    return _gather_then_pad(ctx, g, a, pad, {p: p for p in padded}, mapping,
                            indices=idx.operands[0], batching=set(batching))


@r(P("gather", P("reshape", P("pad", X("a"), X(), name="pad"), name="rs"), X()),
   "gather(reshape(pad(A))) over pass-through dims => pad(gather(reshape(A)))",
   when=layout_free)
def _gather_of_reshape_pad(ctx, a, pad, rs):
    """HandleGather: the same through a reshape that leaves the padded dims alone."""
    g = ctx.inst
    unmodified = dict(dims_unmodified_by_reshape(pad.shape.dims, rs.shape.dims))
    padded = _padded_dims(pad)
    if not padded or any(p not in unmodified for p in padded):
        return None
    passthrough = _gather_passthrough(g)
    if any(unmodified[p] not in passthrough for p in padded):
        return None
    dims = list(rs.shape.dims)
    for p in padded:
        dims[unmodified[p]] = a.shape.dims[p]
    source = ctx.b.reshape(a, dims)
    return _gather_then_pad(ctx, g, source, pad, {p: unmodified[p] for p in padded},
                            passthrough)


@r(P("scatter"), "scatter with only zero-element updates => its operand(s)")
def _scatter_empty(ctx):
    s = ctx.inst
    n = (len(s.operands) - 1) // 2
    ops, upds = s.operands[:n], s.operands[n + 1:]
    if not all(u.shape.num_elements() == 0 for u in upds):
        return None
    if n == 1:
        return ops[0]
    return ctx.b.tuple(ops)


RULES = Rules(r)
