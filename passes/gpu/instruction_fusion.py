"""``fusion``: XLA's GpuInstructionFusion (InstructionFusion with the GPU rules).

Producers are fused into consumers, visiting consumers from the root up (reverse post
order) and, for each, its operands nearest first.  A consumer that is not yet a fusion
becomes one (``kInput`` when the consumer or producer is a reduction / tiled transpose /
scatter hero, else ``kLoop``).  A producer with other users is duplicated into the
fusion, unless that duplicates an expensive op (``is_expensive``; GPU f32/f16 divide,
sqrt, rsqrt and exp count as cheap; broadcasts and widening converts are always
duplicable), the pass was made with ``may_duplicate=False``, or the global analysis
(ComputeGloballyUnfusible) forbids it: a producer that reads more than it writes and
is not effectively unary may only be duplicated when it can be fused into every consumer
along every path.

The GPU checks (gpu_fusible.cc): no fusion producers (output fusion is not supported),
no expensive producer into a consumer that reuses its elements, no physically
transposing producer into a reduction, IsProducerConsumerFusible (loop-fusible producer,
reduction epilogues only of bitcast/convert chains, scalar constants only into existing
fusions, scatter and in-place rules), no heavy computation repeated by broadcasts /
gathers / overlapping windows, at most 96 operands + outputs, 8 unnested reductions and
48 KiB of shared memory, and the fusion emitter's code duplication limit.
"""
from __future__ import annotations

from hlo_opt.analysis.reachability import Reachability
from hlo_opt.fuel import consume_fuel

from hlo_opt.analysis.gpu.fusible import (creates_heavy_computation, effectively_at_most_unary,
                                          gpu_is_expensive, is_always_duplicable, is_fusible,
                                          is_physically_transposing, producer_consumer_fusible,
                                          reuses_operand_elements, should_fuse_in_place_op)
from hlo_opt.analysis.gpu.fusion_facts import FusionFacts, fusion_fits_in_budget
from hlo_opt.rewrite.fusion import absorb, create_fusion, set_kind
from hlo_opt.rewrite.graph import computation_batch, control_tainted, fusible_computations, remove
from hlo_opt.analysis.gpu.indexing import IndexingEvaluation

MAX_ALL_PATHS_DEPTH = 200


class FusionRules:
    """The GPU producer/consumer checks shared by ``fusion`` and ``priority-fusion``."""

    # True: any producer is duplicated only when it can be fused into all its users (the
    # global analysis otherwise applies only to producers that read more than they write)
    duplicate_only_into_all_users = False

    def __init__(self, module, may_duplicate: bool = True):
        self.options = module.config.debug_options
        self.device = module.config.device
        self.may_duplicate = may_duplicate
        self.evaluations: dict = {}
        self.info = FusionFacts()
        self.tainted: set = set()  # instructions with control edges (per computation)

    def is_expensive(self, inst) -> bool:
        """The pass's IsExpensive: what may not be duplicated into several consumers."""
        return gpu_is_expensive(inst)

    # InstructionFusion::ShouldFuse
    def base_should_fuse(self, consumer, i) -> str | None:
        producer = consumer.operands[i]
        if producer.is_root:
            return "not fusing into the output of the root instruction"
        would_duplicate = not (producer.user_count == 1 and producer.has_user(consumer))
        if would_duplicate and (not self.may_duplicate or self.is_expensive(producer)) \
                and not is_always_duplicable(producer):
            return ("expensive producer would be duplicated" if self.may_duplicate
                    else "fusion pass cannot duplicate")
        return should_fuse_in_place_op(producer, consumer)

    def inexpensive_checks(self, consumer, i) -> str | None:
        producer = consumer.operands[i]
        if producer.opcode == "fusion":
            return "the producer is a fusion"
        if consumer.opcode == "fusion" and consumer.fusion_kind == "kCustom":
            return "the consumer is a custom fusion"
        if gpu_is_expensive(producer) and reuses_operand_elements(consumer, i):
            return "the producer is expensive, and the consumer reuses inputs"
        if self.info.input_fusible_reduction(consumer) and \
                self.info.memo("transposing", producer, is_physically_transposing):
            return "fusing the producer would break read coalescing"
        reason = producer_consumer_fusible(
            producer, consumer, self.options.xla_gpu_enable_reduction_epilogue_fusion,
            self.info)
        if reason:
            return reason
        if creates_heavy_computation(producer, consumer):
            return "the fusion would create a heavy computation"
        return self.base_should_fuse(consumer, i)

    def should_fuse(self, consumer, i) -> str | None:
        if consumer in self.tainted or consumer.operands[i] in self.tainted:
            return "control dependencies"
        reason = self.inexpensive_checks(consumer, i)
        if reason:
            return reason
        producer = consumer.operands[i]
        reason = fusion_fits_in_budget(consumer, producer, self.device, True, self.info)
        if reason:
            return reason
        if consumer.opcode != "fusion":
            return None
        if self.evaluation(consumer).code_duplication_too_high(producer):
            return "the fusion would result in an overly large code duplication"
        return None

    def evaluation(self, fusion) -> IndexingEvaluation:
        ev = self.evaluations.get(fusion)
        if ev is None:
            ev = self.evaluations[fusion] = IndexingEvaluation(fusion)
        return ev

    def fuse(self, producer, consumer, comp, kind: str | None = None):
        """Fuse ``producer`` into ``consumer`` (wrapping it in a fusion first)."""
        kind = kind or self.info.fusion_kind(producer, consumer)
        if consumer.opcode == "fusion":
            fusion = consumer
            set_kind(fusion, kind)
        else:
            fusion = create_fusion(comp, consumer, kind)
        self.info.invalidate(consumer)
        self.info.invalidate(fusion)
        ev = self.evaluation(fusion)
        users = ev.remove_fusion_operand(producer)
        outs = absorb(fusion, producer)
        ev.update(outs[0], users)
        return fusion


def compute_globally_unfusible(post_order, rules: FusionRules, reach: Reachability) -> set:
    """InstructionFusion::ComputeGloballyUnfusible."""
    do_not_duplicate: set = set()
    cache: dict = {}

    def total_elements(shape) -> int:
        return sum(s.num_elements() for s in shape.leaves() if s.is_array())

    def can_fuse_on_all_paths(producer, consumer, depth: int) -> bool:
        if consumer is producer:
            return True
        if not is_fusible(consumer):
            return False
        key = (producer, consumer)
        if key in cache:
            return cache[key]
        if depth > MAX_ALL_PATHS_DEPTH:
            return False
        result = True
        for i, operand in enumerate(consumer.operands):
            if not reach.reaches(producer, operand):
                continue
            if operand in do_not_duplicate or rules.should_fuse(consumer, i):
                result = False
                break
            if not can_fuse_on_all_paths(producer, operand, depth + 1):
                result = False
                break
        cache[key] = result
        return result

    for producer in reversed(post_order):
        if not rules.duplicate_only_into_all_users:
            if effectively_at_most_unary(producer):
                continue
            operands_size = sum(total_elements(o.shape)
                                for o in dict.fromkeys(producer.operands))
            if operands_size <= total_elements(producer.shape):
                continue
        if is_fusible(producer) and all(can_fuse_on_all_paths(producer, c, 0)
                                        for c in producer.users):
            continue
        do_not_duplicate.add(producer)
    return do_not_duplicate


class GpuInstructionFusion:
    """``may_duplicate=None`` (the default, what ``--passes=fusion`` runs) is XLA's pair
    ``GpuInstructionFusion(may_duplicate=false)`` then ``(may_duplicate=true)``: the first
    fuses single-user producers, the second duplicates cheap producers."""

    name = "fusion"

    def __init__(self, may_duplicate: bool | None = None):
        self.may_duplicate = may_duplicate

    def run(self, module) -> bool:
        with computation_batch(module):
            return self._run(module)

    def _run(self, module) -> bool:
        phases = [False, True] if self.may_duplicate is None else [self.may_duplicate]
        changed = False
        for may_duplicate in phases:
            rules = FusionRules(module, may_duplicate)
            for comp in fusible_computations(module):
                changed |= self._run_on_computation(comp, rules)
        return changed

    def _run_on_computation(self, comp, rules: FusionRules) -> bool:
        rules.tainted = control_tainted(comp)
        post = comp.post_order()
        do_not_duplicate: set = set()
        if rules.may_duplicate:
            do_not_duplicate = compute_globally_unfusible(post, rules, Reachability(comp))
        queue: list = list(post)
        index = {inst: i for i, inst in enumerate(post)}
        changed = False
        while queue:
            inst = queue.pop()
            if inst is None:
                continue
            index.pop(inst, None)
            if inst.parent is not comp:
                continue
            if not is_fusible(inst) and inst.opcode != "fusion":
                continue
            candidates = [i for i, o in enumerate(inst.operands) if o in index]
            candidates.sort(key=lambda i: -index[inst.operands[i]])
            for i in candidates:
                operand = inst.operands[i]
                if not is_fusible(operand):
                    continue
                if operand in do_not_duplicate:
                    continue
                if rules.should_fuse(inst, i):
                    continue
                if not consume_fuel(self.name, lambda: f"fuse %{operand.name} into "
                                                       f"%{inst.name}"):
                    continue  # --xla_fuel spent
                fusion = rules.fuse(operand, inst, comp)
                changed = True
                index[fusion] = len(queue)
                queue.append(fusion)
                if operand.parent is None or operand.user_count == 0:
                    do_not_duplicate.discard(operand)
                    pos = index.pop(operand, None)
                    if pos is not None:
                        queue[pos] = None
                    if operand.parent is comp:
                        remove(comp, operand)
                if fusion is not inst:
                    do_not_duplicate.discard(inst)
                break
        return changed
