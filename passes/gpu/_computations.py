"""Which computations a GPU pass visits (XLA's HloModule::MakeNonfusionComputations)."""
from __future__ import annotations


def nonfusion_computations(module) -> list:
    """Every computation but the fused ones (those a ``fusion`` calls), in post order."""
    fused = set()
    order = module.computation_post_order()
    for comp in order:
        for inst in comp.iter_instructions():
            if inst.opcode == "fusion":
                fused.update(inst.called)
    return [c for c in order if c not in fused]
