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

* An element the body sets to a constant equal to its constant init value is that
  constant everywhere (XLA's TryRemoveConstantParams) and dies.
* Elements whose body value is ``dynamic-update-slice`` of themselves with the same
  update and the same indices, and whose init values are the same instruction, are one
  (the dynamic-update-slice half of TryRemoveRepeatedWhileTupleIndices): readers of the
  later ones (in the loop and after it) read the first, and the later ones die.
* A state with nested tuples is flattened (XLA's TryFlattenNestedTuples): the loop
  carries the leaves; the body and the condition rebuild the nested value they read
  (folded into direct reads), and so do the loop's users.
* Induction variables that move together are merged (XLA's TryMergeInductionVariables):
  per integer type, elements updated as ``x + constant`` become ``init + counter *
  constant`` over one trip counter (an element starting at 0 that adds 1, added at the
  end of the state when there is none) and are carried unchanged.
* Instructions of the body that feed neither the root nor a side effect (a dynamic-update-
  slice whose result is dead, say) do not keep an element alive; they go with it.

Not done (XLA does more): brute-force trip counts, the trivial-compare rewrite.
"""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.builder import Builder
from hlo_opt.rewrite.graph import add_gte
from hlo_opt.rewrite.rules import control_successors, has_opcode, remove_dead
from ._while_util import has_side_effects, inline, trip_count, while_body, while_cond
from .algsimp.predicates import same_literal, scalar_value


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


def _remove_stray_code(body: Computation) -> None:
    """Remove the body instructions that feed neither the root nor a side effect (dead
    code, such as a dynamic-update-slice whose result nothing reads): the liveness of the
    elements ignores them, as XLA's does, so they must not keep reading a removed one."""
    keep = _backward([body.root] + [i for i in body.instructions
                                    if i.has_side_effect() or i.called])
    ctrl = control_successors(body)
    for i in reversed(body.post_order()):
        if i not in keep and i.opcode != "parameter" and not i.user_count:
            remove_dead(body, i, ctrl)


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
    _remove_stray_code(body)
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
                own = _unshare_ok(w, module)
                if own:
                    changed |= _merge_repeated_dus(comp, w)
                    changed |= _flatten_nested_tuples(comp, w)
                    changed |= _propagate_pass_through(comp, w)
                if self._try_remove_loop(comp, w) or _remove_stateless(comp, w):
                    changed = True
                    continue
                if _remove_dead_elements(comp, w, module):
                    changed = True
                    continue
                if own and _merge_induction_variables(comp, w):
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
        init_i = _init_element(w, i)
        if init_i is None:
            continue
        passed = (r.opcode == "get-tuple-element" and r.operands[0] is bparam
                  and r.attr("index") == i)
        # XLA's TryRemoveConstantParams: the body writes back the init constant
        if not passed and not (init_i.opcode == "constant" and r.opcode == "constant"
                               and init_i.shape == r.shape and same_literal(init_i, r)):
            continue
        if passed:
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


def _param_users_all_gte(comp: Computation) -> bool:
    return all(u.opcode == "get-tuple-element" for u in comp.parameters[0].users)


def _users_all_gte(w: Instruction) -> bool:
    return not w.is_root and all(u.opcode == "get-tuple-element" for u in w.users)


def _merge_repeated_dus(comp, w) -> bool:
    """The dynamic-update-slice half of XLA's TryRemoveRepeatedWhileTupleIndices: elements
    with the same init instruction whose body value is dynamic-update-slice of themselves
    with the same update and the same index operands hold the same value on every trip.
    Readers of the later ones read the first (in the body, the condition and after the
    loop); the later ones are then dead and go with the dead elements."""
    init, body, cond = w.operands[0], while_body(w), while_cond(w)
    root = body.root
    if init.opcode != "tuple" or root.opcode != "tuple" or not _users_all_gte(w):
        return False
    if not (_param_users_all_gte(body) and _param_users_all_gte(cond)):
        return False
    bparam = body.parameters[0]
    groups: dict = {}
    for i, r in enumerate(root.operands):
        if r.opcode != "dynamic-update-slice":
            continue
        g = r.operands[0]
        if not (g.opcode == "get-tuple-element" and g.operands[0] is bparam
                and g.attr("index") == i):
            continue
        key = (init.operands[i], r.operands[1], tuple(r.operands[2:]))
        groups.setdefault(key, []).append(i)
    dead_to_kept = {d: idx[0] for idx in groups.values() if len(idx) > 1 for d in idx[1:]}
    if not dead_to_kept:
        return False
    for comp_in in (body, cond):
        param = comp_in.parameters[0]
        kept_gte: dict = {}
        for g in list(param.users):
            k = dead_to_kept.get(g.attr("index"))
            if k is None:
                continue
            src = kept_gte.get(k)
            if src is None:
                src = kept_gte[k] = comp_in.add("get-tuple-element",
                                                param.shape.tuple_shapes[k], [param],
                                                name=g.name, attrs={"index": str(k)})
            g.replace_all_uses_with(src)
            if not g.user_count and g is not comp_in.root:
                remove_dead(comp_in, g, control_successors(comp_in))
    for u in list(w.users):
        k = dead_to_kept.get(u.attr("index"))
        if k is not None:
            u.set_attr("index", k)
    return True


def _flat_elements(b: Builder, inst: Instruction) -> list:
    """The leaves of ``inst``'s value: tuple operands directly, get-tuple-elements else."""
    if not inst.shape.is_tuple():
        return [inst]
    if inst.opcode == "tuple":
        return [e for o in inst.operands for e in _flat_elements(b, o)]
    return [e for k in range(len(inst.shape.tuple_shapes))
            for e in _flat_elements(b, b.gte(inst, k))]


def _unflatten(comp: Computation, flat: Instruction, shape: Shape) -> Instruction:
    """A tuple of ``shape`` built from the elements of the flat tuple ``flat``."""
    leaves = iter(range(len(flat.shape.tuple_shapes)))

    def build(s: Shape) -> Instruction:
        if not s.is_tuple():
            k = next(leaves)
            return add_gte(comp, flat, k)
        return comp.add("tuple", s, [build(t) for t in s.tuple_shapes], name="tuple")
    return build(shape)


def _fold_reads(comp: Computation, t: Instruction) -> None:
    """get-tuple-element(t, k) read ``t``'s operand k directly, through the nested tuples
    ``t`` was built from; ``t`` goes when nothing else reads it."""
    for u in list(t.users):
        if u.opcode != "get-tuple-element" or u.operands[0] is not t or \
                u.has_control_edges:
            continue
        e = t.operands[u.attr("index")]
        u.replace_all_uses_with(e)
        comp.remove_instruction(u)
        if e.opcode == "tuple":
            _fold_reads(comp, e)
    if not t.user_count and t is not comp.root:
        remove_dead(comp, t, control_successors(comp))


def _flatten_nested_tuples(comp, w) -> bool:
    """XLA's TryFlattenNestedTuples: the loop carries the leaves of a nested state."""
    init, body, cond = w.operands[0], while_body(w), while_cond(w)
    root = body.root
    if init.opcode != "tuple" or root.opcode != "tuple" or root.user_count:
        return False
    shape = w.shape
    if not any(s.is_tuple() for s in shape.tuple_shapes):
        return False
    flat = Shape.tuple(shape.leaves())
    for comp_in in (body, cond):
        param = comp_in.parameters[0]
        users = list(param.users)
        param.shape = flat
        nested = _unflatten(comp_in, param, shape)
        for u in users:
            u.replace_operand_with(param, nested)
        _fold_reads(comp_in, nested)
    new_root = body.add("tuple", flat, _flat_elements(Builder(body), root), name="tuple")
    body.root = new_root
    remove_dead(body, root, control_successors(body))
    new_init = comp.add("tuple", flat, _flat_elements(Builder(comp), init), name="tuple")
    w.replace_operand(0, new_init)
    users = list(w.users)
    was_root = w.is_root
    w.shape = flat
    nested = _unflatten(comp, w, shape)
    for u in users:
        u.replace_operand_with(w, nested)
    if was_root:
        comp.root = nested
    _fold_reads(comp, nested)
    if not init.user_count and init is not comp.root:
        remove_dead(comp, init, control_successors(comp))
    return True


# XLA merges these element types (s16/u16 are missing there too)
_INDUCTION_TYPES = ("s8", "u8", "s32", "u32", "s64", "u64")


def _induction_step(r: Instruction, param: Instruction, i: int, et: str):
    """The constant c when ``r`` is add(gte(param, i), c) (either order) of type ``et``."""
    if r.opcode != "add" or r.shape.element_type != et:
        return None
    a, b = r.operands
    for g, c in ((a, b), (b, a)):
        if g.opcode == "get-tuple-element" and g.operands[0] is param and \
                g.attr("index") == i and c.opcode == "constant" and \
                c.shape.is_array() and c.shape.num_elements() == 1 and \
                scalar_value(c) is not None:
            return c
    return None


def _reified(comp: Computation, value: Instruction, counter: Instruction,
             step: Instruction) -> Instruction:
    """value + counter * step, in value's shape (effective scalars reshaped)."""
    b = Builder(comp)
    dims = value.shape.dims
    if counter.shape.dims != dims:
        counter = b.reshape(counter, dims)
    c = comp.add("constant", step.shape, name=step.name, payload=step.payload)
    c.cache_literal(step.cached_literal)
    if c.shape.dims != dims:
        c = b.reshape(c, dims)
    return b.binary("add", value, b.binary("multiply", counter, c))


def _merge_induction_variables(comp, w) -> bool:
    changed = False
    for et in _INDUCTION_TYPES:
        changed |= _merge_induction_variables_of(comp, w, et)
    return changed


def _merge_induction_variables_of(comp, w, et: str) -> bool:
    """XLA's TryMergeInductionVariables for one element type."""
    init, body, cond = w.operands[0], while_body(w), while_cond(w)
    root = body.root
    if init.opcode != "tuple" or root.opcode != "tuple" or root.user_count or \
            not _users_all_gte(w):
        return False
    if not (_param_users_all_gte(body) and _param_users_all_gte(cond)):
        return False
    bparam = body.parameters[0]
    counter = None
    steps: dict[int, Instruction] = {}
    for i, r in enumerate(root.operands):
        c = _induction_step(r, bparam, i, et)
        if c is None:
            continue
        x0 = init.operands[i]
        if counter is None and scalar_value(c) == 1 and x0.opcode == "constant" and \
                x0.shape.is_array() and scalar_value(x0) == 0 and \
                x0.shape.num_elements() == 1:
            counter = i
        else:
            steps[i] = c
    if len(steps) + (counter is not None) < 2:
        return False
    added = counter is None
    old_shape = w.shape
    if added:
        counter = len(old_shape.tuple_shapes)
        shape = Shape.tuple(list(old_shape.tuple_shapes) + [Shape.array(et, ())])
    else:
        shape = old_shape
    # the body and the condition read init + counter * step for each induction variable
    for comp_in in (body, cond):
        param = comp_in.parameters[0]
        param.shape = shape
        _read_through_counter(comp_in, param, counter, steps, skip_unread=True)
    # the body carries the induction variables unchanged (and counts, when added)
    ops = list(root.operands)
    for i in steps:
        ops[i] = add_gte(body, bparam, i)
    if added:
        b = Builder(body)
        g = b.gte(bparam, counter)
        ops.append(b.binary("add", g, b.scalar(1, et)))
    new_root = body.add("tuple", shape, ops, name="tuple")
    body.root = new_root
    remove_dead(body, root, control_successors(body))
    # the loop's users read init + counter * step
    if added:
        new_init = comp.add("tuple", shape, list(init.operands) + [Builder(comp).scalar(0, et)],
                            name="tuple")
        w.replace_operand(0, new_init)
        if not init.user_count and init is not comp.root:
            remove_dead(comp, init, control_successors(comp))
    w.shape = shape
    _read_through_counter(comp, w, counter, steps, skip_unread=False)
    return True


def _read_through_counter(comp: Computation, state: Instruction, counter: int, steps: dict,
                          skip_unread: bool) -> None:
    """Have the readers of each induction variable ``i`` in ``steps`` (get-tuple-elements
    of ``state``, the loop's tuple) read init + counter * step instead (``_reified``);
    ``skip_unread``: leave get-tuple-elements that nothing reads alone."""
    ctr = None
    for g in list(state.users):
        i = g.attr("index")
        if i not in steps or (skip_unread and not g.user_count and g is not comp.root):
            continue
        if ctr is None:
            ctr = add_gte(comp, state, counter)
        users = list(g.users)
        val = _reified(comp, g, ctr, steps[i])
        for u in users:
            u.replace_operand_with(g, val)
        if g is comp.root:
            comp.root = val
