"""``horizontal_input_fusion``: XLA's GpuHorizontalInputFusion.

Sibling reductions that feed the same consumer run as one kernel.  For every instruction
(the *consumer*, in def-use order) of every non-fusion computation:

1. the candidates are the operands' producers (looking through get-tuple-element) that are
   input-fusible reductions (a reduction to or from contiguous dimensions, or a fusion
   whose root has a real reduction hero), not custom fusions, and whose only non-root
   user is the consumer (so merging them can never create a cycle: checked with
   :class:`~hlo_opt.analysis.reachability.Reachability` as well);
2. they are sorted as XLA sorts them: by the rank and dims of the reduction's input shape
   (``GetInputShapeForMultiOutputFusion``), then the fused instruction count, then the
   creation order;
3. with two or more candidates, every plain reduction is wrapped in a ``kInput`` fusion,
   and walking the sorted list each candidate is merged as extra outputs into the current
   *anchor* when their loops are compatible (``ShapesCompatibleForMultiOutputFusion``)
   and the result stays within the budget (shared memory, at most 8 unnested reductions,
   at most 96 operands + outputs: ``FusionFitsInBudget``); otherwise it becomes the new
   anchor.

Operands the merged fusions share are read once (the fused parameters are deduplicated).
"""
from __future__ import annotations

from hlo_opt.analysis.reachability import Reachability

from hlo_opt.analysis.gpu.fusible import (is_consumer_the_only_non_root_user, is_fusion_kind,
                                          is_input_fusible_reduction, real_hero_for_mof,
                                          shapes_compatible_for_mof)
from hlo_opt.analysis.gpu.fusion_facts import fusion_fits_in_budget
from hlo_opt.rewrite.fusion import absorb, create_fusion, set_kind
from hlo_opt.rewrite.graph import computation_batch, control_tainted


def _latest_non_gte_ancestor(inst):
    while inst.opcode == "get-tuple-element":
        inst = inst.operands[0]
    return inst


def _input_shape_key(inst) -> tuple:
    """(rank, dims) of GetInputShapeForMultiOutputFusion: the real hero's first operand
    (an empty shape when the hero has no operands)."""
    hero = real_hero_for_mof(inst)
    if not hero.operands:
        return (0, ())
    shape = hero.operands[0].shape
    dims = tuple(shape.dims) if shape.is_array() else ()
    return (len(dims), dims)


def _instr_count(inst) -> int:
    """GetInstrCountOfFusible."""
    return inst.called[0].instruction_count() if inst.opcode == "fusion" else 1


class _Order:
    """Stand-in for HloInstruction::unique_id: position in the computation, new
    instructions after every existing one in creation order."""

    def __init__(self, comp):
        self.index = {inst: i for i, inst in enumerate(comp.iter_instructions())}
        self.next = len(self.index)

    def __call__(self, inst) -> int:
        i = self.index.get(inst)
        if i is None:
            i = self.index[inst] = self.next
            self.next += 1
        return i


def find_and_sort_candidates(consumer, order: _Order, tainted=frozenset()) -> list:
    """FindAndSortFusionCandidates."""
    seen: dict = {}
    for operand in consumer.operands:
        p = _latest_non_gte_ancestor(operand)
        if p in seen or p in tainted or p.parent is not consumer.parent:
            continue
        if p.opcode == "fusion" and is_fusion_kind(p, "kCustom"):
            continue
        if is_input_fusible_reduction(p) and is_consumer_the_only_non_root_user(p, consumer):
            seen[p] = None
    cands = list(seen)
    cands.sort(key=lambda c: (_input_shape_key(c), _instr_count(c), order(c)))
    return cands


class GpuHorizontalInputFusion:
    name = "horizontal_input_fusion"

    def run(self, module) -> bool:
        with computation_batch(module):
            device = module.config.device
            changed = False
            for comp in module.nonfusion_computations(post_order=True):
                changed |= self._run_on(comp, device)
            return changed

    def _run_on(self, comp, device) -> bool:
        changed = False
        order = _Order(comp)
        tainted = control_tainted(comp)
        reach = None
        # def-use order stays valid: the pass never changes a consumer
        for consumer in comp.post_order():
            if consumer.parent is not comp:
                continue
            cands = find_and_sort_candidates(consumer, order, tainted)
            if len(cands) <= 1:
                continue
            if reach is None:
                reach = Reachability(comp)
            for j, c in enumerate(cands):
                if c.opcode != "fusion":
                    fusion = create_fusion(comp, c, "kInput")
                    order(fusion)
                    reach.forget(c)
                    reach.update(fusion)
                    cands[j] = fusion
                    changed = True
            anchor = cands[0]
            for fused in cands[1:]:
                if shapes_compatible_for_mof(anchor, fused) is None and \
                        fusion_fits_in_budget(anchor, fused, device) is None and \
                        not reach.connected(anchor, fused):
                    was_input = is_fusion_kind(fused, "kInput")
                    absorb(anchor, fused, as_output=True)
                    if was_input:
                        set_kind(anchor, "kInput")
                    reach.forget(fused)
                    reach.update(anchor)
                    changed = True
                else:
                    anchor = fused
        return changed
