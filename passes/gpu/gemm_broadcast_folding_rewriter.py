"""``gemm-broadcast-folding-rewriter``: XLA's GemmBroadcastFoldingRewriter.

A cuBLAS call (``__cublas$gemm`` / ``__cublas$lt$matmul``) whose lhs (else rhs) operand is
a ``broadcast`` that only adds the batch dimensions, in front (every original dimension
lands at an index >= the number of new ones, none on a batch dimension, and as many new
dimensions as batch dimensions), reads the broadcast's operand instead: that side's batch
dimensions are cleared in the ``gemm_backend_config`` and its contracting dimension moves
down by the batch count.  cuBLAS then reuses the one matrix for every batch (a zero batch
stride) instead of reading a materialised copy per batch.
"""
from __future__ import annotations

from ._gemm_common import gemm_config, is_gemm, set_gemm_config
from hlo_opt.rewrite.graph import remove_dead_operands


def fold_broadcast(gemm) -> bool:
    """Fold a broadcast operand 0 (else 1) of ``gemm`` into its batch dimensions."""
    index = 0 if gemm.operands[0].opcode == "broadcast" else 1
    bcast = gemm.operands[index]
    if bcast.opcode != "broadcast":
        return False
    cfg = gemm_config(gemm)
    dnums = cfg.get("dot_dimension_numbers", {})
    side = "rhs" if index == 1 else "lhs"
    batch = [int(d) for d in dnums.get(f"{side}_batch_dimensions", [])]
    contracting = [int(d) for d in dnums.get(f"{side}_contracting_dimensions", [])]
    num_bcast_dims = bcast.shape.rank - bcast.operands[0].shape.rank
    num_batch_dims = len(dnums.get("lhs_batch_dimensions", []))
    for d in bcast.dimensions:
        if d < num_bcast_dims or d in batch:
            return False
    if num_bcast_dims <= 0 or num_bcast_dims != num_batch_dims or len(contracting) != 1:
        return False
    dnums[f"{side}_contracting_dimensions"] = [str(contracting[0] - num_batch_dims)]
    dnums[f"{side}_batch_dimensions"] = []
    set_gemm_config(gemm, cfg)
    gemm.replace_operand(index, bcast.operands[0])
    return True


class GemmBroadcastFoldingRewriter:
    name = "gemm-broadcast-folding-rewriter"

    def run(self, module) -> bool:
        changed = False
        for comp in module.nonfusion_computations(post_order=True):
            for inst in comp.post_order():
                if inst.parent is comp and is_gemm(inst) and len(inst.operands) >= 2:
                    old = list(inst.operands[:2])
                    if fold_broadcast(inst):
                        remove_dead_operands(comp, old)
                        changed = True
        return changed
