"""Building and growing fusion instructions (XLA's HloFusionInstruction methods).

* :func:`create_fusion` wraps an instruction in a new fusion (``CreateFusion``): a fused
  computation ``fused_computation`` with one ``param_N`` per distinct operand, the
  instruction cloned as its root; the fusion (named ``fusion``) replaces it.
* :func:`absorb` pulls another instruction or fusion into a fusion.  Uses of it inside
  the fusion read the inlined value; with ``as_output`` its results also become extra
  outputs (the fusion turns multi-output: its root becomes a ``tuple``, its users read
  ``get-tuple-element``).  This one routine is XLA's ``FuseInstruction`` (producer kept
  when it has other users: duplication), ``MergeFusionInstruction``,
  ``FuseInstructionIntoMultiOutput`` and ``MergeFusionInstructionIntoMultiOutput``.

Fusion operands stay unique and parameter numbers equal operand positions.
"""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from ._graph import add_computation, add_gte, drop_computation, remove, remove_parameter

__all__ = ["absorb", "create_fusion", "fused_parameter", "fusion_outputs", "is_mof",
           "param_for", "set_kind"]

FUSED_COMPUTATION_NAME = "fused_computation"


def is_mof(inst: Instruction) -> bool:
    """XLA's IsMultiOutputFusion: a fusion whose fused root is a tuple."""
    return inst.opcode == "fusion" and inst.called[0].root.opcode == "tuple"


def fusion_outputs(inst: Instruction) -> list[Instruction]:
    """GetOutputsOfFusible: the fused values a fusion returns (the instruction itself
    for a non-fusion)."""
    if inst.opcode != "fusion":
        return [inst]
    root = inst.called[0].root
    return list(root.operands) if root.opcode == "tuple" else [root]


def fused_parameter(fusion: Instruction, operand: Instruction) -> Instruction:
    return fusion.called[0].parameters[fusion.operands.index(operand)]


def set_kind(fusion: Instruction, kind: str) -> None:
    if fusion.attrs.get("kind") != kind:
        fusion.attrs["kind"] = kind


def _new_fused_computation(comp: Computation) -> Computation:
    fc = Computation(FUSED_COMPUTATION_NAME)
    fc.execution_thread = comp.execution_thread
    add_computation(comp.module, fc)
    return fc


def param_for(fusion: Instruction, outer: Instruction) -> Instruction:
    """The fused parameter reading ``outer`` (a new one, appended, if there is none)."""
    fc = fusion.called[0]
    for i, o in enumerate(fusion.operands):
        if o is outer:
            return fc.parameters[i]
    n = len(fc.parameters)
    p = fc.add("parameter", outer.shape, name=f"param_{n}", payload=str(n))
    fusion.operands.append(outer)
    outer._users[fusion] = None
    return p


def _drop_operand(fusion: Instruction, index: int) -> None:
    fc = fusion.called[0]
    remove_parameter(fc, fc.parameters[index])
    outer = fusion.operands.pop(index)
    if outer not in fusion.operands:
        outer._users.pop(fusion, None)


_IMMUTABLE = (tuple, int, float, str, bool)


def _clone_into(fc: Computation, inst: Instruction, operands) -> Instruction:
    attrs = inst.attrs
    if "control-predecessors" in attrs:
        attrs = {k: v for k, v in attrs.items() if k != "control-predecessors"}
    else:
        attrs = dict(attrs)
    clone = Instruction(inst.opcode, inst.shape, operands, attrs, inst.name, inst.payload,
                        inst.called, inst.called_attr)
    clone._literal = inst._literal
    parsed = inst._parsed
    if parsed:  # typed attributes parsed already (immutable values only: never shared)
        clone._parsed = {k: v for k, v in parsed.items() if isinstance(v, _IMMUTABLE)}
    return fc.add_instruction(clone)


def create_fusion(comp: Computation, inst: Instruction, kind: str,
                  name: str = "fusion") -> Instruction:
    """Wrap ``inst`` in a new fusion that replaces it in ``comp``."""
    fc = _new_fused_computation(comp)
    operands: list[Instruction] = []
    params: dict[Instruction, Instruction] = {}
    for o in inst.operands:
        if o not in params:
            n = len(operands)
            params[o] = fc.add("parameter", o.shape, name=f"param_{n}", payload=str(n))
            operands.append(o)
    fc.root = _clone_into(fc, inst, [params[o] for o in inst.operands])
    fusion = Instruction("fusion", inst.shape, operands, {"kind": kind, "calls": ""}, name,
                         called=[fc], called_attr="calls")
    comp.add_instruction(fusion)
    inst.replace_all_uses_with(fusion)
    remove(comp, inst)
    return fusion


def _inline(fusion: Instruction, other: Instruction) -> list[Instruction]:
    """Copy ``other`` (an instruction or a fusion's body) into ``fusion``; returns the
    fused values of its outputs."""
    fc = fusion.called[0]
    if other.opcode != "fusion":
        return [_clone_into(fc, other, [param_for(fusion, o) for o in other.operands])]
    oc = other.called[0]
    mapping: dict[Instruction, Instruction] = {}
    root = oc.root
    mof = root.opcode == "tuple"
    for inst in oc.post_order():
        if inst.opcode == "parameter":
            mapping[inst] = param_for(fusion, other.operands[inst.parameter_number])
        elif inst is root and mof:
            continue
        else:
            mapping[inst] = _clone_into(fc, inst, [mapping[o] for o in inst.operands])
    return [mapping[o] for o in root.operands] if mof else [mapping[root]]


def _make_mof(fusion: Instruction) -> None:
    """Turn a single-output fusion into a multi-output one (root tuple, GTE users)."""
    fc = fusion.called[0]
    comp = fusion.parent
    root = fc.root
    t = fc.add("tuple", Shape.tuple([root.shape]), [root], name="tuple")
    fc.root = t
    old_users = fusion.users
    was_root = fusion.is_root
    fusion.shape = t.shape
    gte = add_gte(comp, fusion, 0)
    for u in old_users:
        u.replace_operand_with(fusion, gte)
    if was_root:
        comp.root = gte


def _append_output(fusion: Instruction, value: Instruction) -> int:
    fc = fusion.called[0]
    t = fc.root
    t.operands.append(value)
    value._users[t] = None
    t.shape = Shape.tuple(o.shape for o in t.operands)
    fusion.shape = t.shape
    return len(t.operands) - 1


def absorb(fusion: Instruction, other: Instruction, as_output: bool = False) -> list:
    """Fuse ``other`` into ``fusion`` (see the module docstring); returns the fused
    values of ``other``'s outputs.  ``other`` is removed when nothing outside uses it."""
    comp = fusion.parent
    module = comp.module
    fc = fusion.called[0]
    outs = _inline(fusion, other)
    # uses of `other` inside the fusion now read the inlined values
    for i in range(len(fusion.operands) - 1, -1, -1):
        o = fusion.operands[i]
        if o is other:
            value = outs[0] if len(outs) == 1 and not is_mof(other) else \
                fc.add("tuple", other.shape, list(outs), name="tuple")
        elif o.opcode == "get-tuple-element" and o.operands[0] is other:
            value = outs[o.attr("index")]
        else:
            continue
        fc.parameters[i].replace_all_uses_with(value)
        _drop_operand(fusion, i)
        if o is not other and o.user_count == 0 and not o.is_root:
            remove(comp, o)
    if as_output:
        if not is_mof(fusion):
            _make_mof(fusion)
        base = None
        for out in outs:
            k = _append_output(fusion, out)
            base = k if base is None else base
        if is_mof(other):
            for g in other.users:
                if g.opcode == "get-tuple-element":
                    idx = base + g.attr("index")
                    g.replace_operand_with(other, fusion)
                    g.set_attr("index", idx)
        elif other.user_count or other.is_root:
            gte = add_gte(comp, fusion, base)
            other.replace_all_uses_with(gte)
    if other.user_count == 0 and not other.is_root:
        called = other.called[0] if other.opcode == "fusion" else None
        remove(comp, other)
        if called is not None and module is not None and called.module is module:
            drop_computation(module, called)
    return outs


def remove_fusion(comp: Computation, fusion: Instruction) -> None:
    """Remove an unused fusion and its fused computation."""
    called = fusion.called[0]
    remove(comp, fusion)
    if comp.module is not None and called.module is comp.module:
        drop_computation(comp.module, called)


def absorb_consumer(fusion: Instruction, consumer: Instruction) -> Instruction:
    """Grow ``fusion`` downwards by its only user ``consumer`` (not a fusion): the
    consumer's clone becomes the new fused root and the fusion takes its place.  The same
    fusion as fusing the producer fusion into a new fusion of ``consumer``, built in time
    proportional to the consumer instead of the whole producer body."""
    comp = fusion.parent
    fc = fusion.called[0]
    old_root = fc.root
    operands = [old_root if o is fusion else param_for(fusion, o) for o in consumer.operands]
    clone = _clone_into(fc, consumer, operands)
    fc.root = clone
    fusion.shape = consumer.shape
    was_root = consumer.is_root
    users = consumer.users
    for u in users:
        u.replace_operand_with(consumer, fusion)
    if was_root:
        comp.root = fusion
    remove(comp, consumer)
    return fusion
