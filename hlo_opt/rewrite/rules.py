"""Rewrite rules as data: patterns over instructions, rule tables indexed by opcode.

In the spirit of tinygrad's ``PatternMatcher``: a :class:`Pat` describes an instruction
(opcode(s), operand patterns, a capture name, an extra predicate); a :class:`Rule` pairs a
pattern with a function ``fn(ctx, **captures)`` that returns the replacement instruction,
:data:`CHANGED` (it edited in place) or ``None`` (no rewrite).  :class:`Rules` indexes rules
by root opcode and composes with ``+``.

A capture name used twice must bind the *same* instruction, so ``x - x`` is simply
``P("subtract", X("x"), X("x"))``.  ``commute=True`` on a binary pattern also tries the
operands swapped.  A rule's ``when(opts)`` names the options it needs.

:class:`RewriteCtx` is what rule functions receive: the options, the instruction being
rewritten (``ctx.inst``) and :class:`~hlo_opt.rewrite.builder.Builder` methods (``ctx.b``)
that create shape-correct instructions next to it.  :func:`run_rules` drives a table over a
computation in post order until nothing changes (bounded like XLA's rerun limit).

Speed: most instructions match no rule, so that case is kept cheap.  A table answers
:meth:`Rules.candidates` from a cache keyed by the opcode, the operand count and the
leading operands' opcodes; each rule's root pattern is compiled once into a function that
makes the pattern's checks in order and allocates only when it matches.  The rules' cheap
necessary conditions belong in their patterns' predicates, so that a rule function runs
only where it has a real chance.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from hlo_opt.fuel import consume_fuel, has_fuel, limited
from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.rewrite.builder import Builder
from hlo_opt.rewrite.dead import removable, remove_dead  # noqa: F401 - passes import them here


class _Changed:
    def __repr__(self):
        return "CHANGED"


CHANGED = _Changed()  # a rule edited instructions in place (no single replacement)


# ---- patterns ------------------------------------------------------------------------------
class Pat:
    """Matches an instruction by opcode, operands, capture name and predicate.

    ``hint`` (a set of opcodes) or ``exclude`` may state what an operand-free pattern's
    predicate implies about the opcode (``is_all`` needs a constant or a broadcast, ``NC``
    anything but a constant): :class:`Rules` uses them, with ``ops``, to skip rules that
    cannot match an instruction's operands without running them.  They must be necessary
    conditions of the predicate, never extra ones.
    """

    __slots__ = ("ops", "src", "name", "pred", "commute", "rest", "hint", "exclude", "_m")

    def __init__(self, op=None, *src: "Pat", name: str | None = None,
                 pred: Callable[[Instruction], bool] | None = None, commute: bool = False,
                 rest: bool = False, hint=None, exclude=None):
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
        self.hint = frozenset(hint) if hint is not None else None
        self.exclude = frozenset(exclude) if exclude is not None else None
        self._m = None

    def match(self, inst: Instruction, binds: dict) -> bool:
        """Match ``inst``, adding captures to ``binds``.  A capture name used twice must
        bind the same instruction; a commuting binary tries its operands in order, then
        swapped, and keeps the first alternative that matches (no deeper backtracking)."""
        m = self._m
        if m is None:
            m = self._m = _compile(self)
        return m(inst, binds)

    def allows(self, opcode: str) -> bool:
        """False when no instruction with ``opcode`` can match (a quick pre-check)."""
        if self.ops is not None:
            return opcode in self.ops
        if self.hint is not None and opcode not in self.hint:
            return False
        return self.exclude is None or opcode not in self.exclude

    def __repr__(self):
        ops = "|".join(sorted(self.ops)) if self.ops else "*"
        inner = ", ".join(map(repr, self.src)) if self.src else ""
        return f"{ops}({inner})" + (f":{self.name}" if self.name else "")


def _undo(binds: dict, size: int) -> None:
    while len(binds) > size:
        binds.popitem()


def _operands_matcher(p: Pat):
    """``ok(operands, binds)`` for ``p.src`` (the operand count already checked)."""
    subs = tuple(_compiled(q) for q in p.src)
    if p.commute and len(subs) == 2:
        s0, s1 = subs

        def ok(o, binds):
            size = len(binds)
            if s0(o[0], binds) and s1(o[1], binds):
                return True
            _undo(binds, size)
            return s0(o[1], binds) and s1(o[0], binds)
    elif len(subs) == 1:
        s0 = subs[0]

        def ok(o, binds):
            return s0(o[0], binds)
    elif len(subs) == 2:
        s0, s1 = subs

        def ok(o, binds):
            return s0(o[0], binds) and s1(o[1], binds)
    else:
        def ok(o, binds):
            for s, x in zip(subs, o):
                if not s(x, binds):
                    return False
            return True
    return ok


def _compile(p: Pat):
    """A matcher closure for ``p``: ``m(inst, binds) -> bool``.

    Captures go straight into ``binds``: a failed match leaves partial captures behind,
    which is harmless because every caller either fails too or (a commuting binary, a
    rule's top-level match) undoes or drops them; a commuting binary drops the captures
    of its first alternative before trying the second.  Checks run in the order the
    pattern states them: opcode, capture, operands (in order), predicate."""
    ops, name, pred, rest = p.ops, p.name, p.pred, p.rest

    if not p.src:
        if name is None:
            if pred is None:
                if ops is None:
                    return lambda inst, binds: True
                return lambda inst, binds: inst.opcode in ops
            if ops is None:
                return lambda inst, binds: bool(pred(inst))

            def m_pred(inst, binds):
                return inst.opcode in ops and bool(pred(inst))
            return m_pred

        def m_leaf(inst, binds):
            if ops is not None and inst.opcode not in ops:
                return False
            prev = binds.get(name)
            if prev is not None and prev is not inst:
                return False
            if pred is not None and not pred(inst):
                return False
            binds[name] = inst
            return True
        return m_leaf

    n = len(p.src)
    operands_ok = _operands_matcher(p)

    def m_node(inst, binds):
        if ops is not None and inst.opcode not in ops:
            return False
        if name is not None:
            prev = binds.get(name)
            if prev is not None and prev is not inst:
                return False
        o = inst.operands
        if len(o) != n and not (rest and len(o) > n):
            return False
        if not operands_ok(o, binds):
            return False
        if pred is not None and not pred(inst):
            return False
        if name is not None:
            binds[name] = inst
        return True
    return m_node


def _compile_root(p: Pat):
    """The matcher of a rule's root pattern, ``m(inst) -> captures dict or None``, for an
    instruction that :meth:`Rules.candidates` returned the rule for: its opcode and
    operand count are known to fit.  Without commuting sub-patterns the checks are
    generated as one function (captures in locals, the same checks in the same order as
    :meth:`Pat.match`, no allocation unless it matches); otherwise the closures of
    :func:`_compile` do the operands."""
    if not _has_commute(p):
        return _generate_root(p)
    match = _compiled(p)

    def m_root(inst):
        binds: dict = {}
        return binds if match(inst, binds) else None
    return m_root


def _has_commute(p: Pat) -> bool:
    return (p.commute and p.src is not None and len(p.src) == 2) or \
        any(_has_commute(q) for q in (p.src or ()))


def _generate_root(p: Pat):
    """``m(inst)`` for a pattern without commuting binaries, as Python source: every
    operand reached through a local, each check one ``if ...: return None`` line in
    :meth:`Pat.match`'s order, a capture seen before compared with ``is``."""
    env: dict = {}
    lines: list[str] = []
    bound: dict[str, str] = {}  # capture name -> local variable, in binding order
    counter = [0]

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def const(value, prefix: str) -> str:
        key = fresh(prefix)
        env[key] = value
        return key

    def operands(q: Pat, var: str, check_count: bool) -> None:
        ops_var = fresh("o")
        lines.append(f"    {ops_var} = {var}.operands")
        n = len(q.src)
        if check_count:
            cond = f"len({ops_var}) != {n}"
            if q.rest:
                cond = f"({cond} and len({ops_var}) < {n})"
            lines.append(f"    if {cond}: return None")
        for i, sub in enumerate(q.src):
            v = fresh("v")
            lines.append(f"    {v} = {ops_var}[{i}]")
            node(sub, v)

    def node(q: Pat, var: str) -> None:
        if q.ops is not None:
            if len(q.ops) == 1:
                lines.append(f"    if {var}.opcode != {next(iter(q.ops))!r}: return None")
            else:
                lines.append(f"    if {var}.opcode not in {const(q.ops, 'OPS')}: return None")
        if q.name is not None and q.name in bound:
            lines.append(f"    if {var} is not {bound[q.name]}: return None")
        if q.src:
            operands(q, var, True)
        if q.pred is not None:
            lines.append(f"    if not {const(q.pred, 'PRED')}({var}): return None")
        if q.name is not None and q.name not in bound:
            bound[q.name] = var

    lines.append("def m(inst):")
    if p.src:
        operands(p, "inst", False)
    if p.pred is not None:
        lines.append(f"    if not {const(p.pred, 'PRED')}(inst): return None")
    if p.name is not None and p.name not in bound:
        bound[p.name] = "inst"
    lines.append("    return {" + ", ".join(f"{n!r}: {v}" for n, v in bound.items()) + "}")
    exec(compile("\n".join(lines), f"<pattern {p!r}>", "exec"), env)
    return env["m"]


def _compiled(p: Pat):
    if p._m is None:
        p._m = _compile(p)
    return p._m


def P(op, *src: Pat, name: str | None = None, pred=None, commute: bool = False,
      rest: bool = False) -> Pat:
    return Pat(op, *src, name=name, pred=pred, commute=commute, rest=rest)


def X(name: str | None = None, pred=None, hint=None) -> Pat:
    """Any instruction (``hint``: the opcodes ``pred`` can hold for, when it says so)."""
    return Pat(None, name=name, pred=pred, hint=hint)


def C(name: str | None = None, pred=None) -> Pat:
    """A constant instruction (with a known value)."""
    def ok(i):
        return not i.literal.elided and (pred is None or pred(i))
    return Pat("constant", name=name, pred=ok)


def NC(name: str | None = None, pred=None) -> Pat:
    """A non-constant instruction."""
    return Pat(None, name=name, exclude=("constant",),
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
    # the options the rule needs (``when(opts) -> bool``); None: always on
    when: Callable | None = None
    # the root matcher for candidates: m(inst) -> captures (dict) or None
    m: Callable = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self.m = _compile_root(self.pat)


def rule(pat: Pat, label: str, exact: bool = True, when=None):
    """Decorator: ``@rule(P("add", X("a"), C("c")), "A + 0 => A")``."""
    def deco(fn):
        return Rule(pat, fn, label, exact, when)
    return deco


class RuleList(list):
    """A family's rules in priority order, added by decorating their functions::

        r = RuleList()

        @r(P("add", X("a"), ALL(0)), "A + 0 => A")
        def _add0(ctx, a): ...

    ``when(opts)`` states the options a rule needs (it is skipped without them); one
    function may serve several patterns: ``r(pattern, label)(fn)``."""

    def __call__(self, pat: Pat, label: str, exact: bool = True, when=None):
        def deco(fn):
            self.append(Rule(pat, fn, label, exact, when))
            return fn
        return deco


class Rules:
    """Rules indexed by root opcode; ``+`` concatenates (order = priority).

    :meth:`candidates` narrows a root opcode's rules further by the opcodes of the
    instruction's first operands (what the patterns' ``ops``/``hint``/``exclude`` allow
    there) and by its operand count, cached per distinct key, so most instructions try
    only the few rules that can match them.
    """

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
        # per root opcode: how many leading operand opcodes the key needs
        self._depth: dict[str, int] = {op: max(_constrained(r.pat) for r in self.for_op(op))
                                       for op in self._index}
        self._any_depth = max((_constrained(r.pat) for r in self._any), default=0)
        # the candidates cache: opcode -> operand count -> leading operands' opcodes -> rules
        self._tree: dict[str, dict] = {op: {} for op in self._index}
        self._gated = any(r.when is not None for r in self.rules)
        self._by_options: dict[tuple, Rules] = {}

    def __add__(self, other: "Rules") -> "Rules":
        return Rules(self.rules + other.rules)

    def for_options(self, opts) -> "Rules":
        """The rules whose ``when`` holds for ``opts`` (cached per option values)."""
        if not self._gated:
            return self
        try:
            key = tuple(vars(opts).items())
            found = self._by_options.get(key)
        except TypeError:  # options without __dict__, or an unhashable value: no cache
            return Rules(r for r in self.rules if r.when is None or r.when(opts))
        if found is None:
            found = self._by_options[key] = Rules(
                r for r in self.rules if r.when is None or r.when(opts))
        return found

    def for_op(self, opcode: str) -> list[Rule]:
        lst = self._index.get(opcode)
        if not self._any:
            return lst or []
        return (lst or []) + self._any

    def candidates(self, inst: Instruction) -> tuple[Rule, ...]:
        """The rules, in priority order, whose patterns may match ``inst`` (a superset of
        those that do).  The cache is a tree of dicts (opcode, operand count, then the
        leading operands' opcodes), so that a lookup allocates nothing."""
        opcode = inst.opcode
        found = self._tree.get(opcode)
        if found is None:
            return self._fill(inst) if self._any else ()
        operands = inst.operands
        n = len(operands)
        found = found.get(n)
        depth = self._depth[opcode]
        if n < depth:
            depth = n
        if depth and found is not None:
            found = found.get(operands[0].opcode)
            if depth > 1 and found is not None:
                found = found.get(operands[1].opcode)
                if depth > 2 and found is not None:
                    found = found.get(operands[2].opcode)
        if found is None:
            found = self._fill(inst)
        return found

    def _fill(self, inst: Instruction) -> tuple[Rule, ...]:
        """Work out and cache the candidates for ``inst``'s key."""
        opcode = inst.opcode
        operands = inst.operands
        n = len(operands)
        depth = self._depth.setdefault(opcode, self._any_depth)
        opcodes = [o.opcode for o in operands[:depth]]
        found = tuple(r for r in self.for_op(opcode) if _feasible(r.pat, n, opcodes))
        level = self._tree.setdefault(opcode, {})
        key = n
        for op in opcodes:
            level = level.setdefault(key, {})
            key = op
        level[key] = found
        return found

    def counts(self) -> dict[str, int]:
        """Rule count per root opcode."""
        return {op: len(rs) for op, rs in sorted(self._index.items())}

    def __len__(self):
        return len(self.rules)


_MAX_KEY_OPERANDS = 3


def _constrained(p: Pat) -> int:
    """How many leading operands of ``p`` have opcode constraints (capped)."""
    if not p.src:
        return 0
    last = 0
    for i, q in enumerate(p.src[:_MAX_KEY_OPERANDS]):
        if q.ops is not None or q.hint is not None or q.exclude is not None:
            last = i + 1
    return last


def _feasible(p: Pat, n: int, opcodes) -> bool:
    """Whether ``p`` may match an instruction with ``n`` operands whose leading opcodes
    are ``opcodes`` (False only when it certainly cannot)."""
    if not p.src:
        return True
    k = len(p.src)
    if n != k and not (p.rest and n > k):
        return False
    src = p.src

    def fits(order):
        return all(q.allows(opcodes[i]) for i, q in zip(order, src) if i < len(opcodes))
    if p.commute and k == 2:
        return fits((0, 1)) or fits((1, 0))
    return fits(range(k))


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
    fuel: str | None = None  # the pass name whose fuel (--xla_fuel) each rewrite consumes

    @property
    def module(self):
        return self.comp.module


def compatible(a, b) -> bool:
    return a.same_dims_and_type(b)


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


def try_rules(ctx: RewriteCtx, rules: Rules, inst: Instruction, cands=None):
    """Apply the first matching rule to ``inst``; returns the replacement, CHANGED or None.
    ``cands``: ``rules.candidates(inst)`` when the caller has it already."""
    fuel = ctx.fuel
    for r in (cands if cands is not None else rules.candidates(inst)):
        binds = r.m(inst)
        if binds is None or (r.when is not None and not r.when(ctx.opts)):
            continue
        if fuel is not None and not has_fuel(fuel):
            return None  # out of fuel: no more rewrites (asked before an in-place edit)
        b = ctx.b
        ctx.inst = inst
        mark = len(b.created)
        old_ops = tuple(inst.operands)
        ctx.inexact = False
        res = r.fn(ctx, **binds)
        if res is None or res is inst:
            if len(b.created) > mark:
                b.discard_since(mark)
            continue
        if res is CHANGED:
            if fuel is not None:
                consume_fuel(fuel, lambda: f"{r.label} (in place) at %{inst.name}")
            ctx.fired[r.label] += 1
            if not r.exact or ctx.inexact:
                ctx.inexact_fired[r.label] += 1
            b.discard_since(mark)
            for o in old_ops:  # operands the in-place edit stopped using
                if o.user_count == 0:
                    remove_dead(ctx.comp, o, ctx.ctrl_succ)
            return CHANGED
        if not ctx.opts.same_shape(res.shape, inst.shape) or \
                _sharding_conflict(inst, res, b.created_set):
            b.discard_since(mark)
            continue
        if fuel is not None:
            consume_fuel(fuel, lambda: f"{r.label} at %{inst.name}")
        ctx.fired[r.label] += 1
        if not r.exact or ctx.inexact:
            ctx.inexact_fired[r.label] += 1
        replace(ctx, inst, res)
        b.discard_since(mark)  # intermediate builds that ended up unused
        return res
    return None


def has_opcode(module, opcodes) -> bool:
    """Whether an instruction of ``module`` has one of ``opcodes`` (a set): one scan that
    allocates nothing, so a pass with nothing to do on a module returns at once."""
    for comp in module.computations:
        for inst in comp.iter_instructions():
            if inst.opcode in opcodes:
                return True
    return False


def comp_has_opcode(comp: Computation, opcodes) -> bool:
    for inst in comp.iter_instructions():
        if inst.opcode in opcodes:
            return True
    return False


def control_successors(comp: Computation) -> set:
    """The instructions of ``comp`` that are some instruction's control predecessor."""
    return {i for i in comp.iter_instructions() if i.has_control_successors}


_MAX_TRIES = 8  # rewrites of one visited instruction (and its replacements) per sweep


def run_rules(comp: Computation, rules: Rules, opts, fired: Counter | None = None,
              inexact: Counter | None = None, max_sweeps: int = 50,
              skip: Callable[[Instruction], bool] | None = None,
              fuel: str | None = None) -> bool:
    """Sweep ``comp`` in post order applying ``rules`` until a sweep changes nothing.

    Each sweep visits the instructions in the post order taken at its start; an
    instruction none of whose rules can match (:meth:`Rules.candidates`) costs one
    lookup.  A rule's replacement is tried again at once (bounded), the way XLA's visitor
    would meet it on its next run, so chains collapse in one sweep.  ``fuel``: the pass
    name each rewrite takes a unit of ``--xla_fuel`` from (checked only when limited)."""
    changed = False
    b = Builder(comp)
    ctx = RewriteCtx(comp, opts, b)
    if fuel is not None and limited(fuel):
        ctx.fuel = fuel
    rules = rules.for_options(opts)
    candidates = rules.candidates
    for _ in range(max_sweeps):
        ctrl_succ = ctx.ctrl_succ = control_successors(comp)
        sweep_changed = False
        for inst in comp.post_order():
            tries = 0
            while True:
                if inst.parent is not comp or inst.control_predecessors \
                        or (ctrl_succ and inst in ctrl_succ) \
                        or (skip is not None and skip(inst)):
                    break
                cands = candidates(inst)
                if not cands:
                    break
                if b.created:
                    b.created = []
                if b.created_set:
                    b.created_set = set()
                res = try_rules(ctx, rules, inst, cands)
                if res is None:
                    break
                sweep_changed = True
                tries += 1
                if tries == _MAX_TRIES:
                    break
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
