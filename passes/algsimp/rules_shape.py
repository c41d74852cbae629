"""algsimp rules for data movement: broadcast reshape transpose copy bitcast reverse.

(slice, concatenate, pad and the dynamic slices live in rules_slice.py.)
"""
from __future__ import annotations

from hlo_opt.ir.opcodes import is_elementwise

from hlo_opt.rewrite.rules import CHANGED, P, RuleList, Rules, X, remove_dead
from hlo_opt.analysis.shape_util import (common_factors, drop_degenerate,
                                         inserted_or_deleted_1_dims, reshape_leaves_dims_unmodified)
from .options import layout_free
from .predicates import compose_perm, inverse_perm, is_identity_perm

r = RuleList()


def _dead(i):
    return i.user_count == 0 and not i.is_root


# ---- broadcast --------------------------------------------------------------------------
def _adds_no_elements(bc) -> bool:
    return bc.shape.num_elements() == bc.operands[0].shape.num_elements()


@r(P("broadcast", X("x"), pred=_adds_no_elements),
   "broadcast(A) => reshape(A) when no elements are added")
def _bcast_as_reshape(ctx, x):
    dims = list(ctx.inst.dimensions)
    if dims == sorted(dims):
        return ctx.b.reshape(x, ctx.inst.shape.dims)
    return None


@r(P("broadcast", X("x"), pred=_adds_no_elements),
   "broadcast(A) => transpose(A) for a pure permutation")
def _bcast_as_transpose(ctx, x):
    if ctx.inst.shape.rank == x.shape.rank:
        return ctx.b.transpose(x, inverse_perm(ctx.inst.dimensions))
    return None


@r(P("broadcast", P("reshape", X("a"), name="rs")),
   "broadcast(reshape(A)) => broadcast(A) when the reshape only inserts 1-sized dims")
def _bcast_of_degenerate_reshape(ctx, a, rs):
    d = inserted_or_deleted_1_dims(a.shape.dims, rs.shape.dims)
    if d is None or d[0]:
        return None
    inserted = set(d[1])
    dims = [v for i, v in enumerate(ctx.inst.dimensions) if i not in inserted]
    return ctx.b.broadcast(a, ctx.inst.shape.dims, dims)


def _replace_user(ctx, user, new):
    """Replace an instruction other than the visited one (XLA: user->ReplaceAllUsesWith)."""
    if user.is_root:
        new.shape = user.shape  # the root keeps its layout
    if "metadata" in user.attrs and "metadata" not in new.attrs:
        new.attrs["metadata"] = user.attrs["metadata"]
    user.replace_all_uses_with(new)
    remove_dead(ctx.comp, user, ctx.ctrl_succ)


def _scalar_bcast(i) -> bool:
    return i.opcode == "broadcast" and i.operands[0].shape.rank == 0


def _sink_broadcast(ctx, bc):
    """XLA's TryToSinkBroadcastAfterElementwiseOps: op(bcast(A), bcast(B)) =>
    bcast(op(A, B)) when every operand of the user is a scalar or an equal broadcast."""
    x = bc.operands[0]
    changed = False

    def equal_bcast(i):
        return (i.opcode == "broadcast" and i.operands[0].shape == x.shape
                and tuple(i.dimensions) == tuple(bc.dimensions))

    for user in bc.users:
        # cheap, side-effect-free tests first: most users take some non-broadcast operand
        if not is_elementwise(user.opcode) or user.opcode in ("copy", "fusion"):
            continue
        if not all(o.opcode == "broadcast" for o in user.operands):
            continue
        if user.parent is not ctx.comp or _dead(user) or user.control_predecessors \
                or user in ctx.ctrl_succ:
            continue
        if not all(_scalar_bcast(o) or equal_bcast(o) for o in user.operands):
            continue
        new_ops = []
        for o in user.operands:
            if _scalar_bcast(o) and not equal_bcast(o):
                new_ops.append(ctx.b.broadcast(o.operands[0], x.shape.dims, ()))
            else:
                new_ops.append(o.operands[0])
        shape = x.shape.without_layout().with_element_type(user.shape.element_type)
        new_user = ctx.b.clone(user, new_ops, shape)
        new_bc = ctx.b.broadcast(new_user, user.shape.dims, bc.dimensions)
        _replace_user(ctx, user, new_bc)
        changed = True
    return CHANGED if changed else None


def _may_sink(bc) -> bool:
    """A user of ``bc`` passes _sink_broadcast's first (cheap) tests.  (Plain loops: a
    rule's predicate runs for every broadcast of every sweep, and allocates nothing.)"""
    if bc.shape.rank == 0:
        return False
    for user in bc.iter_users():
        if is_elementwise(user.opcode) and user.opcode not in ("copy", "fusion"):
            for o in user.operands:
                if o.opcode != "broadcast":
                    break
            else:
                return True
    return False


@r(P("broadcast", X("x"), pred=_may_sink),
   "elementwise(bcast(A), bcast(B)) => bcast(elementwise(A, B))",
   when=lambda o: o.enable_sink_broadcast)
def _bcast_sink(ctx, x):
    return _sink_broadcast(ctx, ctx.inst)


_PERMUTING = frozenset(("reshape", "reverse", "transpose"))
_SCALAR_BCAST_USERS = _PERMUTING | {"sort", "slice", "dynamic-slice"}


def _may_replace_users(bc) -> bool:
    for u in bc.iter_users():
        if u.opcode in _SCALAR_BCAST_USERS:
            return True
    return False


@r(P("broadcast", X("x", pred=lambda i: i.shape.rank == 0), pred=_may_replace_users),
   "reshape/transpose/reverse/slice/dynamic-slice of bcast(scalar) => bcast(scalar)")
def _bcast_scalar_users(ctx, x):
    bc = ctx.inst
    for user in bc.users:
        if user.opcode not in _SCALAR_BCAST_USERS:
            continue
        if user.parent is not ctx.comp or _dead(user) or user.control_predecessors \
                or user in ctx.ctrl_succ:
            continue
        ok = (user.opcode in _PERMUTING
              or (user.opcode == "sort" and not user.shape.is_tuple())
              or (user.opcode == "slice")
              or (user.opcode == "dynamic-slice"
                  and [i for i, o in enumerate(user.operands) if o is bc] == [0]))
        if not ok:
            continue
        _replace_user(ctx, user, ctx.b.broadcast(x, user.shape.dims, ()))
        return CHANGED
    return None


@r(P("broadcast", P("iota", name="iota")), "broadcast(iota) => iota")
def _bcast_iota(ctx, iota):
    d = ctx.inst.dimensions[iota.attr("iota_dimension")]
    return ctx.b.iota(ctx.inst.shape.element_type, ctx.inst.shape.dims, d)


@r(P("broadcast", P("broadcast", X("a"), name="inner")), "broadcast(broadcast(A)) => broadcast(A)")
def _bcast_bcast(ctx, a, inner):
    dims = ctx.inst.dimensions
    return ctx.b.broadcast(a, ctx.inst.shape.dims, [dims[d] for d in inner.dimensions])


@r(P("broadcast", X("x", pred=lambda i: 1 in i.shape.dims)),
   "broadcast(A) => broadcast(reshape(A)) dropping A's 1-sized dims")
def _bcast_degenerate(ctx, x):
    if ctx.opts.is_layout_sensitive or not ctx.opts.enable_broadcast_degenerate_dimension:
        return None
    if x.shape.is_dynamic():
        return None
    rs = ctx.b.reshape(x, drop_degenerate(x.shape.dims))
    dims = [ctx.inst.dimensions[i] for i, d in enumerate(x.shape.dims) if d != 1]
    return ctx.b.broadcast(rs, ctx.inst.shape.dims, dims)


# ---- reshape ----------------------------------------------------------------------------
@r(P("reshape", X(), pred=lambda i: i.shape.is_array() and i.shape.num_elements() == 0),
   "reshape to a zero-element shape => empty constant")
def _reshape_empty(ctx):
    import numpy as np
    from hlo_opt.ir.literal import Literal
    s = ctx.inst.shape
    arr = np.zeros(s.dims, dtype=s.dtype)
    return ctx.b.constant(Literal(s.without_layout(), arr))


@r(P("reshape", X("x")), "reshape(A) => A when the shape does not change")
def _reshape_nop(ctx, x):
    return x


@r(P("reshape", P("reshape", X("a"))), "reshape(reshape(A)) => reshape(A)")
def _reshape_reshape(ctx, a):
    return ctx.b.reshape(a, ctx.inst.shape.dims)


def _num_degenerate(dims):
    return sum(1 for d in dims if d == 1)


def _valid_degenerate_reshape(inst):
    if inst.opcode not in ("reshape", "bitcast"):
        return False
    if inst.opcode == "bitcast":
        return False  # only when ReshapeIsBitcast, i.e. layout sensitive
    src, dst = inst.operands[0].shape.dims, inst.shape.dims
    return (_num_degenerate(dst) <= 1 and _num_degenerate(src) <= 1
            and inserted_or_deleted_1_dims(src, dst) is not None)


def _effective_perm(perm, from_dims, to_dims):
    if _num_degenerate(from_dims) == 1:
        deg = list(from_dims).index(1)
        out = []
        for p in perm:
            if p == deg:
                continue
            out.append(p - 1 if p > deg else p)
        return out
    return list(perm)


def _remove_transpose_chain(inst):
    """XLA's TryRemovingBitcastOrReshapeTransposeChain: the start of a chain of transposes
    and 1-dim-shuffling reshapes that composes to the identity, or None."""
    if inst.opcode == "transpose":
        if is_identity_perm(inst.dimensions):
            return None
    elif not _valid_degenerate_reshape(inst):
        return None
    eff = len(drop_degenerate(inst.shape.dims))
    perm = list(range(eff))
    if inst.opcode == "transpose":
        perm = _effective_perm(inst.dimensions, inst.operands[0].shape.dims, inst.shape.dims)
    start = None
    cur = inst.operands[0]
    while cur.opcode in ("reshape", "transpose", "bitcast"):
        if cur.opcode != "transpose" and not _valid_degenerate_reshape(cur):
            return None
        if cur.opcode == "transpose":
            if is_identity_perm(cur.dimensions):
                return None
            perm = compose_perm(_effective_perm(cur.dimensions, cur.operands[0].shape.dims,
                                                cur.shape.dims), perm)
        start = cur
        cur = cur.operands[0]
    if start is None or not is_identity_perm(perm):
        return None
    new = start.operands[0]
    return new if new.shape.same_dims_and_type(inst.shape) else None


@r(P("reshape"), "chain of transposes and 1-dim reshapes composing to identity => its input")
def _reshape_chain(ctx):
    return _remove_transpose_chain(ctx.inst)


@r(P("reshape", P("broadcast", X("a"), name="bc")),
   "reshape(broadcast(A)) => broadcast(A) when A's dims are unmodified")
def _reshape_bcast(ctx, a, bc):
    dims = reshape_leaves_dims_unmodified(bc.shape.dims, ctx.inst.shape.dims, bc.dimensions)
    if dims is None:
        return None
    return ctx.b.broadcast(a, ctx.inst.shape.dims, dims)


@r(P("reshape", P("iota", name="iota")), "reshape(iota) => iota (or a mixed-radix sum)")
def _reshape_iota(ctx, iota):
    from hlo_opt.ir.types import is_integral
    rs = ctx.inst
    idim = iota.attr("iota_dimension")
    cf = common_factors(iota.shape.dims, rs.shape.dims)
    k = next((n for n, (a, b) in enumerate(cf)
              if a == idim and b < rs.shape.rank and rs.shape.dims[b] > 1), None)
    has_next = any(a == idim + 1 for a, _ in cf)
    if k is None or not has_next or k + 1 >= len(cf):
        return None
    t = rs.shape.element_type
    lo, hi = cf[k][1], cf[k + 1][1]
    if hi - lo > 1 and not is_integral(t) and rs.shape.num_elements() > (1 << 24):
        return None  # float iota products beyond 2^24 would round differently
    result = None
    mult = 1
    for dim in range(hi - 1, lo - 1, -1):
        new_iota = ctx.b.iota(t, rs.shape.dims, dim)
        if result is None:
            result = new_iota
        else:
            result = ctx.b.binary("add", result, ctx.b.binary(
                "multiply", new_iota, ctx.b.scalar_like(rs, mult)))
        mult *= rs.shape.dims[dim]
    return result


# ---- transpose ------------------------------------------------------------------------
@r(P("transpose", X("x"), pred=lambda i: is_identity_perm(i.dimensions)),
   "transpose(A) => A for the identity permutation")
def _transpose_id(ctx, x):
    return x


@r(P("transpose", P("transpose", X("a"), name="inner")), "transpose(transpose(A)) => transpose(A)")
def _transpose_transpose(ctx, a, inner):
    return ctx.b.transpose(a, compose_perm(inner.dimensions, ctx.inst.dimensions))


@r(P("transpose"), "chain of transposes and 1-dim reshapes composing to identity => its input")
def _transpose_chain(ctx):
    return _remove_transpose_chain(ctx.inst)


@r(P("transpose", P("dot", X("lhs"), X("rhs"), name="dot")), "transpose(dot(A, B)) => dot(B, A)",
   exact=False)
def _transpose_dot(ctx, lhs, rhs, dot):
    from hlo_opt.rewrite.builder import dot_dims, dot_extra_attrs
    if not ctx.opts.supports_non_canonical_dots or dot.user_count != 1:
        return None
    lb, lc, rb, rc = dot_dims(dot)
    perm = ctx.inst.dimensions
    nb = len(lb)
    if any(perm[i] >= nb for i in range(nb)):
        return None
    n_r = rhs.shape.rank - len(rc) - len(rb)
    n_l = lhs.shape.rank - len(lc) - len(lb)
    if any(perm[nb + i] != nb + n_l + i for i in range(n_r)):
        return None
    if any(perm[nb + n_r + i] != nb + i for i in range(n_l)):
        return None
    new_lb = [rb[perm[b]] for b in range(nb)]
    new_rb = [lb[perm[b]] for b in range(nb)]
    return ctx.b.dot(rhs, lhs, new_lb, rc, new_rb, lc, dot.shape.element_type,
                     dot_extra_attrs(dot, swap=True))


def _only_permutes_degenerate(dims, perm):
    kept = [p for i, p in enumerate(perm) if dims[i] != 1]
    return len(kept) < len(perm) and kept == sorted(kept)


@r(P("transpose", X("x")), "transpose moving only 1-sized dims => reshape")
def _transpose_degenerate(ctx, x):
    if _only_permutes_degenerate(ctx.inst.shape.dims, ctx.inst.dimensions):
        return ctx.b.reshape(x, ctx.inst.shape.dims)
    return None


def transpose_of_broadcast(ctx, inst, perm):
    bc = inst.operands[0]
    if bc.opcode != "broadcast" or list(bc.dimensions) != sorted(bc.dimensions):
        return None
    inv = inverse_perm(perm)
    new_dims = [inv[d] for d in bc.dimensions]
    if new_dims != sorted(new_dims):
        return None
    return ctx.b.broadcast(bc.operands[0], inst.shape.dims, new_dims)


@r(P("transpose", P("broadcast")), "transpose(broadcast(A)) => broadcast(A) keeping A's order")
def _transpose_bcast(ctx):
    return transpose_of_broadcast(ctx, ctx.inst, ctx.inst.dimensions)


# ---- copy / bitcast -------------------------------------------------------------------
@r(P("copy", P("copy", X("a"))), "copy(copy(A)) => copy(A), or A when layouts match")
def _copy_copy(ctx, a):
    if a.shape == ctx.inst.shape:
        return a
    return ctx.b.copy(a)


@r(P("copy", X("a")), "copy(A) => A")
def _copy_nop(ctx, a):
    c = ctx.inst
    if "sharding" in c.attrs and c.parent is not None and c.parent.is_entry and c.is_root:
        return None
    return a


def _not_tiled(shape) -> bool:
    return shape.layout is None or "T(" not in shape.layout.tail


def _unary_over_bitcast(u) -> bool:
    """XLA's predicate for bitcast(unary(bitcast(A))): an elementwise (non-fusion) unary op
    with one user whose operand is a bitcast."""
    return (is_elementwise(u.opcode) and len(u.operands) == 1 and u.user_count == 1
            and u.operands[0].opcode == "bitcast")


@r(P("bitcast", X("u", pred=_unary_over_bitcast)),
   "bitcast(unary(bitcast(A))) => bitcast(unary(A))")
def _bitcast_unary_bitcast(ctx, u):
    """HandleBitcast: the unary op moves to the inner bitcast's operand (same element types
    throughout, no tiled layouts)."""
    bc = ctx.inst
    inner = u.operands[0]
    a = inner.operands[0]
    et = bc.shape.element_type
    if not (u.shape.element_type == et and inner.shape.element_type == et
            and a.shape.element_type == et and _not_tiled(inner.shape)
            and _not_tiled(a.shape)):
        return None
    new_u = ctx.b.clone(u, [a], a.shape)
    return ctx.b.bitcast(new_u, bc.shape)


@r(P("bitcast", P("bitcast", X("a"))), "bitcast(bitcast(A)) => bitcast(A)")
def _bitcast_bitcast(ctx, a):
    return ctx.b.bitcast(a, ctx.inst.shape)


@r(P("bitcast", X("a")), "bitcast(A) => A when the shape does not change")
def _bitcast_nop(ctx, a):
    return a if a.shape.element_type == ctx.inst.shape.element_type else None


# ---- reverse ------------------------------------------------------------------------------
@r(P("reverse", X("x")), "reverse over 1-sized dims => A")
def _reverse_trivial(ctx, x):
    return x if all(ctx.inst.shape.dims[d] == 1 for d in ctx.inst.dimensions) else None


@r(P("reverse", P("reverse", X("a"), name="inner")), "reverse(reverse(A)) => reverse(sym. diff.)",
   when=layout_free)
def _reverse_reverse(ctx, a, inner):
    diff = sorted(set(ctx.inst.dimensions) ^ set(inner.dimensions))
    if not diff:
        return a
    return ctx.b.reverse(a, diff)


_REV_BINARY = frozenset(("add", "subtract", "multiply", "divide", "remainder", "power",
                         "maximum", "minimum", "atan2", "complex", "and", "or", "xor",
                         "shift-left", "shift-right-arithmetic", "shift-right-logical"))


def _scalar_bcast(i):
    return i.opcode == "broadcast" and not i.dimensions and i.operands[0].shape.rank == 0


@r(P("reverse", P(_REV_BINARY, X("a"), X("b"), name="op")),
   "reverse(op(A, bcast(c))) => op(reverse(A), bcast(c))", when=layout_free)
def _reverse_binary(ctx, a, b, op):
    dims = ctx.inst.dimensions
    if _scalar_bcast(a):
        return ctx.b.binary(op.opcode, a, ctx.b.reverse(b, dims))
    if _scalar_bcast(b):
        return ctx.b.binary(op.opcode, ctx.b.reverse(a, dims), b)
    return None


@r(P("reverse", P("reshape", X("a"), name="rs")),
   "reverse(reshape(A)) => reshape(reverse(A)) when the reshape only inserts 1-sized dims",
   when=layout_free)
def _reverse_reshape(ctx, a, rs):
    d = inserted_or_deleted_1_dims(a.shape.dims, rs.shape.dims)
    if d is None or d[0]:
        return None
    inserted = sorted(d[1])
    new_dims = []
    for dim in ctx.inst.dimensions:
        if rs.shape.dims[dim] == 1:
            continue
        new_dims.append(dim - sum(1 for i in inserted if i < dim))
    inner = ctx.b.reverse(a, new_dims) if new_dims else a
    return ctx.b.reshape(inner, rs.shape.dims)




# ---- layout sensitive: moves that are bitcasts -------------------------------------------
_BITCAST_CHECK_LIMIT = 1 << 20


def _physical(arr, shape):
    """``arr`` (logical values laid out as ``shape``) in physical (major-to-minor) order."""
    import numpy as np
    m2m = shape.effective_layout().minor_to_major
    return np.ascontiguousarray(np.transpose(arr, tuple(reversed(m2m)))).ravel()


def move_is_bitcast(src, dst, perm=None) -> bool:
    """Whether reshape (perm None) or transpose(perm) from ``src`` to ``dst`` keeps every
    element at the same physical position (XLA's ReshapeIsBitcast/TransposeIsBitcast)."""
    import numpy as np
    if src.element_type != dst.element_type or src.is_dynamic() or dst.is_dynamic():
        return False
    if (src.layout.tail if src.layout else "") != (dst.layout.tail if dst.layout else ""):
        return False
    n = src.num_elements()
    if n > _BITCAST_CHECK_LIMIT:
        return False
    logical = np.arange(n).reshape(src.dims)
    out = logical.reshape(dst.dims) if perm is None else np.transpose(logical, perm)
    return np.array_equal(_physical(logical, src), _physical(out, dst))


@r(P("reshape", X("x")), "reshape => bitcast when the layouts make it one (layout sensitive)")
def _reshape_bitcast(ctx, x):
    if not ctx.opts.is_layout_sensitive or not move_is_bitcast(x.shape, ctx.inst.shape):
        return None
    new = ctx.b.bitcast(x, ctx.inst.shape)
    return new


@r(P("transpose", X("x")), "transpose => bitcast when the layouts make it one (layout sensitive)")
def _transpose_bitcast(ctx, x):
    t = ctx.inst
    if not ctx.opts.is_layout_sensitive or not move_is_bitcast(x.shape, t.shape, t.dimensions):
        return None
    return ctx.b.bitcast(x, t.shape)


@r(P("copy", X("x")), "copy => bitcast when the layouts make it one (layout sensitive)")
def _copy_bitcast(ctx, x):
    c = ctx.inst
    if not ctx.opts.is_layout_sensitive or not x.shape.is_array():
        return None
    if not move_is_bitcast(x.shape, c.shape):
        return None
    return ctx.b.bitcast(x, c.shape)


RULES = Rules(r)
