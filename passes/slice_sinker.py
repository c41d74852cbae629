"""SliceSinker (``slice-sinker``), as ``xla/hlo/transforms/simplifiers/slice_sinker.cc``.

A group of elementwise operations whose operands are all slices, taken at the same
indices from the same sources (sources of equal dims), becomes one operation on the
sources followed by one slice per old operation::

    a = f32[9] slice(p), slice={[0:9]}      aa = add(a, a)
    b = f32[8] slice(p), slice={[2:10]}     bb = add(b, b)
  =>
    add = f32[10] add(p, p)
    aa' = f32[9] slice(add), slice={[0:9]}  bb' = f32[8] slice(add), slice={[2:10]}

XLA's conditions: every operation of the group has the same opcode and attributes
(``SameOp``) and result element type, its i-th operand is a slice of the i-th source, and
the group's elements add up to at least the source's (so no work is added).  Like XLA the
old operations are left without users for ``dce``; every computation (fused ones too) is
visited in post order.
"""
from __future__ import annotations

from hlo_opt.ir.instruction import Instruction

from hlo_opt.rewrite.rules import comp_has_opcode

# Attributes SameOp ignores (HloInstruction::IdenticalSlowPath compares none of them).
_IGNORED_ATTRS = frozenset({"metadata", "sharding", "frontend_attributes", "statistics",
                            "backend_config", "origin", "control-predecessors"})


def is_elementwise(inst) -> bool:
    """:meth:`Instruction.is_elementwise` for the instructions this pass sinks slices
    through: no fusions."""
    return inst.opcode != "fusion" and inst.is_elementwise()


def _op_key(inst) -> tuple:
    attrs = tuple(sorted((k, v) for k, v in inst.attrs.items() if k not in _IGNORED_ATTRS))
    return inst.opcode, attrs, tuple(id(c) for c in inst.called)


def _slice_config(s) -> tuple:
    return tuple(map(tuple, s.attr("slice").dims))


def _on_similar_slices(inst) -> bool:
    """IsElementwiseOperationOnSimilarSlices."""
    if any(o.opcode != "slice" for o in inst.operands):
        return False
    s0 = inst.operands[0]
    dims0 = s0.operands[0].shape.dims
    cfg0 = _slice_config(s0)
    return all(s.operands[0].shape.dims == dims0 and _slice_config(s) == cfg0
               for s in inst.operands[1:])


def _similar(op, key, candidate) -> bool:
    """IsSimilarOperationOnSlices (``key`` is ``_op_key(op)``)."""
    if candidate.user_count == 0:
        return False
    if not is_elementwise(candidate) or _op_key(candidate) != key \
            or candidate.shape.element_type != op.shape.element_type \
            or len(candidate.operands) != len(op.operands):
        return False
    cfg0 = None
    for s, mine in zip(candidate.operands, op.operands):
        if s.opcode != "slice" or s.operands[0] is not mine.operands[0]:
            return False
        cfg = _slice_config(s)
        if cfg0 is None:
            cfg0 = cfg
        elif cfg != cfg0:
            return False
    return True


def _group(op) -> list | None:
    """FindElementwiseOperationGroup: the similar operations, if sinking pays."""
    key = _op_key(op)
    found: dict = {}
    source0 = op.operands[0].operands[0]
    for s in source0.users:
        if s.opcode != "slice":
            continue
        for user in s.users:
            if user not in found and _similar(op, key, user):
                found[user] = None
    group = list(found)
    total = sum(u.shape.num_elements() for u in group)
    return group if group and total >= source0.shape.num_elements() else None


def _sink(comp, sources, group) -> None:
    """SinkSlices: one operation on the sources, a slice of it per old operation."""
    first = group[0]
    shape = sources[0].shape.with_element_type(first.shape.element_type)
    merged = first.clone_with(sources, shape, name=first.opcode)
    merged.attrs.pop("control-predecessors", None)
    comp.add_instruction(merged)
    for user in group:
        s = user.operands[0]
        new_slice = Instruction("slice", user.shape, [merged], dict(s.attrs), "slice")
        new_slice.attrs.pop("control-predecessors", None)
        comp.add_instruction(new_slice)
        user.replace_all_uses_with(new_slice)


def run_slice_sinker(module) -> bool:
    changed = False
    for comp in list(module.computations):
        if not comp_has_opcode(comp, ("slice",)):
            continue  # no operation on slices here: skip the post order
        failed: set = set()  # (key, sources) of groups that did not pay; reset on a change
        for inst in comp.post_order():
            if not is_elementwise(inst) or not inst.operands or inst.user_count == 0:
                continue
            if not _on_similar_slices(inst):
                continue
            sources = [s.operands[0] for s in inst.operands]
            memo = (_op_key(inst), inst.shape.element_type, tuple(map(id, sources)))
            if memo in failed:
                continue
            group = _group(inst)
            if group is None:
                failed.add(memo)
                continue
            _sink(comp, sources, group)
            failed.clear()
            changed = True
    return changed


class SliceSinker:
    name = "slice-sinker"

    def run(self, module) -> bool:
        return run_slice_sinker(module)
