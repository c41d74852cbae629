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

Both can *move* what they take in instead of copying it (``move=True``) when the source
dies with the edit: the result is the same module, names included (the new names are
taken, and the old ones released, where copying would).
"""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.graph import (add_computation, add_gte, drop_computation, remove,
                                   remove_parameter)

__all__ = ["absorb", "clone_into", "create_fusion", "fused_parameter", "param_for", "set_kind"]

FUSED_COMPUTATION_NAME = "fused_computation"


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
    outer.add_user(fusion)
    return p


def _drop_operand(fusion: Instruction, index: int) -> None:
    fc = fusion.called[0]
    remove_parameter(fc, fc.parameters[index])
    outer = fusion.operands.pop(index)
    if outer not in fusion.operands:
        outer.remove_user(fusion)


_IMMUTABLE = (tuple, int, float, str, bool)


def _clone_into(fc: Computation, inst: Instruction, operands) -> Instruction:
    attrs = inst.attrs
    if "control-predecessors" in attrs:
        attrs = {k: v for k, v in attrs.items() if k != "control-predecessors"}
    else:
        attrs = dict(attrs)
    clone = Instruction(inst.opcode, inst.shape, operands, attrs, inst.name, inst.payload,
                        inst.called, inst.called_attr)
    # the literal and the typed attributes parsed already (immutable values only: never
    # shared)
    clone.copy_caches_from(inst, lambda v: isinstance(v, _IMMUTABLE))
    return fc.add_instruction(clone)


def clone_into(fc: Computation, inst: Instruction, operands) -> Instruction:
    """A copy of ``inst`` reading ``operands``, added to ``fc`` (control edges dropped)."""
    return _clone_into(fc, inst, operands)


def create_fusion(comp: Computation, inst: Instruction, kind: str,
                  name: str = "fusion", move: bool = False) -> Instruction:
    """Wrap ``inst`` in a new fusion that replaces it in ``comp``.  ``move``: move
    ``inst`` itself into the fused computation (when no control edge is involved) rather
    than a copy of it: the same result, names included."""
    fc = _new_fused_computation(comp)
    operands: list[Instruction] = []
    params: dict[Instruction, Instruction] = {}
    for o in inst.operands:
        if o not in params:
            n = len(operands)
            params[o] = fc.add("parameter", o.shape, name=f"param_{n}", payload=str(n))
            operands.append(o)
    if move and _wrappable(comp, inst):
        return _wrap_moving(comp, fc, inst, operands, params, kind, name)
    fc.root = _clone_into(fc, inst, [params[o] for o in inst.operands])
    fusion = Instruction("fusion", inst.shape, operands, {"kind": kind, "calls": ""}, name,
                         called=[fc], called_attr="calls")
    comp.add_instruction(fusion)
    inst.replace_all_uses_with(fusion)
    remove(comp, inst)
    return fusion


def _wrappable(comp: Computation, inst: Instruction) -> bool:
    """Can create_fusion move ``inst`` itself into its fusion (no control edge involved,
    which copies drop)?"""
    return comp.module is not None and not inst.has_control_edges and \
        "control-predecessors" not in inst.attrs


def _wrap_moving(comp: Computation, fc: Computation, inst: Instruction, operands: list,
                 params: dict, kind: str, name: str) -> Instruction:
    """create_fusion's second half, moving ``inst`` into ``fc``: its new name is taken
    where the copy's would be and its old one released where removing it would; its
    outer operands and users see the same edits in the same order."""
    module = comp.module
    old_name = inst.name
    was_root = comp.root is inst
    for o in inst.operands:
        o.remove_user(inst)
    comp.unlink(inst)
    inner = [params[o] for o in inst.operands]
    inst.operands = inner
    for o in inner:
        o.add_user(inst)
    users = inst.take_users()
    fc.add_instruction(inst)
    fc.root = inst
    fusion = Instruction("fusion", inst.shape, operands, {"kind": kind, "calls": ""}, name,
                         called=[fc], called_attr="calls")
    comp.add_instruction(fusion)
    for user in users:  # inst.replace_all_uses_with(fusion)
        user.replace_operand_with(inst, fusion)
    if was_root:
        comp.root = fusion
    module.release_name(old_name)
    return fusion


def _move_into(fc: Computation, inst: Instruction, operands, old_names: list) -> Instruction:
    """Move ``inst`` into ``fc`` reading ``operands`` (the counterpart of
    :func:`_clone_into` for an instruction that dies with the absorb): its users
    re-register as they move, in post order, as copies get them; its name goes to
    ``old_names`` (released by the caller where the copy's source would be)."""
    for o in inst.operands:
        o.remove_user(inst)
    inst.operands = operands
    inst.take_users()
    for o in operands:
        o.add_user(inst)
    inst.parent.unlink(inst)
    old_names.append(inst.name)
    fc.add_instruction(inst)
    return inst


def _inline(fusion: Instruction, other: Instruction, clones: list | None = None,
            old_names: list | None = None) -> list[Instruction]:
    """Copy ``other`` (an instruction or a fusion's body) into ``fusion``; returns the
    fused values of its outputs (``clones``, when given, receives the new fused
    instructions in post order).  ``old_names`` given: ``other`` dies with this fusion
    (see :func:`_movable`), so its instructions move into the fusion instead of being
    copied (:func:`_move_into`).  Everything a copy would observe is kept: the new names
    (taken in the same order), the parameters (same calls in the same order), each
    instruction's users and the insertion order of the fused computation."""
    fc = fusion.called[0]
    if other.opcode != "fusion":
        operands = [param_for(fusion, o) for o in other.operands]
        placed = _clone_into(fc, other, operands) if old_names is None else \
            _move_into(fc, other, operands, old_names)
        if clones is not None:
            clones.append(placed)
        return [placed]
    oc = other.called[0]
    mapping: dict[Instruction, Instruction] = {}
    root = oc.root
    mof = root.opcode == "tuple"
    for inst in oc.post_order():
        if inst.opcode == "parameter":
            mapping[inst] = param_for(fusion, other.operands[int(inst.payload)])
        elif inst is root and mof:
            continue
        else:
            operands = [mapping[o] for o in inst.operands]
            placed = mapping[inst] = _clone_into(fc, inst, operands) if old_names is None \
                else _move_into(fc, inst, operands, old_names)
            if clones is not None:
                clones.append(placed)
    return [mapping[o] for o in root.operands] if mof else [mapping[root]]


def _movable(fusion: Instruction, other: Instruction, comp: Computation, module,
             as_output: bool) -> bool:
    """Can :func:`absorb` move ``other`` (or its fused body) into ``fusion`` instead of
    copying it?  Only when the copy's source dies with this absorb and no control edge is
    involved (copies drop those): without ``as_output``, ``other`` feeds nothing but
    ``fusion``; with it, ``other`` is a fusion whose users all move to the fusion's
    outputs (a multi-output ``other``: all read through get-tuple-element)."""
    if module is None or other.has_control_edges:
        return False
    if as_output:
        if other.opcode != "fusion":
            return False  # the value itself has to stay until its users move
        if other.called[0].root.opcode == "tuple":
            for u in other.iter_users():
                if u is not fusion and u.opcode != "get-tuple-element":
                    return False
    else:
        if other.user_count != 1 or not other.has_user(fusion) or comp.root is other:
            return False
        if other.opcode != "fusion":
            return other.opcode != "parameter" and "control-predecessors" not in other.attrs
    oc = other.called[0]
    if oc.module is not module:
        return False
    for inst in oc.iter_instructions():
        if inst.has_control_edges or \
                "control-predecessors" in inst.attrs:
            return False
    return True


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
    value.add_user(t)
    t.shape = Shape.tuple(o.shape for o in t.operands)
    fusion.shape = t.shape
    return len(t.operands) - 1


def absorb(fusion: Instruction, other: Instruction, as_output: bool = False,
           clones: list | None = None, move: bool = False) -> list:
    """Fuse ``other`` into ``fusion`` (see the module docstring); returns the fused
    values of ``other``'s outputs.  ``other`` is removed when nothing outside uses it.
    ``clones``, when given, receives the new fused instructions in post order.  ``move``:
    when ``other`` would be removed, move its instructions instead of copying them (see
    :func:`_movable`; the result is the same, names included; ``other`` itself then
    lives on inside the fusion, or as an empty fusion outside any computation)."""
    comp = fusion.parent
    module = comp.module
    fc = fusion.called[0]
    moved_names = None
    if move and _movable(fusion, other, comp, module, as_output):
        moved_names = []
        outs = _inline(fusion, other, clones, moved_names)
    else:
        outs = _inline(fusion, other, clones)
    # uses of `other` inside the fusion now read the inlined values
    for i in range(len(fusion.operands) - 1, -1, -1):
        o = fusion.operands[i]
        if o is other:
            value = outs[0] if len(outs) == 1 and not other.is_multi_output_fusion else \
                fc.add("tuple", other.shape, list(outs), name="tuple")
        elif o.opcode == "get-tuple-element" and o.operands[0] is other:
            value = outs[o.attr("index")]
        else:
            continue
        fc.parameters[i].replace_all_uses_with(value)
        _drop_operand(fusion, i)
        if o is not other and not o.user_count and comp.root is not o:
            remove(comp, o)
    if as_output:
        if not fusion.is_multi_output_fusion:
            _make_mof(fusion)
        base = None
        for out in outs:
            k = _append_output(fusion, out)
            base = k if base is None else base
        if other.is_multi_output_fusion:
            for g in other.users:
                if g.opcode == "get-tuple-element":
                    idx = base + g.attr("index")
                    g.replace_operand_with(other, fusion)
                    g.set_attr("index", idx)
        elif other.user_count or other.is_root:
            gte = add_gte(comp, fusion, base)
            other.replace_all_uses_with(gte)
    if moved_names is not None:
        # where the copy's source would go: the emptied fusion (no users left, see
        # _movable), and the old names
        if other.opcode == "fusion":
            called = other.called[0]
            remove(comp, other)
            drop_computation(module, called)
        for name in moved_names:
            module.release_name(name)
        return outs
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
