"""``simplify-while-loops``: the core of XLA's WhileLoopSimplifier.

* A loop that provably runs 0 times is replaced by its init value.
* A loop that provably runs once (and whose condition and body have no side effects) is
  replaced by its body, inlined on the init value.
* Dead loop-state elements are removed: an element is live when the condition reads it,
  a user of the loop reads it (through get-tuple-element), a side-effecting body
  instruction depends on it, or a live element's next value depends on it.  The loop is
  rebuilt with the live elements only (new body and condition computations).

* A loop-state element the body passes through unchanged whose init value is a constant
  is that constant everywhere: the body and condition read the constant instead (so a
  bound held in the state gives a trip count) and the element dies (XLA's
  TryRemoveConstantParams).  Readers of any passed-through element after the loop read
  its init value.
* Two invariant elements with the same init value are one: readers of the second read
  the first (XLA's TryRemoveRepeatedWhileTupleIndices), and the second dies.
* A loop without state and without side effects is removed (its value is ``()``).

* Induction variables are merged into the trip counter (XLA's TryMergeInductionVariables):
  when the state has a trip counter (an integer scalar that starts at constant 0 and does
  ``x + 1``), every other scalar of the same type doing ``x + <constant c>`` is passed
  through unchanged instead and its readers read ``x + counter * c``; the element then is
  invariant (and, with a constant init, goes).  One scalar kernel less per iteration on GPUs.

Not done (XLA does more): flattening nested tuples, merging repeated elements that are
not invariant, adding a trip counter to merge induction variables into when the state has
none, effective-scalar (``[1]``) induction variables, dead dynamic-update-slices,
brute-force trip counts.
"""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_integral

from hlo_opt.rewrite.builder import Builder
from hlo_opt.rewrite.rules import control_successors, has_opcode, remove_dead
from ._while_util import has_side_effects, inline, trip_count, while_body, while_cond


def _callers(module):
    out: dict[Computation, int] = {}
    for comp in module.computations:
        for i in comp.instructions:
            for c in i.called:
                out[c] = out.get(c, 0) + 1
    return out


def _param_gte_indices(comp: Computation):
    """Tuple indices of the parameter read through get-tuple-element; None when the
    parameter has another kind of use."""
    p = comp.parameters[0]
    idx = set()
    for u in p.users:
        if u.opcode != "get-tuple-element":
            return None
        idx.add(u.attr("index"))
    return idx


def _deps_on_param(roots, param) -> set | None:
    """Tuple indices of ``param`` the values ``roots`` depend on (None: a non-GTE use)."""
    out = set()
    seen = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        if i is param:
            return None
        if i.opcode == "get-tuple-element" and i.operands[0] is param:
            out.add(i.attr("index"))
            continue
        stack.extend(i.operands)
        stack.extend(i.control_predecessors)
    return out


def _live_indices(w: Instruction):
    body, cond = while_body(w), while_cond(w)
    n = len(w.shape.tuple_shapes)
    if body.root.opcode != "tuple" or _param_gte_indices(body) is None:
        return None
    cond_idx = _param_gte_indices(cond)
    if cond_idx is None:
        return None
    live = set(cond_idx)
    for u in w.users:
        if u.opcode != "get-tuple-element":
            return None
        live.add(u.attr("index"))
    if w.is_root:
        return None
    effects = [i for i in body.instructions if i.has_side_effect() or i.called]
    deps = _deps_on_param(effects, body.parameters[0])
    if deps is None:
        return None
    live |= deps
    work = list(live)
    while work:
        j = work.pop()
        d = _deps_on_param([body.root.operands[j]], body.parameters[0])
        if d is None:
            return None
        for k in d - live:
            live.add(k)
            work.append(k)
    if len(live) == n:
        return None
    return sorted(live)


def _backward(roots) -> set:
    seen = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        stack.extend(i.operands)
        stack.extend(i.control_predecessors)
    return seen


def _body_is_clean(body: Computation, live: list[int]) -> bool:
    """Every body instruction feeds the root or a side effect (no stray dead code that
    would keep reading a removed element)."""
    keep = _backward([body.root] + [i for i in body.instructions
                                    if i.has_side_effect() or i.called])
    return all(i in keep for i in body.instructions)


def _remap_param(comp: Computation, live: list[int], new_shape: Shape) -> None:
    remap = {old: new for new, old in enumerate(live)}
    p = comp.parameters[0]
    p.shape = new_shape
    for u in list(p.users):
        u.set_attr("index", remap[u.attr("index")])


def _remove_dead_elements(comp: Computation, w: Instruction, module) -> bool:
    live = _live_indices(w)
    if live is None:
        return False
    body, cond = while_body(w), while_cond(w)
    callers = _callers(module)
    if callers.get(body, 0) != 1 or callers.get(cond, 0) != 1 or body is cond:
        return False
    if not _body_is_clean(body, live):
        return False
    if any(u.attr("index") not in live for u in cond.parameters[0].users):
        return False
    new_shape = Shape.tuple([w.shape.tuple_shapes[i] for i in live])
    # body: a new root with the live elements; the dead ones' computations go away
    old_root = body.root
    new_root = body.add("tuple", new_shape, [old_root.operands[i] for i in live])
    body.root = new_root
    ctrl = control_successors(body)
    remove_dead(body, old_root, ctrl)
    for u in list(body.parameters[0].users):
        if u.attr("index") not in live:
            remove_dead(body, u, ctrl)
    _remap_param(body, live, new_shape)
    _remap_param(cond, live, new_shape)
    b = Builder(comp)
    init = w.operands[0]
    if init.opcode == "tuple":
        elems = [init.operands[i] for i in live]
    else:
        elems = [b.gte(init, i) for i in live]
    w.replace_operand(0, b.tuple(elems))
    w.shape = new_shape
    remap = {old: new for new, old in enumerate(live)}
    for u in list(w.users):
        u.set_attr("index", remap[u.attr("index")])
    if init.user_count == 0:
        remove_dead(comp, init, control_successors(comp))
    return True


class WhileLoopSimplifier:
    name = "simplify-while-loops"

    def run(self, module) -> bool:
        if not has_opcode(module, ("while",)):
            return False
        before = _reachable(module)
        changed = False
        for comp in list(module.computations):
            if comp.module is not module:
                continue
            for w in comp.post_order():
                if w.opcode != "while" or w.parent is not comp or w.control_predecessors:
                    continue
                if _unshare_ok(w, module):
                    changed |= _merge_induction_variables(comp, w)
                    changed |= _propagate_pass_through(comp, w)
                if self._try_remove_loop(comp, w) or _remove_stateless(comp, w):
                    changed = True
                    continue
                if _remove_dead_elements(comp, w, module):
                    changed = True
        if changed:
            _drop_unreachable(module, before)
        return changed

    def _try_remove_loop(self, comp, w) -> bool:
        n = trip_count(w)
        if n is None or n > 1:
            return False
        if w in control_successors(comp):
            return False
        body, cond = while_body(w), while_cond(w)
        if has_side_effects(cond) or (n == 1 and has_side_effects(body)):
            return False
        init = w.operands[0]
        if n == 0:
            new = init
        else:
            new = inline(comp, body, [init])
        if w.is_root and not new.shape.same_dims_and_type(w.shape):
            return False
        w.replace_all_uses_with(new)
        remove_dead(comp, w, control_successors(comp))
        return True


def _unshare_ok(w, module) -> bool:
    body, cond = while_body(w), while_cond(w)
    callers = _callers(module)
    return body is not cond and callers.get(body, 0) == 1 and callers.get(cond, 0) == 1


def _scalar_constant(inst):
    """The value of a scalar integer constant, else None."""
    if inst.opcode != "constant" or not inst.shape.is_scalar() or \
            not is_integral(inst.shape.element_type) or inst.literal.elided:
        return None
    return int(inst.literal.array.reshape(()))


def _increment(root, param, i):
    """``(add, c)`` when the body's next value of element i is ``gte(param, i) + c``
    (either operand order) for an integer scalar constant c, else None."""
    r = root.operands[i]
    if r.opcode != "add" or not r.shape.is_scalar() or \
            not is_integral(r.shape.element_type):
        return None
    for a, b in (r.operands, r.operands[::-1]):
        if a.opcode == "get-tuple-element" and a.operands[0] is param and \
                a.attr("index") == i and _scalar_constant(b) is not None:
            return r, b
    return None


def _merge_induction_variables(comp, w) -> bool:
    """XLA's TryMergeInductionVariables, for a state that already has a trip counter:
    each other induction variable j (``x + c``) is passed through unchanged and its
    readers in the body, the condition and after the loop read ``x + counter * c``."""
    body, cond = while_body(w), while_cond(w)
    root, bparam = body.root, body.parameters[0]
    init = w.operands[0]
    if root.opcode != "tuple" or init.opcode != "tuple" or \
            _param_gte_indices(body) is None or _param_gte_indices(cond) is None or \
            w.is_root or any(u.opcode != "get-tuple-element" for u in w.users):
        return False
    changed = False
    for et in ("s8", "u8", "s32", "u32", "s64", "u64"):
        counter, ivars = None, []
        for i in range(len(root.operands)):
            inc = _increment(root, bparam, i)
            if inc is None or inc[0].shape.element_type != et:
                continue
            if counter is None and _scalar_constant(inc[1]) == 1 and \
                    _scalar_constant(init.operands[i]) == 0:
                counter = i
            else:
                ivars.append((i, inc[1]))
        if counter is None or not ivars:
            continue
        for j, step in ivars:
            slot = root.operands[j]
            made = [(body, v) for v in _reify(body, bparam, j, counter, step)]
            made += [(cond, v) for v in _reify(cond, cond.parameters[0], j, counter, step)]
            gte_j = next(g for g in bparam.users if g.attr("index") == j)
            root.replace_operand(j, gte_j)
            for comp_in, v in [(body, slot)] + made:
                if not v.user_count and not v.is_root and not v.control_successors:
                    remove_dead(comp_in, v, control_successors(comp_in))
            _reify(comp, w, j, counter, step)
        changed = True
    return changed


def _reify(comp_in, tup, j, counter, step) -> list:
    """Readers of element j of ``tup`` read ``element j + element counter * step`` (the
    new values are returned)."""
    made = []
    for g in [u for u in tup.users if u.attr("index") == j]:
        readers = list(g.users)
        if not readers and not g.is_root:
            continue
        b = Builder(comp_in)
        c = b.constant(step.literal)
        t = b.gte(tup, counter)
        value = b.binary("add", g, b.binary("multiply", t, c))
        for x in readers:
            x.replace_operand_with(g, value)
        if g.is_root:
            comp_in.root = value
        made.append(value)
    return made


def _init_element(w, i):
    init = w.operands[0]
    return init.operands[i] if init.opcode == "tuple" else None


def _propagate_pass_through(comp, w) -> bool:
    """Elements the body returns unchanged: readers after the loop read the init value;
    a constant init value replaces the element's reads in the body and the condition."""
    if not w.shape.is_tuple():
        return False
    body, cond = while_body(w), while_cond(w)
    root = body.root
    bparam = body.parameters[0]
    if root.opcode != "tuple":
        return False
    changed = False
    first_of: dict = {}  # init instruction -> first pass-through index holding it
    for i in range(len(w.shape.tuple_shapes)):
        r = root.operands[i]
        if not (r.opcode == "get-tuple-element" and r.operands[0] is bparam
                and r.attr("index") == i):
            continue
        init_i = _init_element(w, i)
        if init_i is None:
            continue
        k = first_of.setdefault(init_i, i)
        if k != i:  # a repeated invariant element: its readers read element k
            changed |= _redirect_element(body, cond, root, i, k)
        for u in list(w.users):
            if u.opcode == "get-tuple-element" and u.attr("index") == i and \
                    (u.user_count or u.is_root):
                u.replace_all_uses_with(init_i)
                if not u.user_count and not u.is_root and not u.control_successors:
                    comp.remove_instruction(u)  # (the loop itself stays: dce decides)
                changed = True
        if init_i.opcode != "constant" or not init_i.shape.is_array() or \
                init_i.literal.elided:
            continue
        for comp_in in (body, cond):
            param = comp_in.parameters[0]
            for g in list(param.users):
                if g.opcode != "get-tuple-element" or g.attr("index") != i:
                    continue
                readers = [x for x in g.users if x is not root]
                if not readers:
                    continue
                c = comp_in.add("constant", init_i.shape, name=init_i.name,
                                payload=init_i.payload)
                c.cache_literal(init_i.cached_literal)
                for x in readers:
                    x.replace_operand_with(g, c)
                if not g.user_count:
                    remove_dead(comp_in, g, control_successors(comp_in))
                changed = True
    return changed


def _redirect_element(body, cond, root, i: int, k: int) -> bool:
    """XLA's TryRemoveRepeatedWhileTupleIndices for invariant elements: i always equals
    k, so what reads i in the body and the condition reads k (i then dies)."""
    changed = False
    for comp_in in (body, cond):
        param = comp_in.parameters[0]
        gtes = [g for g in param.users if g.opcode == "get-tuple-element"]
        src = next((g for g in gtes if g.attr("index") == k), None)
        for g in gtes:
            if g.attr("index") != i:
                continue
            readers = [x for x in g.users if not (x is root and comp_in is body)]
            if not readers and not (g.is_root and comp_in is cond):
                continue
            if src is None:
                src = comp_in.add("get-tuple-element", g.shape, [param], name=g.name,
                                  attrs={"index": str(k)})
            for x in readers:
                x.replace_operand_with(g, src)
            if g.is_root:
                comp_in.root = src
            if not g.user_count and not g.is_root:
                remove_dead(comp_in, g, control_successors(comp_in))
            changed = True
    return changed


def _remove_stateless(comp, w) -> bool:
    """A loop whose state is an empty tuple and that has no side effects does nothing."""
    if not (w.shape.is_tuple() and not w.shape.tuple_shapes) or w.is_root and False:
        return False
    if has_side_effects(while_body(w)) or has_side_effects(while_cond(w)) or \
            w in control_successors(comp):
        return False
    empty = comp.add("tuple", w.shape, [], name="tuple")
    w.replace_all_uses_with(empty)
    remove_dead(comp, w, control_successors(comp))
    return True


def _reachable(module) -> set:
    reachable = set()
    stack = [module.entry] if module.entry is not None else []
    while stack:
        c = stack.pop()
        if c in reachable:
            continue
        reachable.add(c)
        for i in c.instructions:
            stack.extend(i.called)
    return reachable


def _drop_unreachable(module, before: set) -> None:
    """Remove the computations this pass made unreachable (a removed loop's body)."""
    after = _reachable(module)
    for c in list(module.computations):
        if c in before and c not in after:
            module.remove_computation(c)
