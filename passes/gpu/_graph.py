"""Small graph edits the GPU passes share, all O(1) per edited edge (``Computation``'s own
``remove_instruction`` scans the whole computation for control edges)."""
from __future__ import annotations

import weakref

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction

# computation -> has control edges (recorded when a pass lists the computations it edits)
_CONTROL_EDGES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def has_control_edges(comp: Computation) -> bool:
    return any(i.control_predecessors for i in comp._instructions)


def remove(comp: Computation, inst: Instruction) -> None:
    """Remove an instruction without users (not the root).  In a computation with control
    edges (as recorded by :func:`fusible_computations`) the computation's own removal
    runs, which also drops the instruction from other instructions' control
    predecessors."""
    if inst.user_count:
        raise ValueError(f"cannot remove %{inst.name}: it still has users")
    if inst is comp.root:
        raise ValueError(f"cannot remove the root %{inst.name}")
    if inst.opcode == "parameter":
        raise ValueError("remove parameters with remove_parameter")
    if inst.control_predecessors or _CONTROL_EDGES.get(comp, False):
        comp.remove_instruction(inst)
        return
    inst.detach_operands()
    del comp._instructions[inst]
    if comp.module is not None:
        comp.module.release_name(inst.name)
    inst.parent = None


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
    n = param.parameter_number
    if param.user_count:
        raise ValueError(f"parameter %{param.name} still has users")
    del comp._instructions[param]
    if comp.module is not None:
        comp.module.release_name(param.name)
    param.parent = None
    del comp.parameters[n]
    for k in range(n, len(comp.parameters)):
        comp.parameters[k].payload = str(k)
    return n


def remove_dead_operands(comp: Computation, operands) -> None:
    """Remove operands that lost their last user (recursively, side-effect free ops)."""
    from passes._rewrite import removable
    stack = list(operands)
    while stack:
        x = stack.pop()
        if x.parent is comp and removable(x, set()) and x.user_count == 0:
            ops = list(dict.fromkeys(x.operands))
            remove(comp, x)
            stack.extend(ops)


def add_gte(comp: Computation, tup: Instruction, index: int) -> Instruction:
    return comp.add("get-tuple-element", tup.shape.tuple_shapes[index], [tup],
                    name="get-tuple-element", attrs={"index": str(index)})


_CONTROL_FLOW = frozenset({"while", "conditional"})


def fusible_computations(module) -> list:
    """GetFusibleComputations: computations in post order that are neither fused
    computations nor called by non-control-flow instructions (reduce's to_apply, sort's
    comparator, call, custom-call ...)."""
    order = module.computation_post_order()
    excluded = set()
    for comp in order:
        for inst in comp.instructions:
            if inst.called and inst.opcode not in _CONTROL_FLOW:
                excluded.update(inst.called)
    # computations reachable only through excluded ones are excluded as well
    stack = list(excluded)
    while stack:
        c = stack.pop()
        for inst in c.instructions:
            for callee in inst.called:
                if callee not in excluded:
                    excluded.add(callee)
                    stack.append(callee)
    out = [c for c in order if c not in excluded]
    for c in out:
        _CONTROL_EDGES[c] = has_control_edges(c)
    return out


# ---- adding and dropping computations in O(1) ------------------------------------------
# HloModule keeps a name index of its computations (add / rename are O(1)); removing one
# from the list is O(#computations), so a fusion pass, which drops a computation per
# merge, drops them in one sweep at the end of the edit (computation_batch).

import contextlib  # noqa: E402

from hlo_opt.relaxed_gc import relaxed_gc  # noqa: E402


def add_computation(module, comp) -> None:
    """Append ``comp`` (no instructions yet) to ``module`` under a unique name."""
    module.add_computation(comp)


def drop_computation(module, comp) -> None:
    """Remove ``comp`` from ``module`` (at the end of the current batch, if any)."""
    pending = getattr(module, "_gpu_pending_drop", None)
    for inst in comp._instructions:
        module.release_name(inst.name)
    if pending is not None:
        pending.add(comp)
        comp.module = None
        return
    module.remove_computation(comp)


@contextlib.contextmanager
def computation_batch(module):
    """Within the block, dropped computations leave the module in one sweep at the end
    (and the garbage collector runs less often: see :mod:`._gc`)."""
    outer = getattr(module, "_gpu_pending_drop", None)
    if outer is not None:
        yield
        return
    module._gpu_pending_drop = set()
    try:
        with relaxed_gc():
            yield
    finally:
        dead = module._gpu_pending_drop
        del module._gpu_pending_drop
        module.remove_computations(dead)


def rename_computation(module, comp, stem: str) -> None:
    """Give ``comp`` a unique name: ``stem``, else ``stem.N`` (O(1))."""
    module.rename_computation(comp, stem, unique=True)


def control_tainted(comp) -> set:
    """Instructions with control edges (either end): the fusion passes leave them alone,
    so no control dependency is lost when instructions move into fusions."""
    out = set()
    for inst in comp._instructions:
        if inst.control_predecessors:
            out.add(inst)
            out.update(inst.control_predecessors)
    return out
