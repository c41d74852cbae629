"""Which computations a GPU pass visits (XLA's HloModule::MakeNonfusionComputations)."""
from __future__ import annotations


def nonfusion_computations(module) -> list:
    """Every computation but the fused ones (those a ``fusion`` calls), in post order."""
    return module.nonfusion_computations(post_order=True)
