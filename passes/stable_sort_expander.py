"""StableSortExpander (``stable-sort-expander``), as
``xla/hlo/transforms/expanders/stable_sort_expander.cc``.

A ``sort`` with ``is_stable=true`` gets a comparator that breaks ties by position, so any
sort algorithm gives the stable order: an ``s32`` iota operand along the sort dimension is
reused when the sort already has one, else appended (the sort's users then read the old
results back through get-tuple-element/tuple).  The comparator becomes::

    select(cmp(lhs..., rhs...) == cmp(rhs..., lhs...),   // neither orders first: a tie
           iota_lhs < iota_rhs,                           // keep the input order
           cmp(lhs..., rhs...))

built by cloning the comparator's instructions with each lhs/rhs parameter pair swapped.
Like XLA, the sort keeps ``is_stable=true``.  Two deviations, both to keep meaning: the
change is reported also when only the comparator was rewritten (XLA's expander returns
no replacement then), and a comparator other callers share is cloned before the edit
instead of being edited in place.  Fusion computations are not visited.
"""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.builder import Builder
from ._expander_util import non_fusion_computations, replace_instruction

_INT32_MAX = (1 << 31) - 1


def clone_comparator(module, comp: Computation, extra_params: int = 0) -> Computation:
    """``CloneWithReplacements``: a copy of ``comp`` (named ``<name>.clone``) with
    ``extra_params`` pairs of s32 parameters ``p.N.lhs``/``p.N.rhs`` appended."""
    new = Computation(comp.name + ".clone")
    mapping: dict = {}
    for inst in comp.post_order():
        copy = Instruction(inst.opcode, inst.shape, [mapping[o] for o in inst.operands],
                           dict(inst.attrs), inst.name, inst.payload, inst.called,
                           inst.called_attr)
        copy.cache_literal(inst.cached_literal)
        new.add_instruction(copy)
        mapping[inst] = copy
    for inst, copy in mapping.items():
        copy.control_predecessors = [mapping[p] for p in inst.control_predecessors]
    new.root = mapping[comp.root]
    n = len(comp.parameters) // 2
    s32 = Shape.array("s32", ())
    for _ in range(extra_params):
        new.add_parameter(s32, f"p.{n}.lhs")
        new.add_parameter(s32, f"p.{n}.rhs")
        n += 1
    module.add_computation(new)
    return new


def add_tie_breaker(comp: Computation, iota_index: int) -> None:
    """Make ``comp`` break ties with parameters ``2*iota_index`` and ``2*iota_index+1``."""
    params = comp.parameters
    old_root = comp.root
    swapped = {p: params[i ^ 1] for i, p in enumerate(params)}
    cloned_root = None
    for inst in comp.post_order():
        if not inst.operands:
            continue
        copy = Instruction(inst.opcode, inst.shape,
                           [swapped.get(o, o) for o in inst.operands],
                           {k: v for k, v in inst.attrs.items()
                            if k != "control-predecessors"},
                           inst.opcode, inst.payload, inst.called, inst.called_attr)
        copy.cache_literal(inst.cached_literal)
        comp.add_instruction(copy)
        swapped[inst] = copy
        if inst is old_root:
            cloned_root = copy
    b = Builder(comp)
    same = b.compare(old_root, cloned_root, "EQ")
    tie = b.compare(params[2 * iota_index], params[2 * iota_index + 1], "LT")
    comp.root = b.select(same, tie, old_root)


def _existing_iota(sort, dim: int) -> int:
    for i, op in enumerate(sort.operands):
        if op.opcode == "iota" and op.attr("iota_dimension") == dim \
                and op.shape.element_type == "s32":
            return i
    return -1


def expand_sort(comp: Computation, sort, callers: dict) -> bool:
    module = comp.module
    dim = sort.dimensions[0]
    iota_index = _existing_iota(sort, dim)
    b = Builder(comp)
    if iota_index == -1:
        iota_shape = sort.operands[0].shape.with_element_type("s32")
        if iota_shape.dims[dim] > _INT32_MAX:
            return False  # XLA: Unimplemented
        iota = b._add("iota", iota_shape.without_layout(),
                      attrs={"iota_dimension": str(dim)})
        comparator = clone_comparator(module, sort.to_apply, extra_params=1)
        n = len(sort.operands)
        shapes = [sort.shape] if n == 1 else list(sort.shape.tuple_shapes)
        new_sort = b.clone(sort, list(sort.operands) + [iota],
                           Shape.tuple(shapes + [iota.shape]))
        new_sort.called = [comparator]
        elements = [b.gte(new_sort, i) for i in range(n)]
        for e, op in zip(elements, sort.operands):
            e.shape = op.shape
        expanded = elements[0] if n == 1 else b.tuple(elements)
        replace_instruction(comp, sort, expanded)
        iota_index = n
        sort = new_sort
    elif len(callers.get(sort.to_apply, ())) > 1:
        sort.called = [clone_comparator(module, sort.to_apply)]
    add_tie_breaker(sort.to_apply, iota_index)
    return True


def run_stable_sort_expander(module) -> bool:
    changed = False
    callers = module.callers()
    for comp in non_fusion_computations(module):
        matches = [i for i in comp.post_order()
                   if i.opcode == "sort" and i.attr("is_stable", False)]
        for sort in matches:
            changed |= expand_sort(comp, sort, callers)
    return changed


class StableSortExpander:
    name = "stable-sort-expander"

    def run(self, module) -> bool:
        return run_stable_sort_expander(module)
