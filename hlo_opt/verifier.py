"""The HLO verifier: structural invariants plus declared-versus-inferred shapes.

``verify_module(module)`` raises :class:`~hlo_opt.errors.HloVerifyError` listing every
problem found (up to a cap), each with the computation, the instruction and its text.
``module_errors(module)`` returns the same list without raising.

Checks, following ``xla/service/hlo_verifier.cc`` (layout-insensitive, mixed precision
disallowed):

* module: an entry computation that belongs to the module, has no callers and agrees
  with a written ``entry_computation_layout``; unique computation names; no
  computation calls itself, directly or not;
* computation: a root inside it; parameters numbered 0..n-1; operands acyclic; a fused
  computation belongs to one fusion, its root has no users and everything else has;
* instruction: a module-unique name; a known opcode with the right operand count;
  operands and control predecessors in the same computation; users and operands listed
  in both directions; called computations in the module, only on opcodes that call;
* shapes: the declared shape is compatible with ``infer_shape`` (which also checks
  operand types and called-computation signatures); no mixed floating-point precision
  among the operands of arithmetic ops.

Everything is one pass over the module plus O(1) work per operand/user edge, so it can
run after every pass that changes the module.
"""
from __future__ import annotations


from .errors import QUOTE_LIMIT, HloVerifyError, quote
from .ir.opcodes import OPCODES, VARIADIC
from .ir.shape import Shape
from .ir.types import is_float
from .shape_inference import CannotInfer, ShapeError, compatible, infer_shape
from .text.source_map import location_of
from .verifier_checks import instruction_problems

MAX_ERRORS = 50

# Opcodes that may call computations (HloInstruction::MightHaveCalledComputations).
CALLERS = frozenset({
    "fusion", "call", "while", "conditional", "map", "reduce", "reduce-window", "scatter",
    "select-and-scatter", "sort", "all-reduce", "all-reduce-start", "reduce-scatter",
    "custom-call", "async-start", "async-update", "async-done", "scan", "collective-reduce"})

# Opcodes whose operands may mix floating-point precisions (CheckMixedPrecisionOperands).
_MIXED_PRECISION_OK = frozenset({
    "call", "conditional", "constant", "convolution", "dot", "all-reduce",
    "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
    "all-gather-done", "async-done", "async-update", "async-start", "copy-done",
    "copy-start", "custom-call", "domain", "fusion", "get-tuple-element", "opt-barrier",
    "infeed", "outfeed", "parameter", "recv", "recv-done", "reduce-precision",
    "reduce-window", "send", "send-done", "sort", "tuple", "while",
    # not in XLA's list but unable to mix precisions (one float operand, or dot-like)
    "convert", "bitcast-convert", "stochastic-convert", "bitcast", "ragged-dot",
    "scaled-dot"})
_APPLY_TYPES_MATCH = frozenset({"reduce", "map", "reduce-window"})


class _Errors:
    def __init__(self, cap: int):
        self.cap = cap
        self.items: list[str] = []
        self.total = 0

    def add(self, comp, inst, message: str) -> None:
        self.total += 1
        if len(self.items) >= self.cap:
            return
        where = f"computation %{quote(comp.name, 80)}" if comp is not None else "module"
        message = quote(message, QUOTE_LIMIT * 2)
        if inst is None:
            self.items.append(f"{where}: {message}")
            return
        located = location_of(inst)
        prefix = f"{located}: " if located else ""
        self.items.append(f"{prefix}{where}, instruction %{quote(inst.name, 80)}: {message}"
                          f"\n    {quote(_inst_text(inst), QUOTE_LIMIT * 2)}")


def _inst_text(inst) -> str:
    try:
        return inst.to_text(print_metadata=False, large_constants=False)
    except Exception:  # noqa: BLE001 - a broken instruction must still be reportable
        return f"{inst.opcode}(...) (unprintable)"


def verify_module(module, max_errors: int = MAX_ERRORS) -> None:
    """Raise HloVerifyError listing every problem (up to ``max_errors``)."""
    errors = _Errors(max_errors)
    _verify(module, errors)
    if errors.total:
        lines = [f"{module.name}: {errors.total} verification error(s):"]
        lines += ["  " + e for e in errors.items]
        if errors.total > len(errors.items):
            lines.append(f"  ... and {errors.total - len(errors.items)} more")
        err = HloVerifyError("\n".join(lines))
        err.errors = list(errors.items)
        raise err


def module_errors(module, max_errors: int = MAX_ERRORS) -> list[str]:
    errors = _Errors(max_errors)
    _verify(module, errors)
    return errors.items


# ---- module ---------------------------------------------------------------------------
def _verify(module, errors: _Errors) -> None:
    comps = module.computations
    comp_set = set(comps)
    entry = module.entry
    if entry is None:
        errors.add(None, None, "the module has no entry computation")
    elif entry not in comp_set:
        errors.add(entry, None, "the entry computation is not in the module")
    seen_comp_names: set[str] = set()
    for comp in comps:
        if comp.name in seen_comp_names:
            errors.add(comp, None, "computation name is used twice in the module")
        seen_comp_names.add(comp.name)
        if comp.module is not module:
            errors.add(comp, None, "computation's module pointer is not this module")
        if comp.is_entry and comp is not entry:
            errors.add(comp, None, "computation is marked ENTRY but is not the entry")
    if entry is not None and entry in comp_set:
        _verify_entry_layout(module, entry, errors)
    names: dict[str, object] = {}
    fusions: dict = {}  # fused computation -> fusion instructions calling it
    for comp in comps:
        _verify_computation(comp, comp_set, entry, names, errors, fusions)
    _check_call_graph_acyclic(comps, comp_set, errors)
    for fused, callers in fusions.items():
        if fused in comp_set:
            _verify_fused_computation(fused, callers, errors)


def _verify_entry_layout(module, entry, errors: _Errors) -> None:
    """VerifyEntryComputationLayout: a written entry_computation_layout must agree with
    the entry's parameters and root (layouts ignored)."""
    raw = module.header_attrs.get("entry_computation_layout")
    if not raw or entry.root is None:
        return
    body = raw.strip()[1:-1]
    arrow = body.rfind("->")
    try:
        params = Shape.parse(body[:arrow]).tuple_shapes
        result = Shape.parse(body[arrow + 2:])
    except ValueError:
        errors.add(entry, None, f"bad entry_computation_layout={raw}")
        return
    actual = [p.shape for p in entry.parameters if p is not None]
    if len(params) != len(actual):
        errors.add(entry, None, f"entry_computation_layout has {len(params)} parameters, "
                   f"the entry computation has {len(actual)}")
        return
    for i, (want, have) in enumerate(zip(params, actual)):
        if have is not None and not compatible(want, have):
            errors.add(entry, None, f"entry parameter {i} is {have.to_text(False)} but "
                       f"entry_computation_layout says {want.to_text(False)}")
    root = entry.root.shape
    if root is not None and not compatible(result, root):
        errors.add(entry, None, f"entry root is {root.to_text(False)} but "
                   f"entry_computation_layout says {result.to_text(False)}")


def _verify_fused_computation(comp, callers, errors: _Errors) -> None:
    """CheckFusionInstruction: one fusion owns the computation; its root has no users
    and every other instruction (parameters included) has one."""
    if len(callers) > 1:
        errors.add(comp, None, "fused computation is called by "
                   f"{len(callers)} fusion instructions (%{callers[0].name}, "
                   f"%{callers[1].name}); each fusion needs its own")
    root = comp.root
    for inst in comp.iter_instructions():
        if inst is root:
            if inst.user_count:
                errors.add(comp, inst, "the root of a fused computation may not have users")
        elif not inst.user_count:
            errors.add(comp, inst, "non-root instruction of a fused computation has no "
                       "users")


def _check_call_graph_acyclic(comps, comp_set, errors: _Errors) -> None:
    state: dict = {}  # comp -> 1 visiting, 2 done
    for start in comps:
        if start in state:
            continue
        stack = [(start, iter(start.called_computations()))]
        state[start] = 1
        while stack:
            comp, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[comp] = 2
                stack.pop()
                continue
            if nxt not in comp_set:
                continue
            s = state.get(nxt)
            if s == 1:
                errors.add(nxt, None, "computation calls itself (call graph cycle)")
            elif s is None:
                state[nxt] = 1
                stack.append((nxt, iter(nxt.called_computations())))


# ---- computation ----------------------------------------------------------------------
def _verify_computation(comp, comp_set, entry, names: dict, errors: _Errors,
                        fusions: dict) -> None:
    insts = comp.instructions_view()
    root = comp.root
    if root is None:
        errors.add(comp, None, "computation has no root instruction")
    elif root not in insts:
        errors.add(comp, None, f"root %{root.name} is not an instruction of the computation")
    if not insts:
        errors.add(comp, None, "computation has no instructions")
    params_seen = []
    operand_sets: dict[int, set] = {}
    seen: set = set()
    topological = True  # operands before users in insertion order: no cycle possible
    for inst in insts:
        if inst.opcode == "parameter":
            params_seen.append(inst)
        elif inst.opcode == "fusion" and len(inst.called) == 1:
            fusions.setdefault(inst.called[0], []).append(inst)
        structural_ok = _verify_instruction(inst, comp, comp_set, entry, names, errors,
                                            operand_sets)
        if structural_ok:
            _verify_shape(inst, comp, errors)
        if topological:
            for op in inst.operands:
                if op not in seen:
                    topological = False
                    break
            for op in inst.control_predecessors:
                if op not in seen:
                    topological = False
        seen.add(inst)
    _verify_parameters(comp, params_seen, errors)
    if not topological:
        _check_acyclic(comp, errors)


def _verify_parameters(comp, params_seen, errors: _Errors) -> None:
    params = comp.parameters
    for n, p in enumerate(params):
        if p is None:
            errors.add(comp, None, f"parameter number {n} is missing (numbers must be "
                       f"0..{len(params) - 1})")
        elif p not in comp:
            errors.add(comp, p, f"parameter {n} is not an instruction of the computation")
        elif p.opcode != "parameter":
            errors.add(comp, p, f"parameter slot {n} holds a {p.opcode}")
    listed = {id(p) for p in params if p is not None}
    for p in params_seen:
        try:
            number = int(p.payload)
        except ValueError:
            errors.add(comp, p, f"parameter number '{p.payload}' is not an integer")
            continue
        if id(p) not in listed:
            errors.add(comp, p, f"parameter {number} is not registered in the "
                       "computation's parameter list")
        elif not (0 <= number < len(params) and params[number] is p):
            errors.add(comp, p, f"parameter says number {number} but sits at another "
                       "position of the parameter list")
    if len(params_seen) != len(listed):
        errors.add(comp, None, f"the computation has {len(params_seen)} parameter "
                   f"instructions but {len(params)} parameter slots")


def _check_acyclic(comp, errors: _Errors) -> None:
    """Operands (and control predecessors) must form a DAG."""
    state: dict[int, int] = {}
    for start in comp.iter_instructions():
        if id(start) in state:
            continue
        state[id(start)] = 1
        stack = [(start, iter(start.operands + start.control_predecessors))]
        while stack:
            inst, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[id(inst)] = 2
                stack.pop()
                continue
            s = state.get(id(nxt))
            if s == 1:
                errors.add(comp, nxt, "operand cycle: the instruction depends on itself")
                return
            if s is None and nxt.parent is comp:
                state[id(nxt)] = 1
                stack.append((nxt, iter(nxt.operands + nxt.control_predecessors)))


# ---- instruction ----------------------------------------------------------------------
def _verify_instruction(inst, comp, comp_set, entry, names, errors, operand_sets) -> bool:
    """Structural checks; True when the instruction is sound enough to infer its shape."""
    ok = True
    if inst.parent is not comp:
        errors.add(comp, inst, "instruction's parent pointer is another computation")
    other = names.get(inst.name)
    if other is not None:
        errors.add(comp, inst, f"instruction name is not unique in the module (also in "
                   f"%{other.parent.name if other.parent is not None else '?'})")
    else:
        names[inst.name] = inst
    spec = OPCODES.get(inst.opcode)
    if spec is None:
        errors.add(comp, inst, f"unknown opcode '{inst.opcode}'")
        return False
    if inst.shape is None:
        errors.add(comp, inst, "instruction has no shape")
        ok = False
    arity = spec[0]
    if arity != VARIADIC and len(inst.operands) != arity and not (
            inst.opcode == "dot" and "sparsity" in inst.attrs):
        errors.add(comp, inst, f"{inst.opcode} takes {arity} operand(s), has "
                   f"{len(inst.operands)}")
        ok = False
    insts = comp.instructions_view()
    for i, op in enumerate(inst.operands):
        if op.parent is not comp or op not in insts:
            where = op.parent.name if op.parent is not None else "no computation"
            errors.add(comp, inst, f"operand {i} (%{op.name}) belongs to {where}, not to "
                       "this computation")
            ok = False
        elif not op.has_user(inst):
            errors.add(comp, inst, f"operand {i} (%{op.name}) does not list this "
                       "instruction among its users")
        if op.shape is None:
            ok = False
    for user in inst.iter_users():
        if user.parent is not comp or user not in insts:
            errors.add(comp, inst, f"user %{user.name} is not in this computation")
            continue
        ops = user.operands
        if len(ops) > 16:
            key = id(user)
            ids = operand_sets.get(key)
            if ids is None:
                ids = operand_sets[key] = {id(o) for o in ops}
            listed = id(inst) in ids
        else:
            listed = inst in ops
        if not listed:
            errors.add(comp, inst, f"user %{user.name} does not have this instruction as "
                       "an operand")
    for p in inst.control_predecessors:
        if p.parent is not comp or p not in insts:
            errors.add(comp, inst, f"control predecessor %{p.name} is not in this "
                       "computation")
    if inst.opcode == "constant" and inst.shape is not None:
        _verify_constant(inst, comp, errors)
    if not inst.called and inst.called_attr is not None and inst.opcode != "custom-call":
        attr = inst.called_attr if isinstance(inst.called_attr, str) else inst.called_attr[0]
        errors.add(comp, inst, f"{attr}= names no computation")
        ok = False
    if inst.called:
        if inst.opcode not in CALLERS:
            errors.add(comp, inst, f"{inst.opcode} cannot call computations")
        for callee in inst.called:
            if callee not in comp_set:
                errors.add(comp, inst, f"called computation %{callee.name} is not in the "
                           "module")
                ok = False
            elif callee is entry:
                errors.add(comp, inst, f"calls the entry computation %{callee.name}")
    return ok


def _verify_constant(inst, comp, errors: _Errors) -> None:
    """The literal fits the constant's shape (parsed on first use; kept)."""
    from .ir.literal import LiteralSyntaxError, parse_literal
    lit = inst.cached_literal
    if lit is None:
        if inst.payload == "{...}":
            return
        try:
            inst.cache_literal(parse_literal(inst.payload, inst.shape))
        except (LiteralSyntaxError, ValueError, TypeError, OverflowError) as e:
            errors.add(comp, inst, f"constant literal does not fit "
                       f"{inst.shape.to_text(False)}: {e}")
    elif not lit.shape.same_dims_and_type(inst.shape):
        errors.add(comp, inst, f"constant's literal has shape {lit.shape.to_text(False)}, "
                   f"the instruction {inst.shape.to_text(False)}")


def _verify_shape(inst, comp, errors: _Errors) -> None:
    try:
        inferred = infer_shape(inst)
    except ShapeError as e:
        errors.add(comp, inst, str(e))
        return
    except CannotInfer:
        inferred = None
    except HloVerifyError as e:
        errors.add(comp, inst, str(e))
        return
    except Exception as e:  # noqa: BLE001 - a malformed instruction, not a crash
        errors.add(comp, inst, f"shape inference failed: {type(e).__name__}: {e}")
        return
    if inferred is not None and not compatible(inst.shape, inferred):
        errors.add(comp, inst, f"declared shape {inst.shape.to_text(False)} does not match "
                   f"the inferred shape {inferred.to_text(False)}")
    if inst.opcode not in _MIXED_PRECISION_OK:
        _check_mixed_precision(inst, comp, errors)
    if inst.opcode == "custom-call" or "replica_groups" in inst.attrs or \
            "backend_config" in inst.attrs:
        for problem in instruction_problems(inst):
            errors.add(comp, inst, problem)


def _check_mixed_precision(inst, comp, errors: _Errors) -> None:
    fp = None
    for op in inst.operands:
        shape = op.shape
        leaves = shape.leaves() if shape.is_tuple() else (shape,)
        for leaf in leaves:
            t = leaf.element_type
            if is_float(t):
                if fp is None:
                    fp = t
                elif t != fp:
                    errors.add(comp, inst, f"operands mix floating-point types {fp} and {t}")
                    return
    if inst.opcode in _APPLY_TYPES_MATCH and inst.called:
        params = inst.called[0].parameters
        for i, op in enumerate(inst.operands[:len(params)]):
            p = params[i]
            if p is not None and p.shape.element_type != op.shape.element_type:
                errors.add(comp, inst, f"operand {i} is {op.shape.element_type} but "
                           f"%{inst.called[0].name} parameter {i} is "
                           f"{p.shape.element_type}")
                return
