"""``sort-iota-fusion``: XLA's SortIotaFusion.

A ``sort`` with ``iota`` operands (argsort, top-k: the indices sorted along the keys) is
wrapped in a ``kCustom`` fusion with its iotas fused in, so the indices are generated
inside the sort kernel instead of being written by a kernel of their own and read back.
Each distinct iota is fused once; an iota other instructions also read stays outside for
them.  The keys and the other operands stay outside (priority fusion does not fuse into a
``kCustom`` fusion).  Runs before priority fusion, as in XLA's fusion pipeline.
"""
from __future__ import annotations

from hlo_opt.rewrite.fusion import absorb, create_fusion
from hlo_opt.rewrite.graph import fusible_computations


class SortIotaFusion:
    name = "sort-iota-fusion"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for sort in comp.post_order():
                if sort.opcode != "sort" or sort.control_predecessors or \
                        sort.control_successors:
                    continue
                iotas = list(dict.fromkeys(o for o in sort.operands if o.opcode == "iota"))
                if not iotas:
                    continue
                fusion = create_fusion(comp, sort, "kCustom")
                for iota in iotas:
                    absorb(fusion, iota)
                changed = True
        return changed
