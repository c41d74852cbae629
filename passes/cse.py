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

import re

import struct

from hlo_opt.ir.opcodes import SIDE_EFFECT_POSSIBLE
from hlo_opt.fuel import consume_fuel
from hlo_opt.relaxed_gc import relaxed_gc

from .dce import SideEffects, control_successor_set, remove_instruction_and_unused_operands

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


def _zero_operand_ok(inst) -> bool:
    """Instructions without operands merge only when XLA's HloCSE lets them: partition-id,
    replica-id, and those marked ``frontend_attributes={_xla_cse_safe_zero_operand="true"}``
    (e.g. the GetRngSeed custom-call of rng-expander)."""
    if inst.opcode in ("partition-id", "replica-id"):
        return True
    fa = inst.attrs.get("frontend_attributes")
    return fa is not None and _CSE_SAFE_ZERO_OPERAND_RE.search(fa) is not None


_CSE_SAFE_ZERO_OPERAND_RE = re.compile(r'(?<![\w.])_xla_cse_safe_zero_operand\s*=\s*"?true"?')


def _attr_key(inst) -> tuple:
    attrs = inst.attrs
    if not attrs:
        return ()
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
    for inst in comp.instructions:
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
        if not consume_fuel("cse", lambda: f"constant %{inst.name} => %{first.name}"):
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


def _cse_key(inst, comp_keys: _ComputationKeys, with_called: bool = True) -> tuple:
    ops = tuple(inst.operands)
    for o in ops:
        if o.opcode == "iota":
            ops = tuple([_iota_id(x) for x in ops])
            break
    if len(ops) == 2 and inst.opcode in _COMMUTATIVE and _order(ops[1]) < _order(ops[0]):
        ops = (ops[1], ops[0])  # either operand order is the same key
    called = inst.called
    shape = inst.shape
    if not with_called:  # without the called computations' keys (their count instead)
        return (inst.opcode, shape, ops, _attr_key(inst), inst.payload, len(called))
    return (inst.opcode, shape, ops, _attr_key(inst), inst.payload,
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
            if not consume_fuel("cse", lambda: f"operand {j} of %{inst.name}: iota "
                                              f"%{b.name} => %{a.name}"):
                continue
            inst.replace_operand(j, a)
            changed = True
            if b.user_count == 0 and b is not comp.root and not b.control_predecessors:
                remove_instruction_and_unused_operands(comp, b)
        ops = inst.operands
    return changed


def run_cse_on_computation(comp, effects: SideEffects, comp_keys: _ComputationKeys,
                           deferrable=None) -> bool:
    """CSE in one computation.  ``deferrable`` (a :class:`_Deferral`, or None): called
    computations whose structural key may be computed only when two instructions could
    otherwise be equal (see :func:`run_cse`); None computes every key at once."""
    constants = 0
    has_ctrl = False
    for inst in comp.iter_instructions():
        if inst.opcode == "constant":
            constants += 1
        if inst.control_predecessors:
            has_ctrl = True
    # one constant has nothing to merge with
    changed = _combine_constants(comp) if constants > 1 else False
    ctrl = control_successor_set(comp) if has_ctrl else set()
    if _distinct_keys(comp, effects, comp_keys, deferrable, ctrl):
        return changed
    representatives: dict = {}
    callers_of: dict = {}  # key without the called computations -> [[inst, their keys]]
    for inst in comp.post_order():
        if inst.parent is not comp:
            continue  # removed earlier in this walk
        if not inst.operands and not _zero_operand_ok(inst):
            continue
        called = inst.called
        if inst.opcode in _NEVER_IDENTICAL or inst.has_side_effect_no_recurse() or (
                called and effects.instruction(inst)):
            continue
        if inst.control_predecessors or inst in ctrl:
            continue
        if called and deferrable is not None:
            rep = _find_caller_rep(inst, comp_keys, deferrable, callers_of)
            if rep is None:
                changed |= _dedupe_iota_operands(inst, comp)
                continue
        else:
            key = _cse_key(inst, comp_keys)
            rep = representatives.get(key)
            if rep is None:
                representatives[key] = inst
                changed |= _dedupe_iota_operands(inst, comp)
                continue
        if not consume_fuel("cse", lambda: f"%{inst.name} => %{rep.name}"):
            continue
        inst.replace_all_uses_with(rep)
        remove_instruction_and_unused_operands(comp, inst, effects, ctrl)
        changed = True
    return changed


def _distinct_keys(comp, effects: SideEffects, comp_keys: _ComputationKeys, deferrable,
                   ctrl: set) -> bool:
    """True when the walk below would merge nothing: no two instructions it considers
    could have the same key, and none has several iota operands to dedupe.  Keys change
    only after a merge, so the keys as they are now decide (in any order).  Compared here
    is a coarser key, the opcode and the operands (in the walk's order for commutative
    ops), so a clash only means "walk and see"; the called computations' keys the walk
    would compute are computed here the same way.  (Most computations, fused ones above
    all, have nothing to merge: this skips their post order.)"""
    seen = set()
    commutative = _COMMUTATIVE
    for inst in comp.iter_instructions():
        ops = inst.operands
        op = inst.opcode
        if not ops and not _zero_operand_ok(inst):
            continue
        called = inst.called
        if op in _NEVER_IDENTICAL or (op in SIDE_EFFECT_POSSIBLE and
                                      inst.has_side_effect_no_recurse()) or (
                called and effects.instruction(inst)):
            continue
        if inst.control_predecessors or inst in ctrl:
            continue
        iotas = 0
        for o in ops:
            if o.opcode == "iota":
                iotas += 1
        if iotas > 1:
            return False
        if called:
            if deferrable is None:
                for x in called:
                    comp_keys.key(x)
            else:
                for c in called:
                    if not deferrable(c):
                        for x in called:
                            comp_keys.key(x)
                        break
                else:
                    deferrable.defer(called)
        if iotas:
            key = _cse_key(inst, comp_keys, False)
        elif len(ops) == 2 and op in commutative and id(ops[1]) < id(ops[0]):
            key = (op, ops[1], ops[0])
        else:
            key = (op, *ops)
        if key in seen:
            return False
        seen.add(key)
    return True


def _find_caller_rep(inst, comp_keys: _ComputationKeys, deferrable, callers_of: dict):
    """The representative of an instruction that calls computations, or None (it becomes
    one).  Candidates are grouped by the key without the called computations; the keys of
    deferrable computations are computed only when there is a candidate to compare with
    (the same representatives as comparing full keys)."""
    called = inst.called
    base = _cse_key(inst, comp_keys, False)
    mine = None
    for c in called:
        if not deferrable(c):
            mine = tuple([comp_keys.key(x) for x in called])
            break
    else:
        deferrable.defer(called)
    cands = callers_of.get(base)
    if cands is None:
        callers_of[base] = [[inst, mine]]
        return None
    if mine is None:
        mine = tuple([comp_keys.key(x) for x in called])
    for cand in cands:
        theirs = cand[1]
        if theirs is None:
            theirs = cand[1] = tuple([comp_keys.key(x) for x in cand[0].called])
        if theirs == mine:
            return cand[0]
    cands.append([inst, mine])
    return None


class _Deferral:
    """Which called computations' keys may wait (see :func:`run_cse`): those with one
    call site, asked about while a computation nobody calls is processed.  Nothing but
    that computation changes meanwhile, so a key computed late is the key computed at
    once; :meth:`finish` then computes what computing the skipped keys would have left
    in the cache (the keys of the computations they call), as it was."""

    def __init__(self, counts: dict, callees: dict, comp_keys: _ComputationKeys):
        self.counts = counts
        self.callees = callees
        self.comp_keys = comp_keys
        self.deferred: list = []

    def __call__(self, comp) -> bool:
        return self.counts.get(comp, 0) == 1

    def defer(self, called) -> None:
        self.deferred.extend(called)

    def finish(self) -> None:
        keys = self.comp_keys
        for c in self.deferred:
            if c not in keys._keys:
                for callee in self.callees.get(c, ()):
                    keys.key(callee)
        self.deferred.clear()


def _call_graph(module) -> tuple[dict, dict]:
    """(computation -> number of call sites, computation -> the computations its
    instructions call, in order)."""
    counts: dict = {}
    callees: dict = {}
    for comp in module.computations:
        mine = None
        for inst in comp.iter_instructions():
            called = inst.called
            if called:
                if mine is None:
                    mine = callees[comp] = []
                for callee in called:
                    counts[callee] = counts.get(callee, 0) + 1
                    mine.append(callee)
    return counts, callees


def run_cse(module) -> bool:
    effects = SideEffects()
    comp_keys = _ComputationKeys()
    counts, callees = _call_graph(module)
    deferral = _Deferral(counts, callees, comp_keys)
    changed = False
    for comp in list(module.computations):
        # keys may wait only in a computation nobody calls: a called one's callees have
        # their keys computed when its callers are processed (perhaps later), as before
        if counts.get(comp, 0) == 0:
            changed |= run_cse_on_computation(comp, effects, comp_keys, deferral)
            deferral.finish()
        else:
            changed |= run_cse_on_computation(comp, effects, comp_keys)
    return changed


class HloCSE:
    """Layout-sensitive, as ``HloCSE(/*is_layout_sensitive=*/true)``."""

    name = "cse"

    def run(self, module) -> bool:
        with relaxed_gc():
            return run_cse(module)
