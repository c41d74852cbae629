"""The evaluator: runs computations instruction by instruction over numpy values.

Each computation is *planned* once per evaluator: the instructions the root depends on,
in post order, each bound to its kernel and operand slots; constants (and pure
instructions whose operands are all constant) are evaluated at plan time and kept in the
plan's template.  A while loop of 1,000 iterations re-plans nothing.

The first run of every plan goes step by step and checks each result against the
instruction's shape (dtype and dims); the plan is then compiled into one straight-line
function (``codegen.py``) that later runs call directly (``Evaluator(always_check=True)``
keeps checking every run instead).  Errors raised inside a handler come back as
:class:`HloError` subclasses naming the instruction (``while executing %name = ...``)
and the chain of calling instructions; a failure in a compiled function is re-run step
by step to find that instruction.
"""
from __future__ import annotations

import numpy as np

from ...errors import HloError, UnsupportedError
from ...ir.computation import Computation
from ...ir.instruction import Instruction
from ...ir.opcodes import BATCHABLE, IMPURE
from hlo_opt.backends.interpreter.plan import compile_plan
from .registry import FAST, HANDLERS, make_kernel
from .values import TOKEN, shape_mismatch

# Opcodes whose result may differ between runs (or that talk to the outside world): never
# evaluated at plan time, and a computation containing one is not pure.
_IMPURE = IMPURE

# Opcodes allowed in a computation that is run "batched" (on arrays instead of the
# scalars it was written for): reducers and map computations made only of these can be
# applied to whole arrays at once.
_BATCHABLE = BATCHABLE
_SCALAR_IDENTITY = frozenset({"broadcast", "reshape", "copy", "bitcast"})


class InterpreterError(HloError):
    """An error raised while executing an instruction (message names the instruction)."""


class _Frame(BaseException):
    """Internal: carries an error up through nested calls, collecting the call chain.

    A BaseException so that a handler's ``except Exception`` never swallows it; the
    outermost :meth:`Evaluator.call` turns it into the HloError it carries."""

    def __init__(self, error: HloError, chain: list[str]):
        super().__init__(str(error))
        self.error = error
        self.chain = chain


def instruction_summary(inst: Instruction, limit: int = 240) -> str:
    try:
        text = inst.to_text(operand_shapes=False, print_metadata=False)
    except Exception:  # noqa: BLE001 - a summary must never fail
        text = f"%{inst.name} = {inst.opcode}(...)"
    if text.startswith("ROOT "):
        text = text[5:]
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _context(inst: Instruction) -> str:
    comp = inst.parent.name if inst.parent is not None else "?"
    return f"%{inst.name} in computation %{comp}"


class Plan:
    """One computation, ready to run."""

    __slots__ = ("comp", "template", "param_slots", "steps", "specs", "root", "insts",
                 "checked", "batched", "fn")

    def __init__(self, comp: Computation, batched: bool):
        self.comp = comp
        self.template: list = []
        self.param_slots: list[int] = []
        self.steps: list[tuple[int, object]] = []
        self.specs: list[tuple] = []  # how codegen calls each step (see codegen.py)
        self.fn = None  # the compiled straight-line function, once checked
        self.root = 0
        self.insts: list[Instruction] = []
        self.checked = batched  # batched plans never check shapes
        self.batched = batched


class Evaluator:
    """Runs computations of one module; plans are cached per computation."""

    def __init__(self, always_check: bool = False):
        self.always_check = always_check
        self._plans: dict[Computation, Plan] = {}
        self._batched: dict[Computation, Plan | None] = {}
        self._pure: dict[Computation, bool] = {}
        self._depth = 0
        self.rng_state = None  # rng-get-and-update-state counter (None: not started)

    # ---- public -----------------------------------------------------------------------
    def call(self, comp: Computation, args):
        """Run ``comp`` on ``args`` (one value per parameter) and return the root value.

        Handlers call this for called computations (``ctx.call``); errors inside carry
        the chain of calling instructions up to the outermost call, which raises them as
        one HloError."""
        if self._depth:
            plan = self._plans.get(comp) or self._plan(comp)
            return self._run(plan, args)
        return self._outermost(self._call_inner, comp, args)

    def runner(self, comp: Computation):
        """A function running ``comp`` on positional arguments (for handlers that call one
        computation many times, like while); only valid inside a handler."""
        plan = self._plans.get(comp) or self._plan(comp)
        steps = self._run_steps
        always_check = self.always_check

        def go(*args):
            fn = plan.fn
            if fn is not None and not always_check:
                try:
                    return fn(*args)
                except (_Frame, Exception):
                    pass  # again step by step, to name the failing instruction
            return steps(plan, args)
        return go

    def call_batched(self, comp: Computation, args):
        """Run a scalar computation made only of elementwise ops on whole arrays (numpy
        broadcasting).  Returns None when ``comp`` cannot be batched."""
        if self._depth:
            return self._call_batched_inner(comp, args)
        return self._outermost(self._call_batched_inner, comp, args)

    def batchable(self, comp: Computation) -> bool:
        plan = self._batched.get(comp, False)
        if plan is False:
            plan = self._plan_batched(comp)
        return plan is not None

    def plan(self, comp: Computation) -> Plan:
        """The (cached) plan of ``comp``."""
        plan = self._plans.get(comp)
        if plan is not None:
            return plan
        if self._depth:
            return self._plan(comp)
        return self._outermost(lambda c, _: self._plan(c), comp, None)

    def run_handler(self, handler, inst: Instruction, operands):
        """``handler(inst, operands, self)`` as the outermost call (a backend running one
        instruction on the host): computations it calls raise their errors as one
        HloError with the chain of calling instructions."""
        return self._outermost(lambda _c, _a: handler(inst, operands, self), None, None)

    def is_pure(self, comp: Computation) -> bool:
        """No side effects and no randomness anywhere under ``comp``."""
        r = self._pure.get(comp)
        if r is None:
            self._pure[comp] = True  # recursion guard
            r = all(i.opcode not in _IMPURE for i in comp.instructions) and all(
                        self.is_pure(c) for i in comp.instructions for c in i.called)
            self._pure[comp] = r
        return r

    # ---- internals --------------------------------------------------------------------
    def _outermost(self, fn, comp, args):
        self._depth += 1
        try:
            with np.errstate(all="ignore"):
                return fn(comp, args)
        except _Frame as f:
            raise finish_error(f) from f.error.__cause__
        finally:
            self._depth -= 1

    def _call_inner(self, comp, args):
        plan = self._plans.get(comp) or self._plan(comp)
        return self._run(plan, args)

    def _call_batched_inner(self, comp, args):
        plan = self._batched.get(comp, False)
        if plan is False:
            plan = self._plan_batched(comp)
        if plan is None:
            return None
        return self._run(plan, args)

    def _plan(self, comp: Computation) -> Plan:
        plan = self._build(comp, batched=False)
        self._plans[comp] = plan
        return plan

    def _plan_batched(self, comp: Computation) -> Plan | None:
        plan = None
        if self._can_batch(comp):
            plan = self._build(comp, batched=True)
        self._batched[comp] = plan
        return plan

    def _can_batch(self, comp: Computation) -> bool:
        for inst in comp.instructions:
            op = inst.opcode
            if op in _BATCHABLE:
                continue
            if op in _SCALAR_IDENTITY and inst.shape.is_scalar() \
                    and inst.operands[0].shape.is_scalar():
                continue
            return False
        return True

    def _build(self, comp: Computation, batched: bool) -> Plan:
        plan = Plan(comp, batched)
        order = _reachable_post_order(comp)
        slot_of = {inst: i for i, inst in enumerate(order)}
        template: list = [None] * len(order)
        folded = [False] * len(order)
        plan.insts = order
        nparams = len(comp.parameters)
        plan.param_slots = [-1] * nparams
        steps = []
        specs = []
        for i, inst in enumerate(order):
            op = inst.opcode
            if op == "parameter":
                n = inst.parameter_number
                if n < nparams:
                    plan.param_slots[n] = i
                continue
            idx = tuple(slot_of[o] for o in inst.operands)
            try:
                if op == "constant":
                    template[i] = _constant_value(inst)
                    folded[i] = True
                    continue
                if batched and op in _SCALAR_IDENTITY:
                    a = idx[0]
                    steps.append((i, lambda v, a=a: v[a]))
                    specs.append(("alias", a))
                    continue
                fn, spec = self._kernel(inst, idx)
                if (not batched and op not in _IMPURE and all(folded[j] for j in idx)
                        and all(self.is_pure(c) for c in inst.called)):
                    value = fn(template)
                    why = shape_mismatch(value, inst.shape)
                    if why:
                        raise InterpreterError(f"the {op} handler produced a wrong value: "
                                               f"{why}")
                    template[i] = _freeze(value)
                    folded[i] = True
                    continue
            except _Frame as f:
                raise self._wrap_frame(f, inst) from None
            except Exception as e:  # noqa: BLE001 - named, chained, raised by call()
                raise _Frame(self._wrap(e, inst), []) from None
            steps.append((i, fn))
            specs.append(spec)
        plan.template = template
        plan.steps = steps
        plan.specs = specs
        plan.root = slot_of[comp.root]
        if batched:
            plan.fn = compile_plan(plan, self)
        return plan

    def _kernel(self, inst: Instruction, idx: tuple[int, ...]):
        """(loop-path step function, codegen spec) for one instruction."""
        op = inst.opcode
        if op == "tuple":
            return (lambda v: tuple([v[j] for j in idx])), ("tuple", idx)
        if op == "get-tuple-element":
            index = inst.attr("index")
            if index is None:
                raise UnsupportedError("get-tuple-element needs index=")
            a, = idx
            return (lambda v: v[a][index]), ("gte", a, index)
        make = FAST.get(op)
        if make is not None:
            k = make_kernel(make, inst, self)
            if k is not None:
                spec = ("kernel", k, idx)
                n = len(idx)
                if n == 1:
                    a, = idx
                    return (lambda v: k(v[a])), spec
                if n == 2:
                    a, b = idx
                    return (lambda v: k(v[a], v[b])), spec
                if n == 3:
                    a, b, c = idx
                    return (lambda v: k(v[a], v[b], v[c])), spec
                return (lambda v: k(*[v[j] for j in idx])), spec
        h = HANDLERS.get(op)
        if h is None:
            raise UnsupportedError(f"the interpreter has no handler for opcode '{op}'")
        ctx = self
        spec = ("handler", h, inst, idx)
        if len(idx) == 1:
            a, = idx
            return (lambda v: h(inst, [v[a]], ctx)), spec
        return (lambda v: h(inst, [v[j] for j in idx], ctx)), spec

    # ---- running ----------------------------------------------------------------------
    def _run(self, plan: Plan, args):
        fn = plan.fn
        if fn is not None and not self.always_check:
            try:
                return fn(*args)
            except (_Frame, Exception):
                pass  # run it again step by step: that names the failing instruction
        return self._run_steps(plan, args)

    def _run_steps(self, plan: Plan, args):
        vals = plan.template.copy()
        slots = plan.param_slots
        if len(args) != len(slots):
            raise InterpreterError(
                f"computation %{plan.comp.name} takes {len(slots)} arguments, got {len(args)}")
        for s, a in zip(slots, args):
            if s >= 0:
                vals[s] = a
        if not plan.checked or self.always_check:
            return self._run_checked(plan, vals)
        slot = -1
        try:
            for slot, fn in plan.steps:
                vals[slot] = fn(vals)
        except _Frame as f:
            raise self._wrap_frame(f, plan.insts[slot]) from None
        except Exception as e:  # noqa: BLE001
            raise _Frame(self._wrap(e, plan.insts[slot]), []) from None
        return vals[plan.root]

    def _run_checked(self, plan: Plan, vals):
        insts = plan.insts
        slot = -1
        try:
            for slot, fn in plan.steps:
                value = fn(vals)
                if not plan.batched:
                    why = shape_mismatch(value, insts[slot].shape)
                    if why:
                        raise InterpreterError(
                            f"the {insts[slot].opcode} handler produced a wrong value: {why}")
                vals[slot] = value
        except _Frame as f:
            raise self._wrap_frame(f, insts[slot]) from None
        except Exception as e:  # noqa: BLE001
            raise _Frame(self._wrap(e, insts[slot]), []) from None
        if not plan.checked:
            plan.checked = True
            plan.fn = compile_plan(plan, self)
        return vals[plan.root]

    # ---- errors -----------------------------------------------------------------------
    @staticmethod
    def _wrap(e: BaseException, inst: Instruction) -> HloError:
        if isinstance(e, HloError):
            what = str(e)
            cls = type(e) if type(e) in (HloError, UnsupportedError, InterpreterError) \
                else HloError
        else:
            what = f"{type(e).__name__}: {e}"
            cls = InterpreterError
        err = cls(f"while executing {instruction_summary(inst)} "
                  f"(in computation %{inst.parent.name if inst.parent else '?'}): {what}")
        err.instruction = inst
        err.__cause__ = e if not isinstance(e, HloError) else e.__cause__
        return err

    @staticmethod
    def _wrap_frame(f: _Frame, caller: Instruction) -> _Frame:
        f.chain.append(_context(caller))
        return f


def finish_error(f: _Frame) -> HloError:
    """The user-facing error of a failed top-level call: the innermost message plus the
    chain of calling instructions."""
    err = f.error
    if f.chain:
        msg = str(err) + "".join(f"\n  called from {c}" for c in f.chain)
        new = type(err)(msg)
        new.instruction = getattr(err, "instruction", None)
        new.__cause__ = err.__cause__
        return new
    return err


def _reachable_post_order(comp: Computation) -> list[Instruction]:
    """Post order restricted to what the root depends on (operands and control
    predecessors), keeping ``comp.post_order()``'s relative order; parameters are
    always included so arguments have a slot."""
    order = comp.post_order()
    root = comp.root
    live = {root}
    stack = [root]
    while stack:
        inst = stack.pop()
        for op in inst.operands:
            if op not in live:
                live.add(op)
                stack.append(op)
        for op in inst.control_predecessors:
            if op not in live:
                live.add(op)
                stack.append(op)
    return [i for i in order if i in live or i.opcode == "parameter"]


def _constant_value(inst: Instruction):
    lit = inst.literal
    return _literal_value(lit, inst)


def _literal_value(lit, inst: Instruction):
    if lit.elided:
        raise UnsupportedError(
            f"constant %{inst.name} is elided ('{{...}}' in the HLO text), so its value is "
            "unknown; re-dump the module with --xla_dump_large_constants=true")
    shape = lit.shape
    if shape.is_tuple():
        return tuple(_literal_value(e, inst) for e in lit.elements)
    if not shape.is_array():
        return TOKEN
    arr = lit.array
    if arr.dtype != shape.dtype:
        arr = arr.astype(shape.dtype)
    return _freeze(arr.reshape(shape.dims))


def _freeze(value):
    """A read-only view, so that a cached value can never be changed by a handler."""
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value = value.view()
        value.flags.writeable = False
    elif isinstance(value, tuple):
        return tuple(_freeze(v) for v in value)
    return value
