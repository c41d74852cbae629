"""``reshape-mover``: XLA's ReshapeMover.

Sinks reshapes and transposes ("rearranges") below elementwise ops:
``add(reshape(a), reshape(b))`` => ``reshape(add(a, b))`` when every operand is an
equivalent rearrange or can take the inverse rearrange for free (a constant, an rng with
one user, a broadcast whose dimensions stay in order).  A candidate is moved only if every
user of each of its rearrange operands is moved too, so no rearrange is duplicated.  The
inverse rearranges it creates on constants and broadcasts are left for algsimp and
constant folding to clean up, as in XLA.
"""
from __future__ import annotations


from hlo_opt.rewrite.builder import Builder
from hlo_opt.rewrite.rules import comp_has_opcode, control_successors, has_opcode, remove_dead
from hlo_opt.analysis.shape_util import reshape_leaves_dims_unmodified
from .algsimp.predicates import inverse_perm, is_identity_perm


_REARRANGES = frozenset(("reshape", "transpose"))


def is_rearrange(i) -> bool:
    return i.opcode in _REARRANGES


def equivalent_rearranges(a, b) -> bool:
    if a.opcode != b.opcode or a.shape.dims != b.shape.dims:
        return False
    if a.opcode == "transpose":
        return tuple(a.dimensions) == tuple(b.dimensions)
    return a.operands[0].shape.dims == b.operands[0].shape.dims


def _is_elementwise(inst) -> bool:
    """:meth:`Instruction.is_elementwise` for the instructions this pass moves reshapes
    across: no maps, no fusions."""
    return inst.opcode != "map" and inst.opcode != "fusion" and inst.is_elementwise()


class ReshapeMover:
    name = "reshape-mover"

    def __init__(self, reshape_of_1d_broadcast_is_cheap: bool = False):
        self.reshape_of_1d_broadcast_is_cheap = reshape_of_1d_broadcast_is_cheap
        self.moved = 0

    # ---- XLA's CanTriviallyRearrange ---------------------------------------------------
    def can_trivially_rearrange(self, inst, rearrange) -> bool:
        if rearrange.opcode == "reshape" and \
                rearrange.shape == rearrange.operands[0].shape:
            return True
        if rearrange.opcode == "transpose" and is_identity_perm(rearrange.dimensions):
            return True
        if inst.opcode == "constant":
            return True
        if inst.opcode == "rng" and inst.user_count == 1:
            return True
        if inst.opcode == "broadcast":
            dims = list(inst.dimensions)
            if dims != sorted(dims):
                return False
            op_shape = inst.operands[0].shape
            if rearrange.opcode == "reshape":
                cheap = self.reshape_of_1d_broadcast_is_cheap
                return (op_shape.rank == 0
                        or (cheap and sum(1 for d in op_shape.dims if d != 1) <= 1)
                        or (cheap and reshape_leaves_dims_unmodified(
                            rearrange.shape.dims, rearrange.operands[0].shape.dims,
                            dims) is not None))
            if rearrange.opcode == "transpose":
                inv = inverse_perm(inverse_perm(rearrange.dimensions))
                new = [inv[d] for d in dims]
                return new == sorted(new)
        return False

    def first_nontrivial_rearrange(self, operands):
        for o in operands:
            if is_rearrange(o) and not self.can_trivially_rearrange(o.operands[0], o):
                return o
        return None

    def is_candidate(self, inst) -> bool:
        if not _is_elementwise(inst) or inst.control_predecessors:
            return False
        r = self.first_nontrivial_rearrange(inst.operands)
        if r is None:
            return False
        return all((is_rearrange(o) and equivalent_rearranges(o, r))
                   or (not is_rearrange(o) and self.can_trivially_rearrange(o, r))
                   for o in inst.operands)

    # ---- the rewrite ----------------------------------------------------------------
    def _inverse(self, b: Builder, rearrange, operand):
        if rearrange.opcode == "reshape":
            dims = rearrange.operands[0].shape.dims
            if operand.shape.dims == dims:
                return operand
            if operand.opcode == "reshape" and operand.operands[0].shape.dims == dims:
                return operand.operands[0]
            return b.reshape(operand, dims)
        if is_identity_perm(rearrange.dimensions):
            return operand
        return b.transpose(operand, inverse_perm(rearrange.dimensions))

    def _sink(self, comp, b: Builder, inst, ctrl) -> None:
        r = self.first_nontrivial_rearrange(inst.operands)
        ops = [self._inverse(b, r, o) for o in inst.operands]
        shape = r.operands[0].shape.without_layout().with_element_type(
            inst.shape.element_type)
        new_op = b.clone(inst, ops, shape)
        new_op.attrs.pop("sharding", None)
        if r.opcode == "reshape":
            new_r = b.reshape(new_op, inst.shape.dims)
        else:
            new_r = b.transpose(new_op, r.dimensions)
        new_r.shape = inst.shape
        if "metadata" in inst.attrs:
            new_r.attrs["metadata"] = inst.attrs["metadata"]
        inst.replace_all_uses_with(new_r)
        remove_dead(comp, inst, ctrl)

    def run(self, module) -> bool:
        self.moved = 0
        if not has_opcode(module, _REARRANGES):
            return False  # no candidate can have a rearrange operand
        fusion = {c for comp in module.computations for i in comp.instructions
                  if i.opcode == "fusion" for c in i.called}
        changed = False
        for comp in list(module.computations):
            if comp in fusion or not comp_has_opcode(comp, _REARRANGES):
                continue
            order = comp.post_order()
            candidates = {i: None for i in order if self.is_candidate(i)}
            removed = True
            while candidates and removed:
                rearranges = {o: None for i in candidates for o in i.operands
                              if is_rearrange(o)}
                removed = False
                for o in rearranges:
                    if any(u not in candidates for u in o.users):
                        for u in o.users:
                            if u in candidates:
                                del candidates[u]
                                removed = True
            if not candidates:
                continue
            ctrl = control_successors(comp)
            b = Builder(comp)
            for inst in list(candidates):
                self._sink(comp, b, inst, ctrl)
                self.moved += 1
            changed = True
        return changed
