"""Which outputs share an operand's buffer, for copy-insertion (the GPU's rules,
xla/service/gpu/buffer_sharing.cc, and HloDataflowAnalysis's in-place pairs).

* ``in_place_pairs``: outputs that must share the buffer of an operand
  (GetInPlaceInputOutputPairs: dynamic-update-slice, scatter, fusions rooted in them,
  custom-calls with ``output_to_operand_aliasing``; and, for copy insertion's purposes, a
  ``while``'s init and output at every element its body writes).
* ``can_share``: may an output overwrite the buffer of an operand it reads in the same
  instruction (CanShareOperandBufferWithUser with the GPU hint): elementwise ops of equal
  shape, fusions whose parameter reaches the output only elementwise
  (FusionCanShareBufferHint), in-place pairs, cuSOLVER cholesky, conditionals whose
  branches can.
"""
from __future__ import annotations

from hlo_opt.ir.opcodes import ELEMENTWISE

from hlo_opt.analysis.dataflow import (ROOT, Dataflow, array_leaves, output_to_operand_aliasing,
                                       subshape)


def _strip_bitcasts(inst):
    while inst.opcode == "bitcast":
        inst = inst.operands[0]
    return inst


def _indexed_fusion_outputs(fusion):
    """(output index, fused value) of each of ``fusion``'s outputs."""
    outs = fusion.fusion_outputs()
    if fusion.is_multi_output_fusion:
        return [((k,), r) for k, r in enumerate(outs)]
    return [((), outs[0])]


def in_place_pairs(inst, flow: Dataflow | None = None) -> list:
    """(operand number, operand leaf index, output index) that must share a buffer."""
    op = inst.opcode
    if op == "dynamic-update-slice":
        return [(0, (), ())]
    if op == "scatter":
        n = len(inst.operands) // 2
        return [(i, (), (i,) if n > 1 else ()) for i in range(n)]
    if op == "fusion":
        out = []
        for index, r in _indexed_fusion_outputs(inst):
            x = _strip_bitcasts(r)
            if x.opcode == "dynamic-update-slice":
                inputs = [((), x.operands[0])]
            elif x.opcode == "scatter":
                n = len(x.operands) // 2
                inputs = [((i,) if n > 1 else (), x.operands[i]) for i in range(n)]
            else:
                continue
            for sub, operand in inputs:
                y = _strip_bitcasts(operand)
                if y.opcode == "parameter":
                    out.append((y.parameter_number, (), index + sub))
        return out
    if op == "custom-call":
        return output_to_operand_aliasing(inst)
    if op == "while" and flow is not None:
        return [(0, i, i) for i in array_leaves(inst.shape) if not flow.passes_through(inst, i)]
    return []


def _elementwise_on(inst, operand_index: int) -> bool:
    if inst.opcode in ELEMENTWISE:
        return True
    if inst.opcode == "dynamic-update-slice":
        return operand_index == 0
    return False


def fusion_can_share(fusion, j: int, out_index) -> bool:
    """FusionCanShareBufferHint: fused parameter ``j`` reaches output ``out_index`` only
    through elementwise ops and bitcasts (a dynamic-update-slice root from its first
    operand, or reading the same slice it writes), reaches no other output of a
    non-elementwise multi-output fusion, and the two buffers have the same size."""
    operand_shape = fusion.operands[j].shape
    out_shape = subshape(fusion.shape, out_index)
    if operand_shape != out_shape:
        if not operand_shape.is_array() or not out_shape.is_array():
            return False
        if operand_shape.num_elements() != out_shape.num_elements() or \
                operand_shape.byte_size() != out_shape.byte_size():
            return False
    comp = fusion.called[0]
    param = comp.parameters[j]
    root = comp.root
    output = root.operands[out_index[0]] if root.opcode == "tuple" else root
    hero = output.operands[0] if output.opcode == "bitcast" else output
    visited = {param}
    queue = [param]
    found = False
    while queue:
        x = queue.pop(0)
        if x is output:
            found = True
        for user in x.users:
            if user not in visited:
                visited.add(user)
                queue.append(user)
            k = user.operands.index(x)
            if user is hero and user.opcode == "scatter":
                n = len(user.operands) // 2
                if k < n and user.operands.count(x) == 1:
                    continue
            if hero.opcode == "dynamic-update-slice" and user.opcode == "dynamic-slice" and \
                    hero.operands[0] is user.operands[0] and \
                    user.shape == hero.operands[1].shape:
                if not (user.shape.num_elements() == 1 and
                        hero.operands[1].shape.num_elements() == 1):
                    if any(user.operands[i] is not hero.operands[i + 1]
                           for i in range(1, len(user.operands))):
                        return False
            elif (not _elementwise_on(user, k) or user.opcode == "copy") and \
                    user.opcode not in ("bitcast", "tuple"):
                if not (user is hero and user.opcode == "dynamic-update-slice" and k == 1):
                    return False
    if root.opcode == "tuple" and hero.opcode not in ELEMENTWISE:
        if any(o is not output and o in visited for o in root.operands):
            return False
    return found


def can_share(flow: Dataflow, user, j: int, read_index, out_index) -> bool:
    """May ``user``'s output ``out_index`` overwrite the buffer of what it reads at operand
    ``j``, leaf ``read_index``, while it runs?"""
    if (j, read_index, out_index) in in_place_pairs(user, flow):
        return True
    op = user.opcode
    if op == "fusion":
        return not read_index and fusion_can_share(user, j, out_index)
    if op == "custom-call":
        return user.custom_call_target == "__cusolver$cholesky" and out_index == (0,)
    if op == "conditional":
        return _conditional_can_share(flow, user, j, read_index, out_index)
    if read_index or out_index or op == "copy" or op not in ELEMENTWISE:
        return False
    return user.operands[j].shape == user.shape


def _conditional_can_share(flow, cond, j, read_index, out_index) -> bool:
    """A conditional reads operand ``j`` into branch ``j - 1``: sharing is fine when that
    branch writes its result at ``out_index`` after its last read of the parameter (or
    in place over it), as XLA orders an operand use before the branches' definitions."""
    if j == 0:
        return False
    branch = cond.called[j - 1]
    param = branch.parameters[0]
    r = flow.value_at(branch.root, out_index)
    if r[0].opcode in ("parameter", "constant") or r[0].parent is not branch:
        return False
    definer = r[0]
    for reader, k, idx in flow.readers((param, read_index)):
        if reader is ROOT:
            return False
        if flow.before(reader, definer):
            continue
        if reader is definer and can_share(flow, definer, k, idx, r[1]):
            continue
        return False
    return True


__all__ = ["can_share", "fusion_can_share", "in_place_pairs"]
