"""algsimp rules that fold an add into the scatters it adds (XLA's HandleAdd scatter forms)
and reassociate a multiply past a broadcast (HandleMultiply's Mul(Mul(A, C), Broadcast(B))).
(HandleAdd's sparse update, add of a dynamic-update-slice of zeros, is in rules_arith.)

All of them reorder float additions or multiplications, hence ``exact=False``.
"""
from __future__ import annotations

from hlo_opt.rewrite.rules import NC, P, RuleList, Rules, X
from .predicates import has_single_use, reassociation_ok, root_is_binary_of_params

r = RuleList()


# ---- add of scatter -----------------------------------------------------------------------
def _add_scatter(s) -> bool:
    """m::Scatter(op, idx, upd).WithOneUse() whose combiner adds its two parameters."""
    return (s.opcode == "scatter" and len(s.operands) == 3 and has_single_use(s)
            and root_is_binary_of_params(s.to_apply, ("add",)) is not None)


def _concat_dims(lhs, rhs):
    """XLA's search for the one dimension where the indices (and updates) of two scatters
    may be concatenated: (index dim, update dim), or None to leave the add alone."""
    li, ri = lhs.operands[1].shape.dims, rhs.operands[1].shape.dims
    lu = lhs.operands[2].shape.dims
    ivd = lhs.attr("index_vector_dim")
    uwd = set(lhs.attr("update_window_dims", ()))
    sibd = set(lhs.attr("scatter_indices_batching_dims", ()))
    first_index, first_update = len(li), len(lu)
    index_dim = update_dim_found = None
    update_dim = len(lu) - 1
    for d in range(len(li) - 1, -1, -1):
        if d == ivd:
            continue
        while update_dim in uwd:
            update_dim -= 1
        if d in sibd:
            if li[d] != ri[d]:
                return None
            update_dim -= 1
            continue
        if li[d] == ri[d]:
            first_index, first_update = d, update_dim
            update_dim -= 1
            continue
        if index_dim is not None:
            return None
        index_dim, update_dim_found = d, update_dim
        update_dim -= 1
    if index_dim is None:
        index_dim, update_dim_found = first_index, first_update
    return index_dim, update_dim_found


def _window_dims(s):
    uwd = set(s.attr("update_window_dims", ()))
    return [n for i, n in enumerate(s.operands[2].shape.dims) if i in uwd]


@r(P("add", P("scatter", name="ls", pred=_add_scatter), P("scatter", name="rs", pred=_add_scatter)),
   "add(scatter(A, I1, U1), scatter(B, I2, U2)) => scatter(A + B, concat(I), concat(U))",
   exact=False, when=lambda o: not o.is_layout_sensitive)
def _add_two_scatters(ctx, ls, rs):
    """HandleAdd with two add-scatters of one use each: one scatter of the summed operands
    over the concatenated indices and updates when XLA's conditions hold (same dimension
    numbers and index type, neither sorted nor unique indices, equal update windows, a
    single dimension to concatenate along, fewer update elements than the result);
    otherwise the two scatters are chained over the summed operands."""
    if not reassociation_ok(ctx, ctx.inst):
        return None
    li, ri = ls.operands[1], rs.operands[1]
    if li.shape.rank != ri.shape.rank:
        return None
    dims = _concat_dims(ls, rs)
    if dims is None:
        return None
    index_dim, update_dim = dims
    if index_dim == li.shape.rank:
        return None  # scalar indices would need reshapes
    lu, ru = ls.operands[2], rs.operands[2]
    if lu.shape.num_elements() + ru.shape.num_elements() >= ls.shape.num_elements():
        return None
    b = ctx.b
    operand = b.binary("add", ls.operands[0], rs.operands[0])
    safe = not any(s.attr(k, False) for s in (ls, rs)
                   for k in ("unique_indices", "indices_are_sorted"))
    if (safe and ls.scatter_dimension_numbers == rs.scatter_dimension_numbers
            and li.shape.element_type == ri.shape.element_type
            and _window_dims(ls) == _window_dims(rs)):
        index = b.concatenate([li, ri], index_dim)
        update = b.concatenate([lu, ru], update_dim)
        new = b.clone(ls, [operand, index, update])
        new.remove_attr("indices_are_sorted")
        new.remove_attr("unique_indices")
        return new
    inner = b.clone(rs, [operand, ri, ru])
    return b.clone(ls, [inner, li, lu])


@r(P("add", X("a"), P("scatter", name="s", pred=_add_scatter), commute=True),
   "add(A, scatter(B, I, U)) => scatter(A + B, I, U)", exact=False,
   when=lambda o: not o.is_layout_sensitive)
def _add_scatter_operand(ctx, a, s):
    """HandleAdd with one add-scatter of one use: the other addend joins the scatter's
    operand (the right-hand scatter is taken first, as XLA does)."""
    if not reassociation_ok(ctx, ctx.inst):
        return None
    add = ctx.inst
    if _add_scatter(add.operands[0]) and _add_scatter(add.operands[1]):
        return None  # two scatters: the rule above decides (XLA stops there)
    b = ctx.b
    lhs, rhs = (a, s.operands[0]) if add.operands[1] is s else (s.operands[0], a)
    return b.clone(s, [b.binary("add", lhs, rhs), s.operands[1], s.operands[2]])


# ---- multiply reassociation past a broadcast --------------------------------------------------
def _scalar_const_or_bcast(i) -> bool:
    """m::Constant scalar, or m::Broadcast(m::Constant) of a scalar constant."""
    if i.opcode == "broadcast":
        i = i.operands[0]
    return i.opcode == "constant" and i.shape.rank == 0 and not i.literal.elided


def _bcast_of_non_constant(i) -> bool:
    return i.opcode == "broadcast" and i.operands[0].opcode != "constant"


@r(P("multiply", P("multiply", NC("a"),
                   X("c", pred=_scalar_const_or_bcast), commute=True, name="inner"),
     X("op", pred=_bcast_of_non_constant, hint={"broadcast"}), commute=True),
   "(A * C) * broadcast(B) => A * broadcast(B * C)", exact=False)
def _mul_const_bcast(ctx, a, c, inner, op):
    """HandleMultiply: move the scalar constant into the (smaller) broadcast operand."""
    if not reassociation_ok(ctx, ctx.inst):
        return None
    b = ctx.b
    const = c.operands[0] if c.opcode == "broadcast" else c
    x = op.operands[0]
    if x.shape.rank:
        const = b.broadcast(const, x.shape.dims, ())
    scaled = b.binary("multiply", x, const)
    return b.binary("multiply", a, b.broadcast(scaled, ctx.inst.shape.dims, op.dimensions))


RULES = Rules(r)
