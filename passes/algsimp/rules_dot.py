"""algsimp rules for dot and convolution."""
from __future__ import annotations

import copy

from hlo_opt.ir.attributes import Window, WindowDim
from hlo_opt.ir.types import is_float, is_integral

from hlo_opt.rewrite.builder import dot_dims, dot_extra_attrs, scalar_computation
from hlo_opt.rewrite.rules import P, RuleList, Rules, X
from hlo_opt.analysis.shape_util import dims_unmodified_by_reshape
from .options import layout_free
from .predicates import inverse_perm, is_all

r = RuleList()


def _supported_precision(dot) -> bool:
    alg = dot.attrs.get("algorithm")
    return alg is None or alg in ("dot_f32_f32_f32", "ALG_DOT_F32_F32_F32")


def _normalize(bld, operand, batch, contracting):
    """Transpose to batch-major, contracting-minor order (XLA's
    NormalizeDotOperandToBatchMajorAndContractingMinor)."""
    perm = list(batch) + [i for i in range(operand.shape.rank)
                          if i not in batch and i not in contracting] + list(contracting)
    return bld.maybe_transpose(operand, perm)


def _has_zero_elements(d) -> bool:
    lhs, rhs = d.operands
    return not (d.shape.num_elements() and lhs.shape.num_elements()
                and rhs.shape.num_elements())


@r(P("dot", X("lhs"), X("rhs"), pred=_has_zero_elements), "dot with zero elements => 0",
   when=layout_free)
def _dot_empty(ctx, lhs, rhs):
    return ctx.b.scalar_like(ctx.inst, 0)


def _no_contracting_dims(d) -> bool:
    return not d.dot_dimension_numbers.lhs_contracting_dims


@r(P("dot", X("lhs"), X("rhs"), pred=_no_contracting_dims),
   "dot without contracting dims => multiply(broadcasts)", exact=False,
   when=lambda o: not o.is_layout_sensitive and o.enable_dot_to_multiply_rewrite)
def _dot_outer(ctx, lhs, rhs):  # (exact=False: a dot accumulates from +0: -0 comes out +0)
    d = ctx.inst
    lb, lc, rb, rc = dot_dims(d)
    if not _supported_precision(d):
        return None
    bld = ctx.b
    et = d.shape.element_type
    nl = bld.convert(_normalize(bld, lhs, lb, lc), et)
    nr = bld.convert(_normalize(bld, rhs, rb, rc), et)
    if d.shape.rank != lhs.shape.rank:
        nl = bld.broadcast(nl, d.shape.dims, range(lhs.shape.rank))
    if d.shape.rank != rhs.shape.rank:
        dims = list(range(len(lb))) + list(range(lhs.shape.rank, d.shape.rank))
        nr = bld.broadcast(nr, d.shape.dims, dims)
    return bld.binary("multiply", nl, nr)


def _one_side_batch_and_contracting_only(d) -> bool:
    dnums = d.dot_dimension_numbers
    lc = dnums.lhs_contracting_dims
    if not lc:
        return False
    lhs, rhs = d.operands
    return (len(dnums.lhs_batch_dims) + len(lc) == lhs.shape.rank
            or len(dnums.rhs_batch_dims) + len(dnums.rhs_contracting_dims)
            == rhs.shape.rank)


@r(P("dot", X("lhs"), X("rhs"), pred=_one_side_batch_and_contracting_only),
   "dot where one side has only batch+contracting dims => reduce(multiply)", exact=False,
   when=lambda o: not o.is_layout_sensitive and o.enable_dot_strength_reduction)
def _dot_strength_reduce(ctx, lhs, rhs):
    d = ctx.inst
    o = ctx.opts
    if not _supported_precision(d):
        return None
    lb, lc, rb, rc = dot_dims(d)
    l_only = len(lb) + len(lc) == lhs.shape.rank
    r_only = len(rb) + len(rc) == rhs.shape.rank
    if o.executing_on_cpu and not (l_only and r_only):
        return None
    if is_float(d.shape.element_type) and not o.float_reassociation:
        return None
    bld = ctx.b
    et = d.shape.element_type
    # XLA multiplies in the dot's type and accumulates in f32; we multiply in the
    # accumulation type too, so narrow floats (bf16, f8) do not round every product.
    acc = ("f64" if et == "f64" else "f32") if is_float(et) else et
    nl = bld.convert(_normalize(bld, lhs, lb, lc), acc)
    nr = bld.convert(_normalize(bld, rhs, rb, rc), acc)
    nb = len(lb)
    l_outer = lhs.shape.rank - nb - len(lc)
    r_outer = rhs.shape.rank - nb - len(rc)
    if r_outer > 0:
        dims = list(range(nb)) + list(range(nb + r_outer, nb + r_outer + len(lc)))
        nl = bld.broadcast(nl, nr.shape.dims, dims)
    elif l_outer > 0:
        dims = list(range(nb)) + list(range(nb + l_outer, nb + l_outer + len(rc)))
        nr = bld.broadcast(nr, nl.shape.dims, dims)
    prod = bld.binary("multiply", nl, nr)
    outer = max(l_outer, r_outer)
    rdims = list(range(nb + outer, nb + outer + len(lc)))
    add = scalar_computation(ctx.module, "add", acc)
    red = bld.reduce(prod, bld.scalar(0, acc), rdims, add)
    return bld.convert(red, et)


def _reshape_of_transpose_and_constant(d) -> bool:
    a, b = d.operands
    return ((a.opcode == "reshape" and a.operands[0].opcode == "transpose"
             and b.opcode == "constant")
            or (b.opcode == "reshape" and b.operands[0].opcode == "transpose"
                and a.opcode == "constant"))


@r(P("dot", X("lhs"), X("rhs"), pred=_reshape_of_transpose_and_constant),
   "dot(reshape(transpose(A)), C) => dot(reshape(A), reshape(transpose(reshape(C))))",
   exact=False, when=layout_free)
def _dot_reorder_contracting(ctx, lhs, rhs):
    """XLA's OptimizeDotOfReorderContractingDims: a transpose that only permutes the dims
    a reshape squishes into the one contracting dim moves to the constant side (where
    constant folding absorbs it): the sum runs over the same products in another order."""
    d = ctx.inst
    if _unreduced(d):
        return None
    lb, lc, rb, rc = dot_dims(d)
    swapped = lhs.opcode == "constant"
    if swapped:
        lhs, rhs, lc, rc = rhs, lhs, rc, lc
    if len(lc) != 1:
        return None
    reshape, transpose = lhs, lhs.operands[0]
    inp = transpose.operands[0]
    unmodified = dims_unmodified_by_reshape(transpose.shape.dims, reshape.shape.dims)
    if len(unmodified) != reshape.shape.rank - 1 or any(to == lc[0] for _, to in unmodified):
        return None
    kept = {frm for frm, _ in unmodified}
    block = [i for i in range(transpose.shape.rank) if i not in kept]
    if any(b - a != 1 for a, b in zip(block, block[1:])):
        return None
    perm = list(transpose.dimensions)
    if any(p != i and i not in block for i, p in enumerate(perm)):
        return None
    s, k = block[0], len(block)
    bld = ctx.b
    new_lhs = bld.reshape(inp, reshape.shape.dims)
    r0 = rc[0]
    cdims = list(rhs.shape.dims)
    unsquished = cdims[:r0] + [transpose.shape.dims[i] for i in block] + cdims[r0 + 1:]
    c1 = bld.reshape(rhs, unsquished)
    inv = inverse_perm(perm)
    tperm = list(range(len(unsquished)))
    tperm[r0:r0 + k] = [inv[i] - s + r0 for i in block]
    c2 = bld.transpose(c1, tperm)
    new_rhs = bld.reshape(c2, rhs.shape.dims)
    if swapped:
        new_lhs, new_rhs = new_rhs, new_lhs
    return bld.clone(d, [new_lhs, new_rhs])


def _operand_with_1_sized_dim(d) -> bool:
    lhs, rhs = d.operands
    return 1 in lhs.shape.dims or 1 in rhs.shape.dims


@r(P("dot", X("lhs"), X("rhs"), pred=_operand_with_1_sized_dim),
   "dot of operands with 1-sized dims => dot without them", when=layout_free)
def _dot_degenerate(ctx, lhs, rhs):
    d = ctx.inst
    ls, rs = lhs.shape.dims, rhs.shape.dims

    def mapping(dims):
        out, n = [], 0
        for x in dims:
            if x == 1:
                out.append(-1)
            else:
                out.append(n)
                n += 1
        return out
    lm, rm = mapping(ls), mapping(rs)
    lb, lc, rb, rc = dot_dims(d)
    nlb = [lm[x] for x in lb if lm[x] != -1]
    nlc = [lm[x] for x in lc if lm[x] != -1]
    nrb = [rm[x] for x in rb if rm[x] != -1]
    nrc = [rm[x] for x in rc if rm[x] != -1]
    if len(nlb) != len(nrb) or len(nlc) != len(nrc):
        return None
    bld = ctx.b
    nl = bld.reshape(lhs, [x for x in ls if x != 1]) if 1 in ls else lhs
    nr = bld.reshape(rhs, [x for x in rs if x != 1]) if 1 in rs else rhs
    nd = bld.dot(nl, nr, nlb, nlc, nrb, nrc, d.shape.element_type, dot_extra_attrs(d))
    if nd.shape.same_dims_and_type(d.shape):
        return nd
    return bld.reshape(nd, d.shape.dims)


def _unreduced(dot) -> bool:
    """Whether the dot's value carries an ``unreduced`` sharding: its own, or that of a
    ``Sharding`` custom-call reading it.  XLA leaves such a dot's operands alone."""
    if "unreduced" in str(dot.attrs.get("sharding", "")):
        return True
    return any(u.opcode == "custom-call" and u.custom_call_target == "Sharding"
               and "unreduced" in str(u.attrs.get("sharding", "")) for u in dot.users)


@r(P("dot", P("transpose", X("a"), name="lt"), P("transpose", X("b"), name="rt")),
   "dot(transpose(A), transpose(B)) => transpose(dot(A, B) or dot(B, A))", exact=False)
def _dot_transposes(ctx, a, lt, b, rt):
    d = ctx.inst
    if ctx.opts.is_layout_sensitive or tuple(lt.dimensions) != tuple(rt.dimensions):
        return None
    if _unreduced(d):
        return None  # an unreduced (partial-sum) result: its sharding names d's own dims
    perm = list(lt.dimensions)
    lb, lc, rb, rc = dot_dims(d)
    rank = d.shape.rank
    if lb != rb or len(lc) != 1 or len(rc) != 1 or lc[0] != rank - 1 or rc[0] != rank - 2 \
            or rank != len(lb) + 2:
        return None
    tail = perm[rank - 2:]
    if tail == [rank - 2, rank - 1]:
        reorder = False
    elif tail == [rank - 1, rank - 2]:
        reorder = True
    else:
        return None
    nl, nr = (b, a) if reorder else (a, b)
    nd = ctx.b.dot(nl, nr, lb, lc, rb, rc, d.shape.element_type,
                   dot_extra_attrs(d, swap=reorder))
    return ctx.b.transpose(nd, perm)


# ---- convolution ------------------------------------------------------------------------
@r(P("convolution", X("lhs"), X("rhs")), "convolution with a zero-element operand => 0")
def _conv_empty(ctx, lhs, rhs):
    if lhs.shape.num_elements() and rhs.shape.num_elements():
        return None
    return ctx.b.scalar_like(ctx.inst, 0)


def _conv_with_window(ctx, conv, operands, window):
    new = ctx.b.clone(conv, operands)
    new.set_attr("window", window)
    return new


@r(P("convolution", P("pad", X("a"), X("z", pred=lambda i: i.opcode == "constant"
                                         and i.shape.rank == 0 and is_all(i, 0)),
                      name="pad"), X("b")),
   "convolution(pad(A, 0), B) => convolution(A, B) with the padding in the window")
def _conv_fold_input_pad(ctx, a, z, pad, b):
    conv = ctx.inst
    if not ctx.opts.enable_folding_pad_into_convolution:
        return None
    dn = conv.attr("dim_labels")
    cfg = [tuple(x) for x in pad.attr("padding").dims]
    for dim in (dn.input_batch, dn.input_feature):
        if any(cfg[dim]):
            return None
    window = copy.deepcopy(conv.attr("window"))
    for i, w in enumerate(window.dims):
        lo, hi, it = cfg[dn.input_spatial[i]]
        if it and (w.padding_low or w.padding_high or w.base_dilation != 1):
            return None
        if w.base_dilation != 1 and (lo or hi or it):
            return None
        w.padding_low += lo
        w.padding_high += hi
        if it:
            w.base_dilation = 1 + it
    return _conv_with_window(ctx, conv, [a, b], window)


@r(P("convolution", X("lhs"), P("pad", X("k"), X("z"), name="pad")),
   "convolution(A, pad(K, 0) interior) => convolution(A, K) with window dilation",
   exact=False)
def _conv_fold_filter_pad(ctx, lhs, k, z, pad):
    conv = ctx.inst
    if not ctx.opts.enable_folding_pad_into_convolution or not is_all(z, 0):
        return None
    if not (is_integral(conv.shape.element_type) or ctx.opts.approximate_float_rewrites):
        return None  # the padded zeros times an inf input give nan; dilation skips them
    dn = conv.attr("dim_labels")
    cfg = [tuple(x) for x in pad.attr("padding").dims]
    for dim in (dn.kernel_input_feature, dn.kernel_output_feature):
        if any(cfg[dim]):
            return None
    window = copy.deepcopy(conv.attr("window"))
    for i, w in enumerate(window.dims):
        lo, hi, it = cfg[dn.kernel_spatial[i]]
        if lo or hi:
            return None
        if it == 0:
            continue
        if w.window_dilation > 1:
            return None
        w.window_dilation = 1 + it
        w.size = k.shape.dims[dn.kernel_spatial[i]]
    return _conv_with_window(ctx, conv, [lhs, k], window)


@r(P("convolution", X("inp"), X("ker")),
   "convolution whose kernel is larger than its input => convolution(kernel, input)",
   exact=False, when=lambda o: o.enable_conv_operand_swap and not o.is_layout_sensitive)
def _conv_swap_operands(ctx, inp, ker):
    """XLA's SwapConvOperands (conv_operand_swapper): when the product of the window sizes
    exceeds that of the input's spatial sizes, the kernel slides over the input instead
    (the kernel reversed, base and window dilation exchanged, the padding mirrored).
    Inexact: the sums run in another order, and the implicit zero padding now multiplies
    the other operand (0 * inf is nan at other positions)."""
    conv = ctx.inst
    if int(conv.attrs.get("feature_group_count", "1")) > 1 or \
            int(conv.attrs.get("batch_group_count", "1")) > 1:
        return None
    dn = conv.attr("dim_labels")
    if "?" in dn.text:
        return None
    win = conv.attr("window").dims
    new_dims = []
    reverse_dims = []
    kernel_product = swapped_product = 1
    for i, w in enumerate(win):
        k = w.size
        can = (not w.window_reversal and w.padding_low == 0 and w.padding_high == 0
               and w.window_dilation == 1)
        is_group = can and w.base_dilation == k and w.stride == k - 1
        n = inp.shape.dims[dn.input_spatial[i]]
        is_contraction = k == n and can and w.base_dilation == 1 and w.stride == 1
        if is_group or is_contraction:
            new_dims.append(copy.deepcopy(w))
            continue
        dk = 1 + (k - 1) * w.window_dilation
        dn_in = 1 + (n - 1) * w.base_dilation
        kernel_product *= k
        swapped_product *= k if (n == 1 and w.stride == 1 and w.window_dilation == 1
                                 and w.padding_high == k - 1
                                 and w.padding_low == k - 1) else n
        if not w.window_reversal:
            reverse_dims.append(dn.kernel_spatial[i])
        new_dims.append(WindowDim(size=n, stride=w.stride,
                                  padding_low=dn_in + w.padding_low - dk,
                                  padding_high=dn_in + w.padding_high - dk,
                                  base_dilation=w.window_dilation,
                                  window_dilation=w.base_dilation, window_reversal=True))
    if kernel_product <= swapped_product:
        return None
    # The kernel is the new input (its output features the batch), the input the new
    # kernel, and the output's batch and feature dims trade places.
    labels = dn.with_(input_batch=dn.kernel_output_feature,
                      input_feature=dn.kernel_input_feature, input_spatial=dn.kernel_spatial,
                      kernel_input_feature=dn.input_feature, kernel_output_feature=dn.input_batch,
                      kernel_spatial=dn.input_spatial, output_batch=dn.output_feature,
                      output_feature=dn.output_batch)
    b = ctx.b
    kernel = b.reverse(ker, sorted(reverse_dims)) if reverse_dims else ker
    new = b.clone(conv, [kernel, inp])
    new.set_attr("window", Window(new_dims))
    new.set_attr("dim_labels", labels)
    prec = dot_extra_attrs(conv, swap=True).get("operand_precision")
    if prec is not None:
        new.set_attr("operand_precision", prec)
    return new


def _broadcast_sequence(bld, operand, shape):
    """XLA's CreateBroadcastSequence: drop the 1-sized dims that must grow, then broadcast."""
    keep = [i for i, (a, b) in enumerate(zip(operand.shape.dims, shape.dims)) if a == b]
    if len(keep) != operand.shape.rank:
        operand = bld.reshape(operand, [operand.shape.dims[i] for i in keep])
    return bld.broadcast(operand, shape.dims, keep)


@r(P("convolution", X("inp"), X("ker")),
   "depthwise convolution with a trivial window => reduce(input * broadcast(kernel))",
   exact=False)
def _conv_to_multiply(ctx, inp, ker):
    conv = ctx.inst
    if ctx.opts.is_layout_sensitive or "operand_precision" in conv.attrs:
        return None
    if int(conv.attrs.get("batch_group_count", "1")) != 1:
        return None
    dn = conv.attr("dim_labels")
    ks, cs = ker.shape.dims, conv.shape.dims
    for i in range(len(dn.output_spatial)):
        if ks[dn.kernel_spatial[i]] != 1 and cs[dn.output_spatial[i]] != 1:
            return None
    win = conv.attr("window").dims
    if any(w.stride != 1 or w.padding_low or w.padding_high or w.base_dilation != 1
           or w.window_dilation != 1 or w.window_reversal for w in win):
        return None
    fgc = int(conv.attrs.get("feature_group_count", "1"))
    if ks[dn.kernel_input_feature] != 1 or inp.shape.dims[dn.input_feature] != fgc \
            or cs[dn.output_feature] != fgc:
        return None
    et = conv.shape.element_type
    if is_float(et) and not ctx.opts.float_reassociation:
        return None
    rank = inp.shape.rank
    ip, kp = [0] * rank, [0] * rank
    ip[dn.output_batch], ip[dn.output_feature] = dn.input_batch, dn.input_feature
    kp[dn.output_batch], kp[dn.output_feature] = dn.kernel_input_feature, \
        dn.kernel_output_feature
    rdims = []
    for i, od in enumerate(dn.output_spatial):
        ip[od] = dn.input_spatial[i]
        kp[od] = dn.kernel_spatial[i]
        if ks[dn.kernel_spatial[i]] != 1:
            rdims.append(od)
    bld = ctx.b
    x = bld.convert(bld.maybe_transpose(inp, ip), et)
    k = bld.convert(bld.maybe_transpose(ker, kp), et)
    k = _broadcast_sequence(bld, k, x.shape)
    res = bld.binary("multiply", x, k)
    if rdims:
        add = scalar_computation(ctx.module, "add", et)
        res = bld.reshape(bld.reduce(res, bld.scalar(0, et), rdims, add), cs)
    return res


RULES = Rules(r)
