"""Which dots XLA's Triton GEMM emitter takes, and what it fuses around them (the
decisions of XLA's ``GemmFusion``: ``CreateDotFusion``, ``ShouldTritonHandleGEMM``,
the legacy ``IsTritonSupportedInstruction`` and the profitability rules of
``triton_tiling_propagation.cc`` at ``xla_gpu_triton_fusion_level`` 2, XLA's default).

:func:`plan_dot_fusion` returns a :class:`DotFusionPlan`: the producers fused into each
dot operand (breadth first, at most four fusion parameters per operand, a node that
would exceed the limit re-queued as XLA does), the chain of users fused after the dot
(one user each, distributive over addition, their other operands broadcasts of scalars or
parameters), and ``want``: False for a "pure matmul" (nothing fused but bitcasts,
reshapes and parameters: cuBLAS is left to do it).

Approximations (XLA tracks a dimension order per fused instruction and refuses fusions
that would split a tiled dimension; here every reshape / bitcast / transpose / broadcast
is taken, slices and concatenates are not fused).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from hlo_opt.ir.instruction import Instruction

MAX_PARAMS_PER_DOT_OPERAND = 4   # TritonFusionAnalysis::kMaxParameterPerDotOperand

# IsTritonSupportedDataType (legacy emitter, Ampere+; f8 on Hopper)
_DATA_TYPES = frozenset({"pred", "s8", "s16", "s32", "f16", "bf16", "f32"})
_F8 = frozenset({"f8e4m3fn", "f8e5m2"})
_DOT_INPUT_TYPES = frozenset({"f16", "bf16", "f32"}) | _F8
_DOT_OUTPUT_TYPES = frozenset({"f16", "bf16", "f32"}) | _F8

# legacy TritonSupportedUnary/Binary/TernaryElementwise
_ANY_TYPE_OPS = frozenset({"convert", "abs", "negate", "add", "subtract", "multiply",
                           "maximum", "minimum", "compare", "select", "clamp"})
_INT_OPS = frozenset({"not", "and", "or", "xor"})
_FLOAT_OPS = frozenset({"cos", "exponential", "exponential-minus-one", "floor", "ceil",
                        "log", "log-plus-one", "rsqrt", "sin", "sqrt", "cbrt", "tan",
                        "tanh", "erf", "divide", "atan2", "power"})
_MOVEMENT = frozenset({"bitcast", "reshape", "transpose", "copy", "broadcast"})
# legacy_triton::IsDistributiveOverAddition (those whose output tiling we follow)
_DISTRIBUTIVE = frozenset({"multiply", "negate", "bitcast", "reshape", "copy",
                           "transpose", "convert"})
_PURE = frozenset({"bitcast", "dot", "parameter", "reshape"})


def _type_ok(et: str, device) -> bool:
    return et in _DATA_TYPES or (et in _F8 and device.is_at_least_hopper)


def supported_dot(dot: Instruction, device) -> bool:
    """IsTritonSupportedInstruction(dot): an Ampere+ GPU, f16/bf16/f32/f8 operands and
    result, at most one batch dimension, one contracting dimension per side, and both
    operands with one non-trivial non-contracting dimension; default operand precision
    unless an algorithm is set."""
    if not device.is_at_least_ampere or dot.opcode != "dot" or "sparsity" in dot.attrs:
        return False
    types = {o.shape.element_type for o in dot.operands[:2]}
    if not types <= _DOT_INPUT_TYPES or dot.shape.element_type not in _DOT_OUTPUT_TYPES:
        return False
    if types & _F8 and not device.is_at_least_hopper:
        return False
    if len(dot.attr("lhs_batch_dims", ())) > 1:
        return False
    for i, side in ((0, "lhs"), (1, "rhs")):
        shape = dot.operands[i].shape
        if len(dot.attr(f"{side}_contracting_dims", ())) != 1:
            return False
        used = set(dot.attr(f"{side}_batch_dims", ())) | \
            set(dot.attr(f"{side}_contracting_dims", ()))
        free = [shape.dims[d] for d in range(shape.rank) if d not in used]
        if not free or math.prod(free) <= 1:
            return False
    raw = dot.attrs.get("operand_precision")
    if raw and "algorithm" not in dot.attrs and \
            any(p.strip().upper() != "DEFAULT" for p in raw.strip("{}").split(",")):
        return False
    return True


def _supported(inst: Instruction, device) -> bool:
    """Can the emitter compute ``inst`` inside a gemm fusion (operands and result of
    supported types, an opcode it has)?"""
    if inst.shape.is_tuple() or not _type_ok(inst.shape.element_type, device):
        return False
    if any(o.shape.is_tuple() or not _type_ok(o.shape.element_type, device)
           for o in inst.operands):
        return False
    op = inst.opcode
    if op in _MOVEMENT or op in ("constant", "parameter") or op in _ANY_TYPE_OPS:
        return True
    et = (inst.operands[0].shape.element_type if inst.operands else inst.shape.element_type)
    if op in _INT_OPS:
        return et in ("pred", "s8", "s16", "s32")
    return op in _FLOAT_OPS and et in ("f16", "bf16", "f32")


def _bytes(inst: Instruction) -> int:
    return inst.shape.byte_size()


def _operands_params_or_constants(inst: Instruction, single_user: bool) -> bool:
    return all(o.opcode in ("parameter", "constant") and
               (not single_user or o.user_count == 1) for o in inst.operands)


def _worth_fusing_as_input(inst: Instruction) -> bool:
    """IsInputWorthFusing."""
    if sum(_bytes(o) for o in inst.operands) - _bytes(inst) <= 0:
        return True
    if inst.user_count > 1:
        return False
    if inst.opcode == "slice" and _operands_params_or_constants(inst, False):
        return True
    return _operands_params_or_constants(inst, True)


def _fusible_as_input(inst: Instruction, device) -> bool:
    """GetPropagatedDimOrdersAndRequirementsIfProfitablyFusible, output to input."""
    if inst.opcode in ("tuple", "get-tuple-element", "reduce", "pad", "dynamic-slice"):
        return False
    if not _supported(inst, device):
        return False
    if len(inst.operands) == 2 and inst.opcode not in _MOVEMENT:
        for o in inst.operands:
            if o.opcode == "broadcast" and o.operands[0].opcode in ("parameter", "constant"):
                return True
    return _worth_fusing_as_input(inst)


def _num_added_params(inst: Instruction) -> int:
    if inst.opcode == "parameter" or (inst.opcode == "constant" and inst.shape.rank > 0):
        return 0
    return len(inst.operands) - 1


@dataclass
class DotFusionPlan:
    dot: Instruction
    fused: set = field(default_factory=set)        # producers cloned into the fusion
    users: list = field(default_factory=list)      # the fused chain after the dot
    want: bool = False

    @property
    def output(self) -> Instruction:
        """The instruction the fusion replaces."""
        return self.users[-1] if self.users else self.dot


def _fuse_toward_operands(root: Instruction, max_params, device, fused: set) -> None:
    inputs = {root}
    queue = deque([root])
    seen = {root}
    requeued = 0
    while len(queue) > requeued:
        inst = queue.popleft()
        if max_params is not None and \
                len(inputs) + _num_added_params(inst) > max_params:
            queue.append(inst)
            requeued += 1
            continue
        requeued = 0
        if inst.opcode == "parameter" or not _fusible_as_input(inst, device):
            continue
        inputs.discard(inst)
        fused.add(inst)
        for o in inst.operands:
            if o not in seen:
                seen.add(o)
                inputs.add(o)
                queue.append(o)


def _fusible_user(user: Instruction, source: Instruction, device) -> bool:
    """Output-direction rule: distributive over addition, supported, and any other
    operand is a broadcast of a scalar or a parameter."""
    if user.opcode not in _DISTRIBUTIVE or not _supported(user, device):
        return False
    for o in user.operands:
        if o is source:
            continue
        if not (o.opcode == "parameter" or
                (o.opcode == "broadcast" and o.operands[0].shape.rank == 0)):
            return False
    return True


def plan_dot_fusion(dot: Instruction, device, triton_gemm_any: bool = False
                    ) -> DotFusionPlan | None:
    """The fusion XLA's GemmFusion would build around ``dot`` (None: the emitter cannot
    take it)."""
    if not supported_dot(dot, device):
        return None
    plan = DotFusionPlan(dot)
    for operand in dot.operands[:2]:
        _fuse_toward_operands(operand, MAX_PARAMS_PER_DOT_OPERAND, device, plan.fused)
    x = dot
    while x.user_count == 1 and not x.is_root:
        user = x.users[0]
        if user.parent is not dot.parent or not _fusible_user(user, x, device):
            break
        for o in user.operands:
            if o is not x and o.opcode != "parameter":
                _fuse_toward_operands(o, None, device, plan.fused)
        plan.users.append(user)
        x = user
    algorithm = dot.attrs.get("algorithm", "").strip().upper()
    if triton_gemm_any or algorithm.startswith("ALG_DOT_BF16_BF16_F32") or algorithm in (
            "ALG_DOT_TF32_TF32_F32", "ALG_DOT_TF32_TF32_F32_X3", "ALG_DOT_F32_F32_F32"):
        plan.want = True
    else:
        members = list(plan.fused) + plan.users
        plan.want = any(m.opcode not in _PURE for m in members)
    return plan


def should_triton_handle_gemm(dot: Instruction, device) -> bool:
    """ShouldTritonHandleGEMM: the emitter can take the dot and fusing is profitable."""
    plan = plan_dot_fusion(dot, device)
    return plan is not None and plan.want
