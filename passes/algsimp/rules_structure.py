"""algsimp rules for optimization barriers and collectives: opt-barrier all-reduce
reduce-scatter all-gather all-to-all."""
from __future__ import annotations

import numpy as np

from hlo_opt.ir.types import is_float, is_integral
from hlo_opt.rewrite.rules import BSC, CHANGED, P, RuleList, Rules, X
from hlo_opt.shape_inference.collectives import group_size
from passes.collectives._util import reduction_kind

r = RuleList()


# ---- opt-barrier ----------------------------------------------------------------------------
@r(P("opt-barrier", X("t"), pred=lambda i: i.shape.is_tuple()),
   "opt-barrier drops tuple elements nobody reads")
def _barrier_unused(ctx, t):
    """XLA's HandleOptimizationBarrier: elements of the barrier's tuple that no user of the
    barrier reads leave the barrier (so they can die).  Every user must be a
    get-tuple-element; tokens stay; of a tuple operand, elements used elsewhere, the
    computation's root and side-effecting ones stay too."""
    barrier = ctx.inst
    if barrier.is_root:
        return None
    n = len(barrier.shape.tuple_shapes)
    used = [False] * n
    users = barrier.users
    for u in users:
        if u.opcode != "get-tuple-element":
            return None
        used[u.attr("index")] = True
    for i, s in enumerate(barrier.shape.tuple_shapes):
        if s.is_token():
            used[i] = True
    if t.opcode == "tuple":
        for i, e in enumerate(t.operands):
            if not used[i] and (e.user_count > 1 or e.is_root or e.has_side_effect()):
                used[i] = True
    if all(used):
        return None
    keep = [i for i in range(n) if used[i]]
    remap = {old: new for new, old in enumerate(keep)}
    if t.opcode == "tuple":
        elems = [t.operands[i] for i in keep]
    else:
        elems = [ctx.b.gte(t, i) for i in keep]
    new_tuple = ctx.b.tuple(elems)
    barrier.replace_operand(0, new_tuple)
    barrier.shape = new_tuple.shape
    for u in users:
        u.set_attr("index", remap[u.attr("index")])
    return CHANGED


# ---- collectives of a broadcast constant ------------------------------------------------------
def _array_result(i) -> bool:
    return i.shape.is_array()


@r(P("all-gather", BSC("c", bcast="bc"), pred=_array_result),
   "all-gather(broadcast(C)) => broadcast(C)")
def _all_gather_bcast_const(ctx, c, bc):
    """HandleAllGather: every device contributes the same constant."""
    return ctx.b.broadcast(c, ctx.inst.shape.dims, ())


@r(P("all-to-all", BSC("c", bcast="bc"), pred=_array_result),
   "all-to-all(broadcast(C)) => broadcast(C)")
def _all_to_all_bcast_const(ctx, c, bc):
    """HandleAllToAll: exchanging copies of one constant changes nothing."""
    return bc


def _collective_reduce_bcast_const(ctx, c, bc):
    """HandleAllReduceOrReduceScatter: min/max of equal values is the value; a sum over a
    group of n devices is C * n (computed in the element type, as XLA does); other
    reducers and groups of unknown size stay."""
    coll = ctx.inst
    kind = reduction_kind(coll.to_apply)
    if kind in ("min", "max"):
        return ctx.b.broadcast(c, coll.shape.dims, ())
    if kind != "sum":
        return None
    et = c.shape.element_type
    if not (is_integral(et) or is_float(et)):
        return None
    try:
        n = group_size(coll)
    except Exception:  # malformed groups: the verifier's business
        return None
    if not n:
        return None
    arr = np.asarray(c.literal.array)
    with np.errstate(all="ignore"):
        total = (arr * arr.dtype.type(n)).astype(arr.dtype)
    total_c = ctx.b.constant_array(total.reshape(()), et)
    return ctx.b.broadcast(total_c, coll.shape.dims, ())


for _op in ("all-reduce", "reduce-scatter"):
    r(P(_op, BSC("c", bcast="bc"), pred=_array_result),
      f"{_op}(broadcast(C)) => broadcast(C), or broadcast(C * group size) for a sum",
      exact=False)(_collective_reduce_bcast_const)

RULES = Rules(r)
