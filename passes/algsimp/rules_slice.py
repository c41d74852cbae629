"""algsimp rules for slicing and padding: slice concatenate pad dynamic-slice
dynamic-update-slice."""
from __future__ import annotations

from hlo_opt.ir.types import is_integral

from hlo_opt.rewrite.rules import P, RuleList, Rules, X
from hlo_opt.analysis.shape_util import dims_unmodified_by_reshape, inserted_or_deleted_1_dims
from .options import layout_free
from .predicates import has_single_use, inverse_perm, is_all, scalar_value

r = RuleList()


def _spec(inst):
    s = inst.attr("slice")
    return list(s.starts), list(s.limits), list(s.strides)


def _unstrided(inst):
    return all(st == 1 for st in inst.attr("slice").strides)


def _padding(inst):
    return [tuple(d) for d in inst.attr("padding").dims]


# ---- slice ------------------------------------------------------------------------------
@r(P("slice", X("x")), "slice(A) => A when it keeps everything")
def _slice_nop(ctx, x):
    return x


@r(P("slice", P("pad", X("a"), X("v"), name="pad")), "slice(pad(A)) => A, slice(A) or bcast(v)")
def _slice_pad(ctx, a, v, pad):
    starts, limits, strides = _spec(ctx.inst)
    cfg = _padding(pad)
    undoes = inside = True
    new_starts, new_limits = list(starts), list(limits)
    for i in range(ctx.inst.shape.rank):
        start, stride, limit = starts[i], strides[i], limits[i]
        size = pad.shape.dims[i]
        low, high, interior = cfg[i]
        edge = size - high
        if limit <= low or start >= edge:
            return ctx.b.broadcast(v, ctx.inst.shape.dims, ())
        if start != low or stride - 1 != interior:
            undoes = False
        if start < low or limit > edge or interior != 0 or stride != 1:
            inside = False
        new_starts[i] -= low
        new_limits[i] -= low
    if undoes and a.shape.same_dims_and_type(ctx.inst.shape):
        return a
    if inside:
        return ctx.b.slice(a, new_starts, new_limits, strides)
    return None


@r(P("slice", P("slice", X("a"), name="inner")), "slice(slice(A)) => slice(A)")
def _slice_slice(ctx, a, inner):
    if not (_unstrided(ctx.inst) and _unstrided(inner)):
        return None
    starts, limits, _ = _spec(ctx.inst)
    istarts = _spec(inner)[0]
    return ctx.b.slice(a, [s + o for s, o in zip(starts, istarts)],
                       [l + o for l, o in zip(limits, istarts)])


@r(P("slice", P("concatenate", name="cat")), "scalar slice(concat(...)) => operand or its slice")
def _slice_scalar_concat(ctx, cat):
    s = ctx.inst
    if s.shape.num_elements() != 1 or s.shape.rank != 1:
        return None
    start = _spec(s)[0][0]
    off = 0
    for op in cat.operands:
        n = op.shape.dims[0]
        if off + n > start:
            if op.shape.same_dims_and_type(s.shape):
                return op
            return ctx.b.slice(op, [start - off], [start - off + 1], _spec(s)[2])
        off += n
    return None


@r(P("slice", P("broadcast", X("a"), name="bc")), "slice(broadcast(A)) => broadcast(slice(A))")
def _slice_bcast(ctx, a, bc):
    starts, limits, strides = _spec(ctx.inst)
    bdims = bc.dimensions
    if all(starts[d] == 0 and strides[d] == 1 and limits[d] == bc.shape.dims[d] for d in bdims):
        return ctx.b.broadcast(a, ctx.inst.shape.dims, bdims)
    ns = ctx.b.slice(a, [starts[d] for d in bdims], [limits[d] for d in bdims],
                     [strides[d] for d in bdims])
    return ctx.b.broadcast(ns, ctx.inst.shape.dims, bdims)


@r(P("slice", P("concatenate", name="cat")), "slice(concat(...)) => operand or slice(sub-concat)")
def _slice_concat(ctx, cat):
    s = ctx.inst
    if not _unstrided(s):
        return None
    d = cat.dimensions[0]
    starts, limits, strides = _spec(s)
    lo, hi = starts[d], limits[d]
    piece = 0
    first = last = None
    cat_start = 0
    for i, op in enumerate(cat.operands):
        n = op.shape.dims[d]
        if first is None and piece <= lo < piece + n:
            first, cat_start = i, piece
        piece += n
        if last is None and piece >= hi:
            last = i + 1
            break
    if first is None or last is None:
        return None
    if first + 1 == last and ctx.opts.same_shape(cat.operands[first].shape, s.shape):
        return cat.operands[first]
    if last - first >= len(cat.operands):
        return None
    new_starts, new_limits = list(starts), list(limits)
    new_starts[d] = lo - cat_start
    new_limits[d] = new_starts[d] + s.shape.dims[d]
    operand = cat.operands[first]
    if first + 1 != last:
        operand = ctx.b.concatenate(cat.operands[first:last], d)
    return ctx.b.slice(operand, new_starts, new_limits, strides)


@r(P("slice", P("reshape", X("a"), name="rs")), "slice(reshape(A)) => reshape(slice(A))")
def _slice_reshape(ctx, a, rs):
    s = ctx.inst
    if ctx.opts.is_layout_sensitive or not _unstrided(s):
        return None
    starts, limits, _ = _spec(s)
    rank = s.shape.rank
    sliced = [i for i in range(rank) if starts[i] != 0 or limits[i] != rs.shape.dims[i]]
    if sliced != [0]:
        return None
    src = list(a.shape.dims)
    orank = len(src)
    sub = 1
    for i in range(1, rank):
        sub *= rs.shape.dims[i]
    start_off = starts[0] * sub
    n = s.shape.num_elements()
    osub = 1
    for i in range(1, orank):
        osub *= src[i]
    if osub == 0 or start_off % osub or n % osub:
        return None
    ns, nl = [0] * orank, list(src)
    for i in range(orank - 1, -1, -1):
        size = src[i]
        if n >= size:
            if n % size or start_off % size:
                return None
            n //= size
            start_off //= size
        else:
            sid = start_off % size
            if sid + n > size:
                return None
            ns[i], nl[i] = sid, sid + n
            start_off //= size
            n = 1
    if start_off != 0 or n != 1:
        return None
    return ctx.b.reshape(ctx.b.slice(a, ns, nl), s.shape.dims)


@r(P("slice", P("reverse", X("a"), name="rev")), "slice(reverse(A)) => reverse(slice(A))")
def _slice_reverse(ctx, a, rev):
    starts, limits, strides = _spec(ctx.inst)
    ns, nl = list(starts), list(limits)
    for d in rev.dimensions:
        start, limit, stride = starts[d], limits[d], strides[d]
        nth = start + ((limit - start - 1) // stride) * stride
        limit = nth + 1
        size = rev.shape.dims[d]
        ns[d] = (size - start) - (limit - start)
        nl[d] = size - start
    return ctx.b.reverse(ctx.b.slice(a, ns, nl, strides), rev.dimensions)


@r(P("slice", X("x")), "slice stride that can take one element => stride 1")
def _slice_stride(ctx, x):
    starts, limits, strides = _spec(ctx.inst)
    change = [i for i in range(len(starts)) if strides[i] != 1
              and (strides[i] >= limits[i] or starts[i] + strides[i] >= limits[i])]
    if not change:
        return None
    nl, nst = list(limits), list(strides)
    for i in change:
        nl[i] = starts[i] + 1
        nst[i] = 1
    return ctx.b.slice(x, starts, nl, nst)


# ---- slice of reduce-window ----------------------------------------------------------------
@r(P("slice", P("reduce-window", X("a"), X("init"), name="rw",
                pred=lambda i: not i.shape.is_tuple() and has_single_use(i))),
   "slice(reduce-window) of the last full windows => reshape(reduce)", exact=False)
def _slice_reduce_window(ctx, a, init, rw):
    """HandleSlice: a padded reduce-window (no stride or dilation) sliced to its last
    window along dims whose window spans the dim (and kept whole along size-1 windows) is a
    reduce over those dims, reshaped."""
    s = ctx.inst
    if not ctx.opts.enable_window_reduce_to_reduce_replacement or not _unstrided(s):
        return None
    t = rw.shape.element_type
    if not (is_integral(t) or t == "pred" or ctx.opts.float_reassociation):
        return None
    win = rw.attr("window").dims
    if any(d.stride != 1 or d.base_dilation != 1 or d.window_dilation != 1 for d in win) or \
            not any(d.padding_low or d.padding_high for d in win):
        return None
    starts, limits, _ = _spec(s)
    dims = []
    for i, d in enumerate(win):
        n = rw.shape.dims[i]
        if n != limits[i] or d.padding_low != starts[i] or d.padding_high != 0:
            return None
        if d.size == 1 and n == s.shape.dims[i] and starts[i] == 0:
            continue
        if s.shape.dims[i] == 1 and n == d.size and limits[i] - starts[i] == 1:
            dims.append(i)
        else:
            return None
    if not dims:
        return None
    red = ctx.b.reduce(a, init, dims, rw.to_apply)
    return ctx.b.reshape(red, s.shape.dims)


# ---- concatenate ----------------------------------------------------------------------
@r(P("concatenate", X("x")), "concatenate(A) => A")
def _concat_single(ctx, x):
    return x


@r(P("concatenate"), "concatenate drops zero-element operands")
def _concat_empty(ctx):
    ops = ctx.inst.operands
    nonempty = [o for o in ops if o.shape.num_elements() != 0]
    if len(nonempty) == len(ops):
        return None
    if not nonempty:
        return ops[0]
    if len(nonempty) == 1:
        return nonempty[0]
    return ctx.b.concatenate(nonempty, ctx.inst.dimensions[0])


@r(P("concatenate"), "concatenate(A, concatenate(B, C)) => concatenate(A, B, C)", when=layout_free)
def _concat_flatten(ctx):
    d = ctx.inst.dimensions[0]
    out = []
    for o in ctx.inst.operands:
        if o.opcode == "concatenate" and o.dimensions[0] == d:
            out.extend(o.operands)
        else:
            out.append(o)
    if len(out) == len(ctx.inst.operands):
        return None
    return ctx.b.concatenate(out, d)


@r(P("concatenate"), "concatenate(slice(A), slice(A)) of adjacent slices => slice(A)",
   when=layout_free)
def _concat_adjacent_slices(ctx):
    d = ctx.inst.dimensions[0]
    ops = ctx.inst.operands
    new_ops = []
    i = 0
    merged = False
    while i < len(ops):
        o = ops[i]
        if o.opcode != "slice" or not _unstrided(o):
            new_ops.append(o)
            i += 1
            continue
        ostarts, olimits, _ = _spec(o)
        end = olimits[d]
        j = i + 1
        while j < len(ops):
            n = ops[j]
            if n.opcode != "slice" or not _unstrided(n) or n.operands[0] is not o.operands[0]:
                break
            ns, nl, _ = _spec(n)
            if ns[d] != end or any(ns[k] != ostarts[k] for k in range(len(ns)) if k != d):
                break
            end = nl[d]
            j += 1
        if j - i > 1:
            lim = list(olimits)
            lim[d] = end
            new_ops.append(ctx.b.slice(o.operands[0], ostarts, lim))
            merged = True
        else:
            new_ops.append(o)
        i = j
    if not merged:
        return None
    if len(new_ops) == 1:
        return new_ops[0]
    return ctx.b.concatenate(new_ops, d)


def _bcast_of_scalar(i):
    return i.opcode == "broadcast" and i.operands[0].shape.rank == 0


@r(P("concatenate", X("a"), X("b")), "concatenate(bcast(s), A) => pad(A, s)", when=layout_free)
def _concat_to_pad(ctx, a, b):
    low = _bcast_of_scalar(a)
    high = _bcast_of_scalar(b)
    if not (low or high):
        return None
    d = ctx.inst.dimensions[0]
    cfg = [(0, 0, 0)] * a.shape.rank
    if low:
        cfg[d] = (a.shape.dims[d], 0, 0)
        return ctx.b.pad(b, a.operands[0], cfg)
    cfg[d] = (0, b.shape.dims[d], 0)
    return ctx.b.pad(a, b.operands[0], cfg)


@r(P("concatenate"), "concatenate(A, A, ..., A) of 1-sized dim => broadcast(reshape(A))",
   when=layout_free)
def _concat_repeat(ctx):
    ops = ctx.inst.operands
    d = ctx.inst.dimensions[0]
    if len(ops) < 2 or any(o is not ops[0] for o in ops) or ops[0].shape.dims[d] != 1:
        return None
    dims = [x for i, x in enumerate(ops[0].shape.dims) if i != d]
    rs = ctx.b.reshape(ops[0], dims)
    return ctx.b.broadcast(rs, ctx.inst.shape.dims, [i for i in range(ctx.inst.shape.rank)
                                                     if i != d])


# ---- pad --------------------------------------------------------------------------------
@r(P("pad", X("a", pred=lambda i: i.shape.num_elements() == 0), X("v")),
   "pad(zero-element A, v) => broadcast(v)")
def _pad_empty(ctx, a, v):
    return ctx.b.broadcast(v, ctx.inst.shape.dims, ())


@r(P("pad", X("a"), X("v")), "interior padding of 1-sized dims => none")
def _pad_interior1(ctx, a, v):
    cfg = _padding(ctx.inst)
    new = [(lo, hi, 0 if (it and a.shape.dims[i] == 1) else it)
           for i, (lo, hi, it) in enumerate(cfg)]
    if new == cfg:
        return None
    return ctx.b.pad(a, v, new)


@r(P("pad", X("a"), X()), "pad(A) with zero edge padding => A")
def _pad_nop(ctx, a):
    if any(lo or hi for lo, hi, _ in _padding(ctx.inst)):
        return None
    return a


@r(P("pad", X("a"), X("v")), "pad with negative padding => slice(pad with the rest)")
def _pad_negative(ctx, a, v):
    if not ctx.opts.enable_negative_padding_replacement:
        return None
    cfg = _padding(ctx.inst)
    if not any(lo < 0 or hi < 0 for lo, hi, _ in cfg):
        return None
    nonneg = [(max(lo, 0), max(hi, 0), it) for lo, hi, it in cfg]
    p = ctx.b.pad(a, v, nonneg)
    if p.shape.element_type != ctx.inst.shape.element_type:
        p.shape = p.shape.with_element_type(ctx.inst.shape.element_type)
    starts = [(-lo if lo < 0 else 0) for lo, _, _ in cfg]
    limits = [p.shape.dims[i] + (hi if hi < 0 else 0) for i, (_, hi, _) in enumerate(cfg)]
    return ctx.b.slice(p, starts, limits)


@r(P("pad", P("broadcast", X("x"), name="bc"), X("v")),
   "pad(broadcast(A)) => broadcast(pad(broadcast'(A))) over the padded dims")
def _pad_bcast(ctx, x, bc, v):
    cfg = _padding(ctx.inst)
    rank = len(cfg)
    padded = [i for i, (lo, hi, it) in enumerate(cfg) if lo or hi or it]
    if len(padded) >= rank or bc.user_count != 1 or x.shape.rank > len(padded):
        return None
    bdims = []
    for d in bc.dimensions:
        if d not in padded:
            return None
        bdims.append(padded.index(d))
    inner_dims = [bc.shape.dims[d] for d in padded]
    b1 = ctx.b.broadcast(x, inner_dims, bdims)
    p = ctx.b.pad(b1, v, [cfg[d] for d in padded])
    return ctx.b.broadcast(p, ctx.inst.shape.dims, padded)


# ---- dynamic-slice -----------------------------------------------------------------------
def _ds_sizes(inst):
    return list(inst.attr("dynamic_slice_sizes"))


def _scalar_indices(i) -> bool:
    """One scalar start index per dimension: the rules below need that form (an index
    vector, the old form, is dynamic-index-splitter's to rewrite first, as in XLA)."""
    ops = i.operands
    first = 1 if i.opcode == "dynamic-slice" else 2
    return len(ops) == first + ops[0].shape.rank and \
        all(o.shape.rank == 0 for o in ops[first:])


def DS(*src, **kw):
    """A dynamic-slice with scalar start indices."""
    return P("dynamic-slice", *src, pred=_scalar_indices, **kw)


def DUS(*src, **kw):
    """A dynamic-update-slice with scalar start indices."""
    return P("dynamic-update-slice", *src, pred=_scalar_indices, **kw)


@r(P("dynamic-slice", pred=lambda i: i.shape.rank == 0), "dynamic-slice of a scalar => A")
def _ds_scalar(ctx):
    return ctx.inst.operands[0]


@r(DS(), "dynamic-slice(A) => A when it takes everything")
def _ds_full(ctx):
    return ctx.inst.operands[0]


@r(DS(), "dynamic-slice index of a full-size dim => 0")
def _ds_full_dims(ctx):
    ds = ctx.inst
    op = ds.operands[0]
    dims = [d for d in range(op.shape.rank)
            if not (ds.operands[d + 1].opcode == "constant" and is_all(ds.operands[d + 1], 0))
            and op.shape.dims[d] == ds.shape.dims[d]]
    if not dims:
        return None
    zero = ctx.b.scalar_like(ds.operands[1], 0)
    ops = list(ds.operands)
    for d in dims:
        ops[d + 1] = zero
    return ctx.b.clone(ds, ops)


@r(DS(P("broadcast", X("a"), name="bc"), rest=True),
   "dynamic-slice(broadcast(A)) => broadcast(dynamic-slice(A))")
def _ds_bcast(ctx, a, bc):
    ds = ctx.inst
    sizes = _ds_sizes(ds)
    idx = [ds.operands[1 + d] for d in bc.dimensions]
    nsz = [sizes[d] for d in bc.dimensions]
    inner = a if not nsz else ctx.b.dynamic_slice(a, idx, nsz)
    return ctx.b.broadcast(inner, ds.shape.dims, bc.dimensions)


@r(DS(P("reshape", X("a"), name="rs"), rest=True),
   "dynamic-slice(reshape(A)) => reshape(dynamic-slice(A)) for 1-dim reshapes")
def _ds_reshape(ctx, a, rs):
    ds = ctx.inst
    if ctx.opts.is_layout_sensitive or \
            inserted_or_deleted_1_dims(a.shape.dims, rs.shape.dims) is None:
        return None
    zero = ctx.b.scalar_like(ds.operands[1], 0)
    starts = [zero] * a.shape.rank
    sizes = [1] * a.shape.rank
    dsz = _ds_sizes(ds)
    for i, o in dims_unmodified_by_reshape(a.shape.dims, rs.shape.dims):
        if a.shape.dims[i] == 1:
            continue
        starts[i] = ds.operands[1 + o]
        sizes[i] = dsz[o]
    return ctx.b.reshape(ctx.b.dynamic_slice(a, starts, sizes), ds.shape.dims)


@r(DS(P("transpose", X("a"), name="tr"), rest=True),
   "dynamic-slice(transpose(A)) => transpose(dynamic-slice(A))")
def _ds_transpose(ctx, a, tr):
    ds = ctx.inst
    if ctx.opts.is_layout_sensitive:
        return None
    inv = inverse_perm(tr.dimensions)
    idx = ds.operands[1:]
    sizes = _ds_sizes(ds)
    new = ctx.b.dynamic_slice(a, [idx[i] for i in inv], [sizes[i] for i in inv])
    return ctx.b.transpose(new, tr.dimensions)


@r(DS(), "dynamic-slice with constant indices => slice")
def _ds_const(ctx):
    ds = ctx.inst
    op = ds.operands[0]
    if ctx.opts.disable_dynamic_slice_to_slice_conversion or op.opcode == "constant":
        return None
    starts, limits = [], []
    for i, idx in enumerate(ds.operands[1:]):
        if idx.opcode != "constant" or not is_integral(idx.shape.element_type):
            return None
        v = scalar_value(idx)
        if v is None or v < 0:
            return None
        mx = op.shape.dims[i] - ds.shape.dims[i]
        s = min(mx, v)
        starts.append(s)
        limits.append(s + ds.shape.dims[i])
    return ctx.b.slice(op, starts, limits)


@r(DS(DS(name="inner"), rest=True),
   "dynamic-slice(dynamic-slice(A, i), j) => dynamic-slice(A, clamp(i) + j)")
def _ds_ds(ctx, inner):
    ds = ctx.inst
    bld = ctx.b
    base = inner.operands[0]
    new_idx = []
    sizes = _ds_sizes(inner)
    outer_sizes = _ds_sizes(ds)
    for d, (idx, iidx) in enumerate(zip(ds.operands[1:], inner.operands[1:])):
        clamped = _clamp_index(bld, iidx, base.shape.dims[d] - sizes[d])
        if clamped.shape.element_type != idx.shape.element_type:
            clamped = bld.convert(clamped, idx.shape.element_type)
        # XLA adds the outer index unclamped, which is wrong when it is out of range: the
        # outer dynamic-slice clamps it against the inner slice, so clamp it here too.
        outer = _clamp_index(bld, idx, sizes[d] - outer_sizes[d])
        new_idx.append(bld.binary("add", outer, clamped))
    return bld.dynamic_slice(base, new_idx, outer_sizes)


def _clamp_index(bld, idx, hi):
    return bld.clamp(bld.scalar_like(idx, 0), idx, bld.scalar_like(idx, hi))


# ---- dynamic-update-slice ------------------------------------------------------------------
@r(DUS(P("broadcast", X("v", pred=lambda i: i.shape.rank == 0)), X("u"), rest=True),
   "dynamic-update-slice(bcast(v), U, const) => pad(U, v)")
def _dus_pad(ctx, v, u):
    dus = ctx.inst
    if not ctx.opts.enable_dynamic_update_slice_to_pad_replacement:
        return None
    cfg = []
    for d, idx in enumerate(dus.operands[2:]):
        if idx.opcode != "constant" or idx.shape.rank != 0:
            return None
        s = scalar_value(idx)
        if not isinstance(s, int) or isinstance(s, bool):
            return None
        w, bw = u.shape.dims[d], dus.shape.dims[d]
        s = min(max(0, s), bw - w)
        cfg.append((s, bw - (s + w), 0))
    return ctx.b.pad(u, v, cfg)


@r(DUS(X(), X("u"), rest=True),
   "dynamic-update-slice(A, U) => U when U covers A")
def _dus_full(ctx, u):
    return u


@r(DUS(X(), X("u"), rest=True),
   "dynamic-update-slice index of a full-size dim => 0")
def _dus_full_dims(ctx, u):
    dus = ctx.inst
    dims = [d for d in range(u.shape.rank)
            if not (dus.operands[d + 2].opcode == "constant" and is_all(dus.operands[d + 2], 0))
            and u.shape.dims[d] == dus.shape.dims[d]]
    if not dims:
        return None
    zero = ctx.b.scalar_like(dus.operands[2], 0)
    ops = list(dus.operands)
    for d in dims:
        ops[d + 2] = zero
    return ctx.b.clone(dus, ops)


@r(DUS(X("a"), X("u", pred=lambda i: i.shape.num_elements() == 0), rest=True),
   "dynamic-update-slice(A, zero-element U) => A")
def _dus_empty(ctx, a, u):
    return a


@r(DUS(X("a"), DUS(DS(X("a"), name="ds", rest=True), X("c"), name="inner", rest=True),
       rest=True),
   "dus(A, dus(ds(A, i), C, j), i) => dus(A, C, i + clamp(j))")
def _dus_dus(ctx, a, ds, c, inner):
    dus = ctx.inst
    if list(dus.operands[2:]) != list(ds.operands[1:]):
        return None
    bld = ctx.b
    ops = [a, c]
    for d, (idx, iidx) in enumerate(zip(dus.operands[2:], inner.operands[2:])):
        clamped = _clamp_index(bld, iidx, inner.shape.dims[d] - c.shape.dims[d])
        if clamped.shape.element_type != idx.shape.element_type:
            clamped = bld.convert(clamped, idx.shape.element_type)
        # the outer index is clamped against the inner slice's size first (XLA omits this)
        outer = _clamp_index(bld, idx, a.shape.dims[d] - inner.shape.dims[d])
        ops.append(bld.binary("add", outer, clamped))
    return bld.dynamic_update_slice(a, c, ops[2:])


RULES = Rules(r)
