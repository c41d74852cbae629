"""``simplify-conditional``: the core of XLA's ConditionalSimplifier.

A conditional whose predicate (or branch index) is a constant, or that has a single
branch, is replaced by the chosen branch inlined on its operand (an out-of-range branch
index selects the last branch, as in XLA).  Conditionals whose branches have side effects
are left alone.  As XLA's, also (for branch computations no other instruction calls):

* a conditional nobody reads: its branches return an empty tuple (dead branch roots go);
* outputs that every branch computes from the same value are merged (MergeDuplicate-
  TupleElements), then outputs no get-tuple-element reads are dropped
  (RemoveUnusedTupleElements);
* elements of a tuple branch operand that its branch never reads are dropped from the
  operand (TryRemoveUnusedConditionalOperands).

A two-way conditional on a ``pred`` that is not constant becomes a ``select`` of both
branches inlined (XLA's TryRemoveConditional): when neither branch holds an expensive
instruction (anything not elementwise, except broadcast, concatenate, dynamic-slice,
get-tuple-element, reduce, reshape, pad, parameter, slice, tuple; constants count as
elementwise) and neither branch is empty (only parameters, tuples and get-tuple-elements
around an array: taking that branch costs nothing, a select would).  Tuple results are
selected element by element, tokens joined with ``after-all``.  A two-way selector
``convert(pred)`` to an integer counts as the ``pred`` with the branches swapped (XLA's
algsimp rewrites the conditional so before its simplifier sees it).
"""
from __future__ import annotations

from hlo_opt.analysis.gpu.fusible import is_elementwise
from hlo_opt.ir.shape import Shape
from hlo_opt.rewrite.builder import Builder
from hlo_opt.rewrite.rules import control_successors, has_opcode, remove_dead
from ._while_util import has_side_effects, inline
from .algsimp.predicates import scalar_value


def chosen_branch(cond):
    """Index of the branch a conditional takes when its selector is constant, else None."""
    n = len(cond.called)
    if n == 1:
        return 0
    sel = cond.operands[0]
    if sel.opcode != "constant" or sel.shape.num_elements() != 1 or sel.literal.elided:
        return None
    v = scalar_value(sel)
    if sel.shape.element_type == "pred":
        return 0 if v else 1  # true_computation, false_computation
    return v if 0 <= v < n else n - 1


class ConditionalSimplifier:
    name = "simplify-conditional"

    def run(self, module) -> bool:
        if not has_opcode(module, ("conditional",)):
            return False
        changed = False
        before = _reachable(module)
        for comp in list(module.computations):
            for c in comp.post_order():
                if c.opcode != "conditional" or c.parent is not comp or c.control_predecessors:
                    continue
                if _own_branches(c, module):
                    changed |= _remove_unused_operands(c)
                    changed |= _merge_duplicate_outputs(c)
                    changed |= _remove_unused_outputs(c)
                    changed |= _empty_roots_if_unused(c)
                k = chosen_branch(c)
                if any(has_side_effects(b) for b in c.called):
                    continue
                if c in control_successors(comp):
                    continue
                if k is not None:
                    new = inline(comp, c.called[k], [c.operands[1 + k]])
                elif _select_is_cheaper(c):
                    new = _as_select(comp, c)
                else:
                    continue
                c.replace_all_uses_with(new)
                remove_dead(comp, c, control_successors(comp))
                changed = True
        if changed:
            after = _reachable(module)
            for comp in list(module.computations):
                if comp in before and comp not in after:
                    module.remove_computation(comp)
        return changed


# ---- conditional -> select ------------------------------------------------------------
_CHEAP = frozenset({"broadcast", "concatenate", "dynamic-slice", "get-tuple-element", "reduce",
                    "reshape", "pad", "parameter", "slice", "tuple", "constant"})


def _expensive(inst) -> bool:
    return inst.opcode not in _CHEAP and not is_elementwise(inst)


def _empty_with_array_root(branch) -> bool:
    """ComputationIsEmptyWithArrayRoot: only parameters, tuples and get-tuple-elements, and
    the root holds an array."""
    if any(i.opcode not in ("tuple", "get-tuple-element", "parameter")
           for i in branch.instructions):
        return False
    return any(s.is_array() for s in branch.root.shape.leaves())


def _predicate(c):
    """(pred, index of the branch taken when true, when false) of a two-way conditional,
    or None."""
    if len(c.called) != 2:
        return None
    sel = c.operands[0]
    if sel.shape.element_type == "pred":
        return sel, 0, 1
    if sel.opcode == "convert" and sel.operands[0].shape.element_type == "pred":
        return sel.operands[0], 1, 0
    return None


def _select_is_cheaper(c) -> bool:
    if _predicate(c) is None:
        return False
    if any(_expensive(i) for b in c.called for i in b.instructions):
        return False
    return not any(_empty_with_array_root(b) for b in c.called)


def _as_select(comp, c):
    """Both branches inlined, their results selected by the predicate."""
    pred, t, f = _predicate(c)
    on_true = inline(comp, c.called[t], [c.operands[1 + t]])
    on_false = inline(comp, c.called[f], [c.operands[1 + f]])
    b = Builder(comp)

    def select(t, f):
        if f.shape.is_token():
            return comp.add("after-all", f.shape, [t, f], name="after-all")
        if f.shape.is_array():
            p = pred if not f.shape.dims else b.broadcast(pred, f.shape.dims, [])
            return comp.add("select", f.shape, [p, t, f], name="select")
        return b.tuple([select(b.gte(t, i), b.gte(f, i))
                        for i in range(len(f.shape.tuple_shapes))])
    return select(on_true, on_false)


def _reachable(module) -> set:
    seen = set()
    stack = [module.entry] if module.entry is not None else []
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        for i in c.instructions:
            stack.extend(i.called)
    return seen


# ---- the structural rewrites (branch computations called by this conditional only) --------
def _own_branches(c, module) -> bool:
    if len(set(c.called)) != len(c.called):
        return False
    for comp in module.computations:
        for inst in comp.iter_instructions():
            if inst is not c and any(b in c.called for b in inst.called):
                return False
    return True


def _set_root(branch, new_root) -> None:
    old = branch.root
    branch.root = new_root
    remove_dead(branch, old, control_successors(branch))


def _empty_roots_if_unused(c) -> bool:
    """ReplaceRootWithEmptyTupleIfNoUsers: nothing reads the conditional's value."""
    if c.user_count or c.is_root or (c.shape.is_tuple() and not c.shape.tuple_shapes):
        return False
    if any(has_side_effects(b) for b in c.called):
        return False  # (the roots' side-effect-free parts only would go; keep it simple)
    empty = Shape.tuple([])
    for b in c.called:
        _set_root(b, b.add("tuple", empty, [], name="tuple"))
    c.shape = empty
    return True


def _gte_users(c):
    users = c.users
    if not c.shape.is_tuple() or not users or c.is_root or \
            any(u.opcode != "get-tuple-element" for u in users):
        return None
    return users


def _remove_unused_outputs(c) -> bool:
    """RemoveUnusedTupleElements: outputs no get-tuple-element reads are dropped."""
    users = _gte_users(c)
    if users is None:
        return False
    n = len(c.shape.tuple_shapes)
    used = sorted({u.attr("index") for u in users})
    if len(used) == n:
        return False
    remap = {old: new for new, old in enumerate(used)}
    new_shape = Shape.tuple([c.shape.tuple_shapes[i] for i in used])
    for b in c.called:
        root = b.root
        bld = Builder(b)
        if root.opcode == "tuple" and root.user_count == 0:
            elems = [root.operands[i] for i in used]
        else:
            elems = [bld.gte(root, i) for i in used]
        _set_root(b, b.add("tuple", new_shape, elems, name="tuple"))
    c.shape = new_shape
    for u in users:
        u.set_attr("index", remap[u.attr("index")])
    return True


def _merge_duplicate_outputs(c) -> bool:
    """MergeDuplicateTupleElements: outputs i < j that every branch computes from the same
    value: the readers of j read i (j is then unused)."""
    users = _gte_users(c)
    if users is None or any(b.root.opcode != "tuple" for b in c.called):
        return False
    n = len(c.shape.tuple_shapes)
    first: dict = {}
    target: dict[int, int] = {}
    for j in range(n):
        key = tuple(id(b.root.operands[j]) for b in c.called)
        if key in first:
            target[j] = first[key]
        else:
            first[key] = j
    moved = False
    for u in users:
        j = u.attr("index")
        if j in target:
            u.set_attr("index", target[j])
            moved = True
    return moved


def _remove_unused_operands(c) -> bool:
    """TryRemoveUnusedConditionalOperands: a branch reading only some elements of its tuple
    parameter gets only those."""
    changed = False
    for k, b in enumerate(c.called):
        param = b.parameters[0] if len(b.parameters) == 1 else None
        if param is None or not param.shape.is_tuple() or param.control_successors:
            continue
        users = param.users
        if any(u.opcode != "get-tuple-element" for u in users) or param is b.root:
            continue
        n = len(param.shape.tuple_shapes)
        used = sorted({u.attr("index") for u in users})
        if len(used) == n:
            continue
        remap = {old: new for new, old in enumerate(used)}
        new_shape = Shape.tuple([param.shape.tuple_shapes[i] for i in used])
        operand = c.operands[1 + k]
        bld = Builder(c.parent)
        if operand.opcode == "tuple":
            elems = [operand.operands[i] for i in used]
        else:
            elems = [bld.gte(operand, i) for i in used]
        c.replace_operand(1 + k, bld.tuple(elems))
        if operand.user_count == 0 and not operand.is_root:
            remove_dead(c.parent, operand, control_successors(c.parent))
        param.shape = new_shape
        for u in users:
            u.set_attr("index", remap[u.attr("index")])
        changed = True
    return changed
