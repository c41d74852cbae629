"""Rewrite rules as data: patterns over instructions, rule tables indexed by opcode.

In the spirit of tinygrad's ``PatternMatcher``: a :class:`Pat` describes an instruction
(opcode(s), operand patterns, a capture name, an extra predicate); a :class:`Rule` pairs a
pattern with a function ``fn(ctx, **captures)`` that returns the replacement instruction,
:data:`CHANGED` (it edited in place) or ``None`` (no rewrite).  :class:`Rules` indexes rules
by root opcode and composes with ``+``.

A capture name used twice must bind the *same* instruction, so ``x - x`` is simply
``P("subtract", X("x"), X("x"))``.  ``commute=True`` on a binary pattern also tries the
operands swapped.

:class:`RewriteCtx` is what rule functions receive: the options, the instruction being
rewritten (``ctx.inst``) and :class:`~passes._build.Builder` methods (``ctx.b``) that create
shape-correct instructions next to it.  :func:`run_rules` drives a table over a
computation in post order until nothing changes (bounded like XLA's rerun limit).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.opcodes import SIDE_EFFECTING

from ._build import Builder


class _Changed:
    def __repr__(self):
        return "CHANGED"


CHANGED = _Changed()  # a rule edited instructions in place (no single replacement)


# ---- patterns ------------------------------------------------------------------------------
class Pat:
    """Matches an instruction by opcode, operands, capture name and predicate."""

    __slots__ = ("ops", "src", "name", "pred", "commute", "rest", "named")

    def __init__(self, op=None, *src: "Pat", name: str | None = None,
                 pred: Callable[[Instruction], bool] | None = None, commute: bool = False,
                 rest: bool = False):
        if op is None:
            self.ops = None
        elif isinstance(op, str):
            self.ops = frozenset((op,))
        else:
            self.ops = frozenset(op)
        self.src = src if src else None
        self.name = name
        self.pred = pred
        self.commute = commute
        self.rest = rest  # True: ``src`` matches a prefix of the operands (variadic ops)
        # whether this pattern or a sub-pattern captures names (else no trial copies)
        self.named = name is not None or any(p.named for p in (self.src or ()))

    def match(self, inst: Instruction, binds: dict) -> bool:
        if self.ops is not None and inst.opcode not in self.ops:
            return False
        if self.name is not None:
            prev = binds.get(self.name)
            if prev is not None and prev is not inst:
                return False
        if self.src is not None:
            ops = inst.operands
            if len(ops) != len(self.src):
                if not (self.rest and len(ops) > len(self.src)):
                    return False
                ops = ops[:len(self.src)]
            named = any(p.named for p in self.src)
            if self.commute and len(ops) == 2:
                trial = dict(binds) if named else binds
                if self.src[0].match(ops[0], trial) and self.src[1].match(ops[1], trial):
                    if named:
                        binds.update(trial)
                else:
                    trial = dict(binds) if named else binds
                    if not (self.src[0].match(ops[1], trial) and self.src[1].match(ops[0], trial)):
                        return False
                    if named:
                        binds.update(trial)
            else:
                trial = dict(binds) if named else binds
                for p, o in zip(self.src, ops):
                    if not p.match(o, trial):
                        return False
                if named:
                    binds.update(trial)
        if self.pred is not None and not self.pred(inst):
            return False
        if self.name is not None:
            binds[self.name] = inst
        return True

    def __repr__(self):
        ops = "|".join(sorted(self.ops)) if self.ops else "*"
        inner = ", ".join(map(repr, self.src)) if self.src else ""
        return f"{ops}({inner})" + (f":{self.name}" if self.name else "")


def P(op, *src: Pat, name: str | None = None, pred=None, commute: bool = False,
      rest: bool = False) -> Pat:
    return Pat(op, *src, name=name, pred=pred, commute=commute, rest=rest)


def X(name: str | None = None, pred=None) -> Pat:
    """Any instruction."""
    return Pat(None, name=name, pred=pred)


def C(name: str | None = None, pred=None) -> Pat:
    """A constant instruction (with a known value)."""
    def ok(i):
        return not i.literal.elided and (pred is None or pred(i))
    return Pat("constant", name=name, pred=ok)


def NC(name: str | None = None, pred=None) -> Pat:
    """A non-constant instruction."""
    return Pat(None, name=name,
               pred=(lambda i: i.opcode != "constant" and (pred is None or pred(i))))


def SC(name: str | None = None, pred=None) -> Pat:
    """A constant whose shape is an effective scalar (one element)."""
    def ok(i):
        return (i.shape.is_array() and i.shape.num_elements() == 1 and not i.literal.elided
                and (pred is None or pred(i)))
    return Pat("constant", name=name, pred=ok)


def BSC(name: str | None = None, pred=None, bcast: str | None = None) -> Pat:
    """broadcast(rank-0 constant); ``name`` captures the constant."""
    def ok(i):
        return i.shape.rank == 0 and not i.literal.elided and (pred is None or pred(i))
    return Pat("broadcast", Pat("constant", name=name, pred=ok), name=bcast)


# ---- rules -----------------------------------------------------------------------------
@dataclass
class Rule:
    pat: Pat
    fn: Callable
    label: str
    exact: bool = True  # False: may change float rounding (stated tolerance in tests)


def rule(pat: Pat, label: str, exact: bool = True):
    """Decorator: ``@rule(P("add", X("a"), C("c")), "A + 0 => A")``."""
    def deco(fn):
        return Rule(pat, fn, label, exact)
    return deco


class Rules:
    """Rules indexed by root opcode; ``+`` concatenates (order = priority)."""

    def __init__(self, rules: Iterable[Rule] = ()):
        self.rules: list[Rule] = list(rules)
        self._index: dict[str, list[Rule]] = {}
        self._any: list[Rule] = []
        for r in self.rules:
            if r.pat.ops is None:
                self._any.append(r)
            else:
                for op in r.pat.ops:
                    self._index.setdefault(op, []).append(r)

    def __add__(self, other: "Rules") -> "Rules":
        return Rules(self.rules + other.rules)

    def for_op(self, opcode: str) -> list[Rule]:
        lst = self._index.get(opcode)
        if not self._any:
            return lst or []
        return (lst or []) + self._any

    def counts(self) -> dict[str, int]:
        """Rule count per root opcode."""
        return {op: len(rs) for op, rs in sorted(self._index.items())}

    def __len__(self):
        return len(self.rules)


# ---- context -----------------------------------------------------------------------------
@dataclass
class RewriteCtx:
    comp: Computation
    opts: object
    b: Builder
    inst: Instruction | None = None
    fired: Counter = field(default_factory=Counter)
    inexact_fired: Counter = field(default_factory=Counter)
    ctrl_succ: set = field(default_factory=set)
    inexact: bool = False  # a rule sets this when one particular firing may change floats

    @property
    def module(self):
        return self.comp.module


def compatible(a, b) -> bool:
    return a.same_dims_and_type(b)


def removable(inst: Instruction, ctrl_succ: set) -> bool:
    return (inst.parent is not None and inst.user_count == 0 and not inst.is_root
            and inst.opcode != "parameter" and inst.opcode not in SIDE_EFFECTING
            and not inst.control_predecessors and inst not in ctrl_succ
            and not inst.control_successors
            and not (inst.opcode == "custom-call"
                     and inst.attrs.get("custom_call_has_side_effect") == "true"))


def remove_dead(comp: Computation, inst: Instruction, ctrl_succ: set) -> int:
    """Remove ``inst`` if unused, then operands that became unused (XLA's
    RemoveInstructionAndUnusedOperands).  Returns how many were removed."""
    removed = 0
    stack = [inst]
    while stack:
        i = stack.pop()
        if not removable(i, ctrl_succ) or i.parent is not comp:
            continue
        ops = list(dict.fromkeys(i.operands))
        _remove(comp, i, bool(ctrl_succ))
        removed += 1
        stack.extend(ops)
    return removed


def _remove(comp: Computation, inst: Instruction, has_ctrl: bool) -> None:
    comp.remove_instruction(inst)  # O(1): the IR keeps control edges both ways


def replace(ctx: RewriteCtx, old: Instruction, new: Instruction) -> None:
    """Point every use of ``old`` (and a root) at ``new``; drop ``old`` and dead operands."""
    comp = ctx.comp
    if new.parent is None:
        comp.add_instruction(new)
    if "metadata" in old.attrs and "metadata" not in new.attrs and new in ctx.b.created:
        new.attrs["metadata"] = old.attrs["metadata"]
    if "sharding" in old.attrs and "sharding" not in new.attrs and new in ctx.b.created:
        new.attrs["sharding"] = old.attrs["sharding"]
    was_root = old.is_root
    old.replace_all_uses_with(new)
    if was_root and new in ctx.b.created and new.shape.same_dims_and_type(old.shape):
        new.shape = old.shape  # keep the root's layout
    remove_dead(comp, old, ctx.ctrl_succ)


def _sharding_conflict(old: Instruction, new: Instruction, created) -> bool:
    s_old = old.attrs.get("sharding")
    s_new = new.attrs.get("sharding")
    return s_new is not None and new not in created and s_old != s_new


def try_rules(ctx: RewriteCtx, rules: Rules, inst: Instruction):
    """Apply the first matching rule to ``inst``; returns the replacement, CHANGED or None."""
    for r in rules.for_op(inst.opcode):
        binds: dict = {}
        if not r.pat.match(inst, binds):
            continue
        ctx.inst = inst
        mark = len(ctx.b.created)
        old_ops = list(inst.operands)
        ctx.inexact = False
        res = r.fn(ctx, **binds)
        if res is None or res is inst:
            ctx.b.discard_since(mark)
            continue
        if res is CHANGED:
            ctx.fired[r.label] += 1
            if not r.exact or ctx.inexact:
                ctx.inexact_fired[r.label] += 1
            ctx.b.discard_since(mark)
            for o in old_ops:  # operands the in-place edit stopped using
                if o.user_count == 0:
                    remove_dead(ctx.comp, o, ctx.ctrl_succ)
            return CHANGED
        if not ctx.opts.same_shape(res.shape, inst.shape) or \
                _sharding_conflict(inst, res, ctx.b.created_set):
            ctx.b.discard_since(mark)
            continue
        ctx.fired[r.label] += 1
        if not r.exact or ctx.inexact:
            ctx.inexact_fired[r.label] += 1
        replace(ctx, inst, res)
        ctx.b.discard_since(mark)  # intermediate builds that ended up unused
        return res
    return None


def control_successors(comp: Computation) -> set:
    """The instructions of ``comp`` that are some instruction's control predecessor."""
    return {i for i in comp._instructions if i.control_successors}


def run_rules(comp: Computation, rules: Rules, opts, fired: Counter | None = None,
              inexact: Counter | None = None, max_sweeps: int = 50,
              skip: Callable[[Instruction], bool] | None = None) -> bool:
    """Sweep ``comp`` in post order applying ``rules`` until a sweep changes nothing."""
    changed = False
    b = Builder(comp)
    ctx = RewriteCtx(comp, opts, b)
    for _ in range(max_sweeps):
        ctx.ctrl_succ = control_successors(comp)
        sweep_changed = False
        for inst in comp.post_order():
            # A new replacement is tried again at once (bounded), the way XLA's visitor would
            # meet it on its next run, so chains collapse in one sweep.
            for _retry in range(8):
                if inst.parent is not comp or inst.control_predecessors \
                        or inst in ctx.ctrl_succ or (skip is not None and skip(inst)):
                    break
                b.created = []
                b.created_set = set()
                res = try_rules(ctx, rules, inst)
                if res is None:
                    break
                sweep_changed = True
                if res is CHANGED:
                    continue  # in place: the same instruction may simplify further
                if res.parent is not comp:
                    break
                inst = res
        if not sweep_changed:
            break
        changed = True
    if fired is not None:
        fired.update(ctx.fired)
    if inexact is not None:
        inexact.update(ctx.inexact_fired)
    return changed
