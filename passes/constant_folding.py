"""``constant_folding``: XLA's HloConstantFolding, evaluating through the interpreter.

An instruction is folded when at least one operand is a constant and every operand is a
constant, a broadcast of a constant or an iota (looking through tuples), and it is
foldable: not a broadcast/iota (they would only grow constants), fft, while (default
level), parameter/constant/tuple; no rng/after-all/side effect anywhere inside (called
computations are checked recursively); no control dependencies; not pad(broadcast,
constant); and neither the result nor the operands exceed 45,000,000 elements.  The
instruction is evaluated by the numpy interpreter on a one-instruction module; when the
interpreter cannot evaluate it, it is left alone (XLA's TryEvaluate).

Interprocedural (XLA's PropagateIdenticalConstantArguments): computations are visited
callers first; in a computation that only ``call`` instructions call, a parameter given
the same constant at every call site reads that constant, so the callee folds on its own.
A ``while`` whose state is all constants is evaluated only at the aggressive level (as
XLA's evaluator runs no loop iteration at the default level).
"""
from __future__ import annotations

import numpy as np

from hlo_opt.errors import HloError
from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.literal import Literal
from hlo_opt.ir.module import HloModule
from hlo_opt.ir.opcodes import IMPURE

from hlo_opt.rewrite.rules import control_successors, remove_dead
from .algsimp.predicates import same_literal

MAX_CONSTANT_ELEMENTS = 45 * 1000 * 1000  # XLA's kMaximumConstantSizeElements


def _any_operand_constant(inst) -> bool:
    for o in inst.operands:
        if o.opcode == "tuple":
            if _any_operand_constant(o):
                return True
        elif o.opcode == "constant":
            return True
    return False


def _all_operands_constant_like(inst) -> bool:
    for o in inst.operands:
        if o.opcode == "tuple":
            if not _all_operands_constant_like(o):
                return False
        elif not (o.opcode in ("constant", "iota")
                  or (o.opcode == "broadcast" and o.operands[0].opcode == "constant")):
            return False
    return True


class _Foldability:
    """XLA's IsFoldable with the per-computation cache."""

    def __init__(self, aggressive: bool):
        self.aggressive = aggressive
        self.comp_ok: dict[Computation, bool] = {}

    def __call__(self, inst: Instruction) -> bool:
        op = inst.opcode
        if op in ("broadcast", "iota", "fft"):
            return False
        if op == "while" and not self.aggressive:
            return False
        if op.startswith("async-"):
            return False
        for c in inst.called:
            ok = self.comp_ok.get(c)
            if ok is None:
                self.comp_ok[c] = True  # recursion guard
                ok = all(self(i) for i in c.post_order())
                self.comp_ok[c] = ok
            if not ok:
                return False
        # never folded: side effects (XLA's HasSideEffect) and what is not a pure
        # function of its operands (the evaluator cannot run it at compile time)
        if op in IMPURE or inst.has_side_effect():
            return False
        if inst.control_predecessors:
            return False
        if op == "pad" and inst.operands[0].opcode == "broadcast" and \
                inst.operands[1].opcode == "constant":
            return False
        if not self.aggressive and inst.shape.is_array():
            operand_elems = sum(o.shape.num_elements() for o in inst.operands
                                if o.shape.is_array())
            if max(inst.shape.num_elements(), operand_elems) > MAX_CONSTANT_ELEMENTS:
                return False
        return True


def evaluate(inst: Instruction):
    """Evaluate ``inst`` (whose operands are constant-like) on the interpreter; returns the
    value (numpy array, or tuple of them) or None when the interpreter cannot."""
    from hlo_opt.backends.interpreter import Interpreter
    module = HloModule("constant_folding")
    comp = Computation("fold")
    copies: dict[Instruction, Instruction] = {}

    def copy(i):
        c = copies.get(i)
        if c is None:
            c = Instruction(i.opcode, i.shape, [copy(o) for o in i.operands], dict(i.attrs),
                            i.name, i.payload, i.called, i.called_attr)
            c.cache_literal(i.cached_literal)
            comp.link(c)
            copies[i] = c
        return c
    comp.root = copy(inst)
    comp.is_entry = True
    module.computations.append(comp)
    module.entry = comp
    comp.module = module
    try:
        with np.errstate(all="ignore"):
            return Interpreter(module).run_value([])
    except (HloError, ValueError, TypeError, ArithmeticError, NotImplementedError,
            IndexError, KeyError, OverflowError):
        return None


def literal_of(value, shape) -> Literal | None:
    if shape.is_tuple():
        if not isinstance(value, tuple):
            return None
        elems = [literal_of(v, s) for v, s in zip(value, shape.tuple_shapes)]
        if any(e is None for e in elems):
            return None
        return Literal(shape.without_layout(), elements=tuple(elems))
    if not shape.is_array():
        return None
    arr = np.asarray(value)
    if arr.dtype != shape.dtype or arr.shape != shape.dims:
        return None
    return Literal(shape.without_layout(), np.array(arr))


def _same_constant(a: Instruction, b: Instruction) -> bool:
    return a is b or (a.opcode == "constant" and a.shape == b.shape and same_literal(a, b))


def _propagate_identical_constant_arguments(comp: Computation, sites) -> bool:
    """XLA's PropagateIdenticalConstantArguments: a parameter of a computation only calls
    call, given the same constant at every call site, reads that constant instead (when
    every parameter is such a constant, the call itself folds and nothing is done)."""
    sites = [s for s in sites if s.parent is not None]
    if not sites:
        return False
    first = sites[0]
    same = [all(s.operands[i].opcode == "constant" and
                _same_constant(s.operands[i], first.operands[i]) for s in sites)
            for i in range(len(comp.parameters))]
    if all(same):
        return False
    changed = False
    for i, ok in enumerate(same):
        p = comp.parameters[i]
        if not ok or (not p.user_count and not p.is_root):
            continue
        c0 = first.operands[i]
        c = comp.add("constant", c0.shape, name=c0.name, payload=c0.payload)
        c.cache_literal(c0.cached_literal)
        p.replace_all_uses_with(c)
        changed = True
    return changed


# never folded: the loop skips them, or _Foldability rejects them before anything else
_NEVER_FOLDED = frozenset(("parameter", "constant", "tuple", "broadcast", "iota", "fft"))


class HloConstantFolding:
    name = "constant_folding"

    def __init__(self, aggressive: bool = False):
        self.aggressive = aggressive
        self.folded = 0

    def _may_fold(self, comp) -> bool:
        """Whether some instruction of ``comp`` passes the cheap tests of :meth:`run`'s
        loop (a superset of those it folds): one scan in any order, so a computation with
        nothing to fold costs no post order.  Folding only makes constants where there
        was a candidate already, so none here means the loop would change nothing."""
        aggressive = self.aggressive
        for inst in comp.iter_instructions():
            if inst.opcode in _NEVER_FOLDED or not inst.operands and not aggressive:
                continue
            if not aggressive and not _any_operand_constant(inst):
                continue
            if (inst.user_count or inst.is_root) and _all_operands_constant_like(inst):
                return True
        return False

    def run(self, module) -> bool:
        self.folded = 0
        foldable = _Foldability(self.aggressive)
        skip = set()
        call_sites: dict[Computation, list[Instruction]] = {}
        other_callers = set()
        for comp in module.computations:
            for i in comp.iter_instructions():
                if not i.called:
                    continue
                if i.opcode == "fusion" or (i.opcode == "call" and
                                            i.attrs.get("is_composite") == "true"):
                    skip.update(i.called)
                elif i.opcode == "call":
                    for c in i.called:
                        call_sites.setdefault(c, []).append(i)
                else:
                    other_callers.update(i.called)
        # computations only calls call: callers first (XLA's reverse post order), so the
        # constants a caller folds reach its callees in this run
        only_called = {c for c in call_sites if c not in other_callers and c not in skip}
        order = (list(reversed(module.computation_post_order())) if only_called
                 else list(module.computations))
        changed = False
        for comp in order:
            if comp in only_called:
                changed |= _propagate_identical_constant_arguments(comp, call_sites[comp])
            if comp in skip or not self._may_fold(comp):
                continue
            ctrl = control_successors(comp)
            for inst in comp.post_order():
                if inst.parent is not comp or (inst.user_count == 0 and not inst.is_root):
                    continue
                if not self.aggressive and not _any_operand_constant(inst):
                    continue
                if not _all_operands_constant_like(inst):
                    continue
                if inst.opcode in ("parameter", "constant", "tuple") or inst in ctrl:
                    continue
                if not foldable(inst):
                    continue
                value = evaluate(inst)
                if value is None:
                    continue
                lit = literal_of(value, inst.shape)
                if lit is None:
                    continue
                new = comp.add("constant", lit.shape.with_layout(inst.shape.layout)
                               if lit.shape.is_array() else inst.shape,
                               payload=lit.to_text())
                new.cache_literal(Literal(new.shape, lit.array, lit.elements))
                inst.replace_all_uses_with(new)
                remove_dead(comp, inst, ctrl)
                self.folded += 1
                changed = True
        return changed
