"""algsimp rules for optimization barriers and collectives: opt-barrier all-reduce."""
from __future__ import annotations

from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.rules import CHANGED, P, RuleList, Rules, X

r = RuleList()


# ---- opt-barrier ----------------------------------------------------------------------------
@r(P("opt-barrier", P("tuple", name="t")), "opt-barrier drops tuple elements nobody reads")
def _barrier_unused(ctx, t):
    """XLA's HandleOptimizationBarrier: elements of the barrier's tuple that no user of the
    barrier reads leave the barrier (so they can die)."""
    barrier = ctx.inst
    users = barrier.users
    if barrier.is_root or not users or t.user_count != 1 or \
            any(u.opcode != "get-tuple-element" for u in users):
        return None
    n = len(t.operands)
    used = sorted({u.attr("index") for u in users})
    if len(used) == n:
        return None
    remap = {old: new for new, old in enumerate(used)}
    new_tuple = ctx.b.tuple([t.operands[i] for i in used])
    barrier.replace_operand(0, new_tuple)
    barrier.shape = new_tuple.shape
    for u in users:
        u.set_attr("index", remap[u.attr("index")])
    return CHANGED


# ---- all-reduce -----------------------------------------------------------------------------
def _plain_all_reduce(inst) -> bool:
    return len(inst.operands) == 1 and not inst.shape.is_tuple()


@r(P("all-reduce", P("broadcast", X("a"), name="bc"), pred=_plain_all_reduce),
   "all-reduce(broadcast(A)) => broadcast(all-reduce(A))")
def _all_reduce_of_broadcast(ctx, a, bc):
    """Reducing across devices commutes with a broadcast (elementwise on both sides):
    reduce the smaller operand."""
    ar = ctx.inst
    if bc.user_count != 1 or a.shape.num_elements() >= bc.shape.num_elements() or \
            ar.control_successors or ar.control_predecessors:
        return None
    # in place: the collective itself moves (a copy would leave the old one to run too)
    ar.replace_operand(0, a)
    ar.shape = Shape.array(a.shape.element_type, a.shape.dims, a.shape.layout)
    ar.replace_all_uses_with(ctx.b.broadcast(ar, bc.shape.dims, bc.dimensions))
    return CHANGED


RULES = Rules(r)
