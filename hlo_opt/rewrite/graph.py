"""Small graph edits the passes share, all O(1) per edited edge."""
from __future__ import annotations

import re

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction


def has_control_edges(comp: Computation) -> bool:
    return any(i.control_predecessors for i in comp.instructions)


def remove(comp: Computation, inst: Instruction) -> None:
    """Remove an instruction without users (not the root, not a parameter); its control
    edges go with it (``Computation.remove_instruction``)."""
    if inst.user_count:
        raise ValueError(f"cannot remove %{inst.name}: it still has users")
    if inst is comp.root:
        raise ValueError(f"cannot remove the root %{inst.name}")
    if inst.opcode == "parameter":
        raise ValueError("remove parameters with remove_parameter")
    comp.remove_instruction(inst)


def replace_uses(old: Instruction, new: Instruction) -> None:
    """Every use of ``old`` (and the root slot) now reads ``new``."""
    old.replace_all_uses_with(new)


def replace_and_remove(comp: Computation, old: Instruction, new: Instruction) -> None:
    if new.parent is None:
        comp.add_instruction(new)
    old.replace_all_uses_with(new)
    if old.user_count == 0 and old is not comp.root and old.opcode != "parameter":
        remove(comp, old)


def remove_parameter(comp: Computation, param: Instruction) -> int:
    """Remove an unused parameter and renumber the later ones; returns its old number."""
    return comp.remove_parameter(param)


def remove_dead_operands(comp: Computation, operands) -> None:
    """Remove operands that lost their last user (recursively, side-effect free ops)."""
    from hlo_opt.rewrite.dead import removable
    stack = list(operands)
    while stack:
        x = stack.pop()
        if x.parent is comp and removable(x, set()) and x.user_count == 0:
            ops = list(dict.fromkeys(x.operands))
            remove(comp, x)
            stack.extend(ops)


def replace_and_remove_dead(comp: Computation, old: Instruction, new: Instruction) -> None:
    """Every use of ``old`` (and the root slot) reads ``new``; ``old`` and the operands
    that lost their last user with it are removed."""
    was_root = old.is_root
    operands = list(old.operands)
    old.replace_all_uses_with(new)
    if was_root:
        comp.root = new
    remove_dead_operands(comp, [old])
    remove_dead_operands(comp, operands)


def post_order_from(root: Instruction, inside) -> list[Instruction]:
    """The instructions ``inside(x)`` reaches from ``root`` through operands (``root``
    first checked too), each once, operands before users."""
    seen: set = set()
    order: list[Instruction] = []
    stack = [(root, False)]
    while stack:
        x, done = stack.pop()
        if done:
            order.append(x)
            continue
        if x in seen or not inside(x):
            continue
        seen.add(x)
        stack.append((x, True))
        for o in reversed(x.operands):
            stack.append((o, False))
    return order


def add_gte(comp: Computation, tup: Instruction, index: int) -> Instruction:
    return comp.add("get-tuple-element", tup.shape.tuple_shapes[index], [tup],
                    name="get-tuple-element", attrs={"index": str(index)})


_CONTROL_FLOW = frozenset({"while", "conditional"})
# XLA's kXlaStreamAnnotationAttr: a call whose computation runs on a stream of its own
_STREAM_ANNOTATION = re.compile(r"[{,\s]_xla_stream_annotation\s*=")


def is_stream_annotated_call(inst) -> bool:
    """XLA's IsStreamAnnotatedComputation: a ``call`` with the ``_xla_stream_annotation``
    frontend attribute (its computation is fused like the entry's)."""
    return inst.opcode == "call" and \
        _STREAM_ANNOTATION.search(inst.attrs.get("frontend_attributes", "")) is not None


def fusible_computations(module) -> list:
    """GetFusibleComputations: computations in post order that are neither fused
    computations nor called by non-control-flow instructions (reduce's to_apply, sort's
    comparator, call, custom-call ...); a stream-annotated call's computation is fusible.

    One walk over the instructions finds each computation's callees and the excluded
    ones; the post order is HloModule.computation_post_order's, from
    those callees."""
    comps = module.computations
    callees: dict = {}
    excluded: set = set()
    for comp in comps:
        mine: dict = {}
        for inst in comp.instructions:
            called = inst.called
            if called:
                for c in called:
                    mine[c] = None
                if inst.opcode not in _CONTROL_FLOW and not is_stream_annotated_call(inst):
                    excluded.update(called)
        callees[comp] = mine
    order = module.computation_post_order(comps, callees)
    # computations reachable only through excluded ones are excluded as well
    stack = list(excluded)
    while stack:
        c = stack.pop()
        mine = callees.get(c)
        if mine is None:  # not one of the module's (its own callees, as they are)
            mine = c.called_computations()
        for callee in mine:
            if callee not in excluded:
                excluded.add(callee)
                stack.append(callee)
    return [c for c in order if c not in excluded]


# ---- adding and dropping computations in O(1) ------------------------------------------
# HloModule keeps a name index of its computations (add / rename are O(1)); removing one
# from the list is O(#computations), so a fusion pass, which drops a computation per
# merge, drops them in one sweep at the end of the edit (computation_batch).

import contextlib  # noqa: E402
import gc  # noqa: E402


def add_computation(module, comp) -> None:
    """Append ``comp`` (no instructions yet) to ``module`` under a unique name."""
    module.add_computation(comp)


def drop_computation(module, comp) -> None:
    """Remove ``comp`` from ``module`` (at the end of the current batch, if any)."""
    module.drop_computation(comp)


@contextlib.contextmanager
def computation_batch(module):
    """Within the block, dropped computations leave the module in one sweep at the end
    (``HloModule.computation_batch``), and the cyclic garbage collector waits
    (:func:`paused_gc`)."""
    if module.in_computation_batch:
        yield
        return
    with module.computation_batch(), paused_gc():
        yield


@contextlib.contextmanager
def paused_gc():
    """No cyclic garbage collection within the block; it resumes (as it was) after.

    A fusion pass allocates many long-lived objects (fusions, fused computations and
    their instructions) and frees few cycles (the fusions and computations it drops):
    every collection in between would only traverse the module again, and a full one
    the whole heap, which makes such a pass grow faster than the module (at 30k
    instructions a tenth of the fusion passes' time, even with :func:`relaxed_gc`'s
    rarer collections).  What the pass leaves behind is collected by the next
    collection after it, as usual; the peak memory of the ``gpu`` pipeline on a 30k
    module is the same either way."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            # What the pass made goes to the oldest generation untraversed (freeze then
            # unfreeze: nothing stays frozen), so the collection that would otherwise
            # come right after does not walk all of it at once.
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def rename_computation(module, comp, stem: str) -> None:
    """Give ``comp`` a unique name: ``stem``, else ``stem.N`` (O(1))."""
    module.rename_computation(comp, stem, unique=True)


def control_tainted(comp) -> set:
    """Instructions with control edges (either end): the fusion passes leave them alone,
    so no control dependency is lost when instructions move into fusions."""
    out = set()
    for inst in comp.iter_instructions():
        if inst.control_predecessors:
            out.add(inst)
            out.update(inst.control_predecessors)
    return out
