"""``fusion_merger``: XLA's FusionMerger.

Each loop fusion is merged into *all* of its users (wrapping users that are not fusions
yet) when it can be fused into every one of them and the cost model says the merged
kernels run faster than the producer kernel plus its consumers: fewer launches and no
round trip of the producer's result through memory, against re-computing the producer
in every consumer.  Refused: input fusions (reductions, transposes, scatters), bitcast
users, producers that mostly transpose data feeding a reduction, fusions over budget,
merges whose emitted code would be too large.
"""
from __future__ import annotations

from hlo_opt.analysis.cost import CostCache
from hlo_opt.analysis.perf_model import estimate_run_times
from hlo_opt.fuel import consume_fuel

from hlo_opt.analysis.gpu.fusible import (choose_fusion_kind, fused_instructions,
                                          heroes_compatible, is_loop_fusion,
                                          is_physically_transposing, producer_consumer_fusible,
                                          real_hero_for_mof)
from hlo_opt.analysis.gpu.fusion_facts import (FusionFacts, fusion_fits_in_budget,
                                               producer_consumer_merged_too_large)
from hlo_opt.rewrite.fusion import absorb, create_fusion
from hlo_opt.rewrite.graph import computation_batch, control_tainted, fusible_computations


def transposes_most_data(fusion) -> bool:
    score = 0.0
    total = max(sum(s.num_elements() for s in fusion.shape.leaves() if s.is_array()), 1)
    for inst in fused_instructions(fusion):
        if is_physically_transposing(inst):
            score += sum(s.num_elements() for s in inst.shape.leaves() if s.is_array()) / total
            if score >= 0.5:
                return True
    return False


class FusionMerger:
    name = "fusion_merger"

    def run(self, module) -> bool:
        with computation_batch(module):
            return self._run(module)

    def _run(self, module) -> bool:
        self.options = module.config.debug_options
        self.device = module.config.device
        changed = False
        self.costs = CostCache()
        for comp in fusible_computations(module):
            info = FusionFacts()
            tainted = control_tainted(comp)
            for producer in comp.post_order():
                if producer.parent is not comp or producer.opcode != "fusion":
                    continue
                if producer in tainted or any(u in tainted for u in producer.users):
                    continue
                if self.should_fuse(producer, info) is None and consume_fuel(
                        self.name, lambda: f"merge %{producer.name} into its users"):
                    self._fuse_into_all_users(comp, producer, info)
                    changed = True
        return changed

    def should_fuse(self, producer, info: FusionFacts) -> str | None:
        users = producer.users
        if not users:
            return "fusion has no users"
        if not is_loop_fusion(producer):
            return "not a loop fusion"
        has_reduction_user = False
        producer_hero = info.memo("mof_hero", producer, real_hero_for_mof)
        for user in users:
            if user.opcode == "bitcast":
                return "not fusing bitcast ops"
            if user.opcode == "fusion" and user.fusion_kind == "kCustom":
                return "not fusing custom fusions"
            reason = heroes_compatible(producer_hero,
                                       info.memo("mof_hero", user, real_hero_for_mof),
                                       producer, user)
            if reason:
                return reason
            reason = producer_consumer_fusible(
                producer, user, self.options.xla_gpu_enable_reduction_epilogue_fusion, info)
            if reason:
                return reason
            if info.input_fusible_reduction(user):
                has_reduction_user = True
        if has_reduction_user and transposes_most_data(producer):
            return "would read mostly uncoalesced"
        for user in users:
            reason = fusion_fits_in_budget(user, producer, self.device, True, info)
            if reason:
                return reason
        for user in users:
            if producer_consumer_merged_too_large(producer, user, None, info):
                return f"if merged with {user.name} will generate huge IR"
        unfused, fused = estimate_run_times(producer, users, device=self.device,
                                            cache=self.costs)
        if fused > unfused:
            return "will execute slower if fused"
        return None

    def _fuse_into_all_users(self, comp, producer, info: FusionFacts) -> None:
        for user in list(producer.users):
            consumer = user
            if consumer.opcode != "fusion":
                consumer = create_fusion(comp, user, choose_fusion_kind(producer, user))
            absorb(consumer, producer)
            for x in (user, consumer):
                info.invalidate(x)
                self.costs.invalidate(x)
        info.invalidate(producer)
        self.costs.invalidate(producer)
