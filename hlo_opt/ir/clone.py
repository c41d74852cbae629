"""Deep copies of modules and computations (graph copies, no re-parsing)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .computation import Computation
from .instruction import Instruction

if TYPE_CHECKING:  # pragma: no cover - HloModule.clone imports this module
    from .module import HloModule


def clone_computation(comp: Computation, comp_map: dict, name: str | None = None
                      ) -> Computation:
    """Copy ``comp``; called computations are looked up in ``comp_map`` (old -> new)."""
    new = Computation(name or comp.name)
    new.execution_thread = comp.execution_thread
    inst_map: dict[Instruction, Instruction] = {}
    for inst in comp.post_order():
        copy = Instruction(inst.opcode, inst.shape, [inst_map[o] for o in inst.operands],
                           dict(inst.attrs), inst.name, inst.payload,
                           [comp_map.get(c, c) for c in inst.called], inst.called_attr)
        copy._literal = inst._literal
        copy.parent = new
        new._instructions[copy] = None
        inst_map[inst] = copy
    for inst, copy in inst_map.items():
        copy.control_predecessors = [inst_map[p] for p in inst.control_predecessors]
    new.parameters = [inst_map[p] if p is not None else None for p in comp.parameters]
    new.root = inst_map[comp.root] if comp.root is not None else None
    return new


def clone_module(module: HloModule, suffix: str = "") -> HloModule:
    out = type(module)(module.name + (("-" + suffix) if suffix else ""),
                       module.config.copy())
    out.header_attrs = dict(module.header_attrs)
    out.stack_frames = module.stack_frames
    out.filename = module.filename
    comp_map: dict[Computation, Computation] = {}
    for comp in module.computation_post_order():
        comp_map[comp] = clone_computation(comp, comp_map)
    for comp in module.computations:
        new = comp_map[comp]
        new.module = out
        new.is_entry = comp.is_entry
        out.computations.append(new)
        if comp is module.entry:
            out.entry = new
    out._names = set(module._names)
    out._next_suffix = dict(module._next_suffix)
    return out
