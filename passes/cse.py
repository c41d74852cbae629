"""HloCSE (``cse``): merge identical instructions (``xla/service/hlo_cse.cc``).

Per computation, in linear time via hashing:

1. constants with the same shape (layout included) and the same value are merged
   (``{...}`` elided constants, whose value is unknown, never are);
2. walking in post order, an instruction whose opcode, shape, operands (either order for
   commutative binary ops), attributes (metadata aside) and called computations equal an
   earlier one's is replaced by it and removed with the operands it leaves dead.

Instructions without operands (other than ``partition-id``/``replica-id``), with side
effects, with control edges, and ``after-all``/``add-dependency`` (never identical in XLA)
are left alone.  Identical ``iota`` operands count as the same operand, as in XLA.  Called
computations compare structurally (``*lhs == *rhs``) through a per-computation key.
"""
from __future__ import annotations

import struct

from .dce import (SideEffects, control_successor_set, has_side_effect_no_recurse,
                  remove_instruction_and_unused_operands)
from hlo_opt.relaxed_gc import relaxed_gc
from .registry import register

# HloOpcodeIsBinaryCommutative
_COMMUTATIVE = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})
_NEVER_IDENTICAL = frozenset({"after-all", "add-dependency"})
# Attributes HloInstruction::Identical ignores.
_IGNORED_ATTRS = frozenset({"metadata", "statistics", "origin"})


class _ComputationKeys:
    """Structural keys of computations: equal keys <=> equal computations (names aside).
    A key is a small int (the structure is interned once), so an instruction's CSE key
    stays cheap to hash however large the computations it calls are."""

    def __init__(self):
        self._keys: dict = {}
        self._interned: dict = {}

    def key(self, comp):
        k = self._keys.get(comp)
        if k is None:
            self._keys[comp] = ("cycle", id(comp))
            order = comp.post_order()
            index = {inst: i for i, inst in enumerate(order)}
            rows = []
            for inst in order:
                called = inst.called
                ctrl = inst.control_predecessors
                rows.append((inst.opcode, inst.shape, tuple([index[o] for o in inst.operands]),
                             _attr_key(inst), inst.payload,
                             tuple([self.key(c) for c in called]) if called else (),
                             tuple([index.get(p, -1) for p in ctrl]) if ctrl else ()))
            params = tuple([index.get(p, -1) for p in comp.parameters])
            structure = (tuple(rows), params, index.get(comp.root, -1))
            k = self._interned.setdefault(structure, len(self._interned))
            self._keys[comp] = k
        return k


def _attr_key(inst) -> tuple:
    attrs = inst.attrs
    if _IGNORED_ATTRS.isdisjoint(attrs):
        return tuple(attrs.items())
    return tuple((k, v) for k, v in attrs.items() if k not in _IGNORED_ATTRS)


def _scalar_key(shape, text: str):
    """A fast, exact key for a scalar constant's text (None: take the slow path)."""
    et = shape.element_type
    try:
        if et == "pred":
            return {"true": True, "false": False, "1": True, "0": False}.get(text)
        if et[0] in "su" and et[1:].isdigit():
            return int(text) if text.lstrip("-").isdigit() else None
        if et in ("f32", "f64", "bf16", "f16") and text[:1] not in ("(", "{"):
            value = float(text)
            return None if value != value else struct.pack("<d", value)  # NaN: slow path
    except ValueError:
        return None
    return None


def _constant_key(inst):
    """(shape, value bytes) for a constant, or None when its value cannot be compared."""
    payload = inst.payload.strip()
    if payload == "{...}" or not inst.shape.is_array():
        return None
    if not inst.shape.dims:
        key = _scalar_key(inst.shape, payload)
        if key is not None:
            return (inst.shape, "scalar", key)
    try:
        lit = inst.literal
    except Exception:  # noqa: BLE001 - an unparsable literal is simply not merged
        return None
    if lit.elided or lit.array is None:
        return None
    return (inst.shape, lit.array.dtype.str, lit.array.tobytes())


def _combine_constants(comp) -> bool:
    seen: dict = {}
    changed = False
    ctrl = None
    for inst in list(comp._instructions):
        if inst.opcode != "constant" or inst.parent is not comp:
            continue
        key = _constant_key(inst)
        if key is None:
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = inst
            continue
        if ctrl is None:
            ctrl = control_successor_set(comp)
        if inst.control_predecessors or inst in ctrl:
            continue
        inst.replace_all_uses_with(first)
        if inst.user_count == 0 and inst is not comp.root:
            remove_instruction_and_unused_operands(comp, inst, ctrl_successors=ctrl)
        changed = True
    return changed


def _iota_id(inst) -> object:
    """Identical iotas are interchangeable operands (XLA's eq_instructions)."""
    if inst.opcode == "iota":
        return ("iota", inst.shape, inst.attrs.get("iota_dimension"))
    return inst


def _cse_key(inst, comp_keys: _ComputationKeys) -> tuple:
    ops = tuple(inst.operands)
    for o in ops:
        if o.opcode == "iota":
            ops = tuple([_iota_id(x) for x in ops])
            break
    if len(ops) == 2 and inst.opcode in _COMMUTATIVE and _order(ops[1]) < _order(ops[0]):
        ops = (ops[1], ops[0])  # either operand order is the same key
    called = inst.called
    return (inst.opcode, inst.shape, ops, _attr_key(inst), inst.payload,
            tuple([comp_keys.key(c) for c in called]) if called else ())


def _order(x):
    return (0, hash(x)) if isinstance(x, tuple) else (1, id(x))


def _dedupe_iota_operands(inst, comp) -> bool:
    """XLA replaces a later identical iota operand of one instruction by the first."""
    changed = False
    ops = inst.operands
    for i, a in enumerate(ops):
        if a.opcode != "iota":
            continue
        for j in range(i + 1, len(ops)):
            b = ops[j]
            if b is a or b.opcode != "iota" or _iota_id(a) != _iota_id(b):
                continue
            inst.replace_operand(j, a)
            changed = True
            if b.user_count == 0 and b is not comp.root and not b.control_predecessors:
                remove_instruction_and_unused_operands(comp, b)
        ops = inst.operands
    return changed


def run_cse_on_computation(comp, effects: SideEffects, comp_keys: _ComputationKeys) -> bool:
    changed = _combine_constants(comp)
    ctrl = control_successor_set(comp)
    representatives: dict = {}
    for inst in comp.post_order():
        if inst.parent is not comp:
            continue  # removed earlier in this walk
        if not inst.operands and inst.opcode not in ("partition-id", "replica-id"):
            continue
        if inst.opcode in _NEVER_IDENTICAL or has_side_effect_no_recurse(inst) or (
                inst.called and effects.instruction(inst)):
            continue
        if inst.control_predecessors or inst in ctrl:
            continue
        key = _cse_key(inst, comp_keys)
        rep = representatives.get(key)
        if rep is None:
            representatives[key] = inst
            changed |= _dedupe_iota_operands(inst, comp)
            continue
        inst.replace_all_uses_with(rep)
        remove_instruction_and_unused_operands(comp, inst, effects, ctrl)
        changed = True
    return changed


def run_cse(module) -> bool:
    effects = SideEffects()
    comp_keys = _ComputationKeys()
    changed = False
    for comp in list(module.computations):
        changed |= run_cse_on_computation(comp, effects, comp_keys)
    return changed


@register
class HloCSE:
    """Layout-sensitive, as ``HloCSE(/*is_layout_sensitive=*/true)``."""

    name = "cse"

    def run(self, module) -> bool:
        with relaxed_gc():
            return run_cse(module)
