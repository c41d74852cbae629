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

from hlo_opt.analysis.gpu.fusible import (FusionInfoCache, choose_fusion_kind, fused_instructions,
                                          fusion_fits_in_budget, heroes_compatible,
                                          is_input_fusible_reduction, is_loop_fusion,
                                          is_physically_transposing, producer_consumer_fusible,
                                          real_hero_for_mof)
from hlo_opt.rewrite.fusion import absorb, create_fusion
from hlo_opt.rewrite.graph import computation_batch, control_tainted, fusible_computations
from hlo_opt.analysis.gpu.indexing import IndexingEvaluation

MAX_IR_SIZE = 10_000
MAX_BASIC_BLOCK_SPLITS_PER_FUSION = 10
_SPLITTING = frozenset({"reduce", "reduce-window", "concatenate", "scatter", "sort",
                        "select-and-scatter"})


def _ir_size(inst) -> int:
    if inst.opcode != "fusion":
        return 1
    n = 0
    for i in inst.called[0].iter_instructions():
        if i.opcode != "parameter":
            n += 1
    return n


def _splits(inst) -> int:
    if inst.opcode != "fusion":
        return 1 if inst.opcode in _SPLITTING else 0
    n = 0
    for i in inst.called[0].iter_instructions():
        if i.opcode in _SPLITTING:
            n += 1
    return n


def producer_consumer_merged_too_large(producer, consumer, evaluations: dict | None = None,
                                       info=None) -> bool:
    """GpuHloCostAnalysis::ProducerConsumerMergedTooLarge: the producer is emitted once
    per index it is read at in the consumer.  ``evaluations`` caches the consumer's
    indexing evaluation (the caller drops entries of fusions it changes)."""
    replication = 1
    if consumer.opcode == "fusion" and producer in consumer.operands:
        ev = evaluations.get(consumer) if evaluations is not None else None
        if ev is None:
            ev = IndexingEvaluation(consumer)
            if evaluations is not None:
                evaluations[consumer] = ev
        replication = max(ev.emitted(producer), 1)
    if info is not None:
        memo = info.memo
        n_splits = replication * memo("splits", producer, _splits) + \
            memo("splits", consumer, _splits)
        if n_splits > MAX_BASIC_BLOCK_SPLITS_PER_FUSION:
            return True
        merged = (memo("irsize", producer, _ir_size) * replication +
                  memo("irsize", consumer, _ir_size)) * (1 << n_splits)
        return merged > MAX_IR_SIZE
    n_splits = replication * _splits(producer) + _splits(consumer)
    if n_splits > MAX_BASIC_BLOCK_SPLITS_PER_FUSION:
        return True
    merged = (_ir_size(producer) * replication + _ir_size(consumer)) * (1 << n_splits)
    return merged > MAX_IR_SIZE


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
            info = FusionInfoCache()
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

    def should_fuse(self, producer, info: FusionInfoCache) -> str | None:
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
            if user.opcode == "fusion" and user.attrs.get("kind") == "kCustom":
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
            if info.memo("input_reduction", user, is_input_fusible_reduction):
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

    def _fuse_into_all_users(self, comp, producer, info: FusionInfoCache) -> None:
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
