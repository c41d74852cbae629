"""While-loop analysis shared by the while passes (XLA's while_loop_analysis): the
induction variable's tuple index and the trip count of counted loops; plus inlining a
computation into a caller (used to remove loops and conditionals)."""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.types import BIT_WIDTH, is_integral, is_signed_int

from .algsimp.predicates import scalar_value


def while_body(w: Instruction) -> Computation:
    return w.called[_called_index(w, "body")]


def while_cond(w: Instruction) -> Computation:
    return w.called[_called_index(w, "condition")]


def _called_index(w, attr):
    names = w.called_attr if isinstance(w.called_attr, tuple) else (w.called_attr,)
    return list(names).index(attr)


def _gte_index_of(inst: Instruction, param: Instruction):
    """The tuple index when ``inst`` is get-tuple-element(param), looking through
    copies and converts (XLA's GetGTEOperandIndex for a single operand)."""
    while inst.opcode in ("copy", "convert"):
        inst = inst.operands[0]
    if inst.opcode == "get-tuple-element" and inst.operands[0] is param:
        return inst.attr("index")
    return None


def _unique_gte_operand(inst: Instruction, param: Instruction):
    found = None
    for op in inst.operands:
        idx = _gte_index_of(op, param)
        if idx is None:
            if op.opcode != "constant":
                return None
            continue
        if found is not None and found != idx:
            return None
        found = idx
    return found


def _compared_with_invariant(w: Instruction, cond: Computation):
    """i when the cond root compares gte(param, i) with an invariant element of the state
    that starts as a constant (the bound held in the loop state)."""
    root, p = cond.root, cond.parameters[0]
    if root.opcode != "compare":
        return None
    a, b = root.operands
    ia, ib = _gte_index_of(a, p), _gte_index_of(b, p)
    if ia is None or ib is None or ia == ib:
        return None
    if _invariant_constant(w, b, p) is not None:
        return ia
    if _invariant_constant(w, a, p) is not None:
        return ib
    return None


def induction_var_index(w: Instruction):
    """XLA's GetLoopInductionVarTupleIdx: cond root compares gte(param, i) (with constants);
    the body root is a tuple whose element i is computed from gte(param, i)."""
    cond, body = while_cond(w), while_body(w)
    if not cond.parameters or not body.parameters:
        return None
    idx = _unique_gte_operand(cond.root, cond.parameters[0])
    if idx is None:
        idx = _compared_with_invariant(w, cond)
    if idx is None:
        return None
    root = body.root
    if root.opcode != "tuple" or idx >= len(root.operands):
        return None
    inc = root.operands[idx]
    if _unique_gte_operand(inc, body.parameters[0]) != idx:
        return None
    return idx


def _init_value(w: Instruction, idx: int):
    init = w.operands[0]
    if init.opcode != "tuple" or idx >= len(init.operands):
        return None
    c = init.operands[idx]
    if c.opcode != "constant" or c.shape.num_elements() != 1 or \
            not is_integral(c.shape.element_type):
        return None
    return scalar_value(c)


def _linear_update(expr: Instruction, param: Instruction, idx: int):
    """step when expr == gte(param, idx) + step (add/subtract of constants), else None."""
    if expr.opcode == "get-tuple-element" and expr.operands[0] is param:
        return 0 if expr.attr("index") == idx else None
    if expr.opcode == "constant":
        return None
    if expr.opcode in ("add", "subtract") and len(expr.operands) == 2:
        a, b = expr.operands
        if b.opcode == "constant" and b.shape.num_elements() == 1:
            s = _linear_update(a, param, idx)
            v = scalar_value(b)
            if s is None or not isinstance(v, int):
                return None
            return s + v if expr.opcode == "add" else s - v
        if expr.opcode == "add" and a.opcode == "constant" and a.shape.num_elements() == 1:
            s = _linear_update(b, param, idx)
            v = scalar_value(a)
            if s is None or not isinstance(v, int):
                return None
            return s + v
    return None


_FLIP = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ", "NE": "NE"}


def _invariant_constant(w: Instruction, inst: Instruction, param: Instruction):
    """The value of ``inst`` when it is a constant, or get-tuple-element(param, k) of an
    element the body passes through unchanged whose init value is a constant (a bound
    held in the loop state)."""
    if inst.opcode == "constant":
        return scalar_value(inst)
    if inst.opcode != "get-tuple-element" or inst.operands[0] is not param:
        return None
    k = inst.attr("index")
    body, init = while_body(w), w.operands[0]
    root = body.root
    if root.opcode != "tuple" or init.opcode != "tuple" or k >= len(root.operands):
        return None
    r = root.operands[k]
    if not (r.opcode == "get-tuple-element" and r.operands[0] is body.parameters[0]
            and r.attr("index") == k):
        return None
    c = init.operands[k]
    if c.opcode != "constant" or not is_integral(c.shape.element_type):
        return None
    return scalar_value(c)


def _bound(w: Instruction, idx: int):
    """(direction, bound) for a cond root ``compare(gte(p, idx), c)`` (or swapped); the
    bound is a constant or an invariant element of the state with a constant init."""
    cond = while_cond(w)
    root = cond.root
    if root.opcode != "compare":
        return None
    p = cond.parameters[0]
    a, b = root.operands
    d = root.comparison_direction
    if _gte_index_of(a, p) == idx and _gte_index_of(b, p) != idx:
        v = _invariant_constant(w, b, p)
    elif _gte_index_of(b, p) == idx and _gte_index_of(a, p) != idx:
        v = _invariant_constant(w, a, p)
        d = _FLIP.get(d)
    else:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or d is None:
        return None
    # the compared values must be the indvar itself (copies/converts of integers only)
    for op in root.operands:
        while op.opcode in ("copy", "convert"):
            if not is_integral(op.shape.element_type):
                return None
            op = op.operands[0]
    return d, v


def _count(init: int, step: int, d: str, bound: int):
    def holds(x):
        return {"LT": x < bound, "LE": x <= bound, "GT": x > bound, "GE": x >= bound,
                "EQ": x == bound, "NE": x != bound}[d]
    if not holds(init):
        return 0
    if step == 0:
        return None  # never terminates
    if d == "LT" and step > 0:
        return -(-(bound - init) // step)
    if d == "LE" and step > 0:
        return (bound - init) // step + 1
    if d == "GT" and step < 0:
        return -(-(init - bound) // -step)
    if d == "GE" and step < 0:
        return (init - bound) // -step + 1
    if d == "NE" and (bound - init) % step == 0 and (bound - init) // step > 0:
        return (bound - init) // step
    if d == "EQ":
        return 1
    return None


def trip_count(w: Instruction):
    """The number of iterations of a counted loop (XLA's ComputeWhileLoopTripCount for the
    pattern-matchable case), or None when unknown."""
    idx = induction_var_index(w)
    if idx is None:
        return None
    init = _init_value(w, idx)
    if init is None:
        return None
    body = while_body(w)
    step = _linear_update(body.root.operands[idx], body.parameters[0], idx)
    bound = _bound(w, idx)
    if step is None or bound is None:
        return None
    n = _count(init, step, bound[0], bound[1])
    if n is None or n < 0:
        return None
    t = w.operands[0].operands[idx].shape.element_type
    bits = BIT_WIDTH[t]
    lo, hi = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if is_signed_int(t)
              else (0, (1 << bits) - 1))
    last = init + n * step  # the value that ends the loop must be representable
    if not (lo <= last <= hi and lo <= init <= hi):
        return None
    return n


def has_side_effects(comp: Computation, _seen=None) -> bool:
    seen = _seen if _seen is not None else set()
    if comp in seen:
        return False
    seen.add(comp)
    for i in comp.instructions:
        if i.has_side_effect_no_recurse() or i.opcode in ("rng", "rng-bit-generator",
                                                          "rng-get-and-update-state"):
            return True
        if any(has_side_effects(c, seen) for c in i.called):
            return True
    return False


def inline(caller: Computation, callee: Computation, args, builder=None) -> Instruction:
    """Clone ``callee``'s instructions into ``caller`` with its parameters bound to
    ``args``; returns the clone of the callee's root."""
    m: dict[Instruction, Instruction] = {}
    for p, a in zip(callee.parameters, args):
        m[p] = a
    for inst in callee.post_order():
        if inst in m:
            continue
        new = Instruction(inst.opcode, inst.shape, [m[o] for o in inst.operands],
                          {k: v for k, v in inst.attrs.items() if k != "control-predecessors"},
                          inst.name, inst.payload, inst.called, inst.called_attr)
        new.cache_literal(inst.cached_literal)
        caller.add_instruction(new)
        if builder is not None:
            builder.created.append(new)
            builder.created_set.add(new)
        m[inst] = new
    for inst in callee.post_order():
        if inst.control_predecessors and inst in m and inst.opcode != "parameter":
            m[inst].control_predecessors = [m[p] for p in inst.control_predecessors
                                            if p in m and p.opcode != "parameter"]
    return m[callee.root]
