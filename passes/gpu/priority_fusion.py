"""``priority-fusion``: XLA's newer, cost-model driven GPU fusion (PriorityFusion).

Every producer gets a priority: the time saved (``time_unfused - time_fused`` of the
performance model) by fusing it into *all* of its users; producers that cannot fuse
into every (non-bitcast) user, or would lose time, are left alone.  The best producer
is fused into each user (producers that are fusions are merged), the priorities of the
new fusion and its operands are recomputed, and so on until no producer gains.
Bitcasts go first (they are free), small constants last (fused into every fusible
user).  Fusion decisions reuse the GPU rules of ``fusion`` (producer/consumer
fusibility, budget, code size), plus: no reduce-into-reduce when both reduce 16+ elements
per output, and no epilogue that would turn a reduction fusion into a loop fusion.

Simplified against XLA: the model is :mod:`hlo_opt.analysis.perf_model` (no tiling
analysis, no Triton), instruction names do not get XLA's ``.0`` suffix, and priorities
are integers of nanoseconds as in XLA.
"""
from __future__ import annotations

import heapq

from hlo_opt.analysis.cost import CostCache
from hlo_opt.analysis.perf_model import estimate_run_times

from ..registry import register
from ._fusible import (FusionInfoCache, can_emit_input_fused_scatter, choose_fusion_kind,
                       fused_instructions, fusion_fits_in_budget, is_elementwise,
                       is_fusible as hlo_is_fusible, is_input_fusible, is_input_fusible_reduction,
                       is_intermediate, should_fuse_in_place_op)
from ._fusion_util import absorb, absorb_consumer, create_fusion, set_kind
from ._graph import computation_batch, control_tainted, fusible_computations, remove
from ._options import device_for, options_for
from .fusion_merger import producer_consumer_merged_too_large

_ELEMENTAL = frozenset({"copy", "iota", "constant", "reduce", "bitcast", "broadcast",
                        "concatenate", "dynamic-slice", "dynamic-update-slice", "gather",
                        "pad", "reduce-window", "reshape", "reverse", "scatter", "slice",
                        "transpose"})
INF = float("inf")


def gpu_fusible(inst) -> bool:
    """priority_fusion.cc's IsFusible: elementwise ops and what the emitters handle."""
    if not hlo_is_fusible(inst):
        return False
    if inst.opcode == "fusion":
        return inst.attrs.get("kind") != "kCustom"
    if is_elementwise(inst):
        return True
    return inst.opcode in _ELEMENTAL


def _significant_reduce(inst) -> bool:
    body = fused_instructions(inst) if inst.opcode == "fusion" else [inst]
    for node in body:
        if node.opcode == "reduce" and node.shape.is_array():
            if node.operands[0].shape.num_elements() // max(node.shape.num_elements(), 1) >= 16:
                return True
    return False


def _all_intermediate(inst) -> bool:
    if inst.opcode != "fusion":
        return is_intermediate(inst)
    return all(is_intermediate(i) for i in fused_instructions(inst))


def _is_small_constant(inst) -> bool:
    return inst.opcode == "constant" and inst.shape.is_array() and inst.shape.num_elements() <= 1


class _Queue:
    def __init__(self, pass_, comp):
        self.p = pass_
        self.comp = comp
        self.heap: list = []
        self.version: dict = {}
        self.counter = 0
        self.can_fuse_cache: dict = {}

    def set_priority(self, inst) -> None:
        prio = self.p.priority(inst, self)
        self.counter += 1
        self.version[inst] = self.counter
        if prio >= 0:
            heapq.heappush(self.heap, (-prio, self.counter, inst))

    def pop(self):
        while self.heap:
            _, version, inst = heapq.heappop(self.heap)
            if self.version.get(inst) == version and inst.parent is self.comp:
                del self.version[inst]
                return inst
        return None

    def remove(self, inst) -> None:
        self.version.pop(inst, None)

    def invalidate(self, inst) -> None:
        self.can_fuse_cache.pop(inst, None)
        for o in inst.operands:
            cached = self.can_fuse_cache.get(o)
            if cached is not None:
                cached.pop(inst, None)


@register
class GpuPriorityFusion:
    name = "priority-fusion"

    def run(self, module) -> bool:
        with computation_batch(module):
            return self._run(module)

    def _run(self, module) -> bool:
        self.options = options_for(module)
        self.device = device_for(module)
        self.info = FusionInfoCache()
        self._gpufus = self.info.table("gpufus")
        self.costs = CostCache()
        self.evaluations: dict = {}
        changed = False
        for comp in fusible_computations(module):
            changed |= self._run_on(comp)
        return changed

    # -- decisions --
    def can_fuse(self, producer, consumer) -> str | None:
        if producer in self.tainted or consumer in self.tainted:
            return "control dependencies"
        gpufus = self._gpufus
        v = gpufus.get(producer)
        if v is None:
            v = gpufus[producer] = gpu_fusible(producer)
        if not v:
            return "the producer is not fusible"
        v = gpufus.get(consumer)
        if v is None:
            v = gpufus[consumer] = gpu_fusible(consumer)
        if not v:
            return "the consumer is not fusible"
        if consumer.opcode == "bitcast":
            return "not fusing into a single bitcast as consumer"
        reason = can_emit_input_fused_scatter(producer, consumer)
        if reason:
            return reason
        memo = self.info.memo
        if memo("sigred", producer, _significant_reduce) and \
                memo("sigred", consumer, _significant_reduce):
            return "both the producer and the consumer contain a reduce"
        if memo("inred", producer, is_input_fusible_reduction) and \
                not memo("infus", consumer, is_input_fusible) and \
                not memo("allint", consumer, _all_intermediate):
            return "fusion into output of a reduce fusion would create a loop fusion"
        reason = fusion_fits_in_budget(consumer, producer, self.device, True, self.info)
        if reason:
            return reason
        if producer_consumer_merged_too_large(producer, consumer, self.evaluations,
                                              self.info):
            return "the fusion would result in an overly large code duplication"
        if producer.is_root:
            return "not fusing into the output of the root instruction"
        return should_fuse_in_place_op(producer, consumer)

    def can_fuse_cached(self, producer, consumer, queue: _Queue) -> str | None:
        cache = queue.can_fuse_cache.get(producer)
        if cache is None:
            cache = queue.can_fuse_cache[producer] = {}
        elif consumer in cache:
            return cache[consumer]
        reason = cache[consumer] = self.can_fuse(producer, consumer)
        return reason

    def priority(self, producer, queue: _Queue) -> float:
        if producer.opcode == "bitcast":
            return INF
        if producer.opcode == "constant":
            return -INF
        users = producer.users
        if not users:
            return -INF
        any_non_bitcast = False
        for u in users:
            if u.opcode != "bitcast":
                any_non_bitcast = True
                if self.can_fuse_cached(producer, u, queue):
                    return -INF
        if not any_non_bitcast:
            return -INF
        unfused, fused = estimate_run_times(producer, users, device=self.device,
                                            cache=self.costs)
        return round((unfused - fused) * 1e9)

    # -- the loop --
    def _run_on(self, comp) -> bool:
        self.tainted = control_tainted(comp)
        queue = _Queue(self, comp)
        for inst in comp.post_order():
            if inst.opcode in ("parameter", "tuple", "get-tuple-element") or \
                    inst.user_count == 0 or not hlo_is_fusible(inst):
                continue
            queue.set_priority(inst)
        changed = False
        while True:
            producer = queue.pop()
            if producer is None:
                break
            consumers = list(producer.users)
            if producer.opcode == "bitcast":
                consumers = [c for c in consumers if not self.can_fuse_cached(producer, c, queue)]
            if not consumers:
                continue
            # Insertion-ordered (a dict), not a set: the order of the priority updates
            # below breaks ties between equal priorities, so it must not depend on where
            # the instructions happen to live in memory.
            to_update: dict = {}
            fused_now = set()
            for consumer in consumers:
                if consumer.opcode == "bitcast" or consumer.parent is not comp:
                    continue
                queue.invalidate(producer)
                queue.invalidate(consumer)
                for x in (producer, consumer):
                    self.costs.invalidate(x)
                    self.evaluations.pop(x, None)
                    self.info.invalidate(x)
                fusion = self._fuse(producer, consumer, comp)
                self.costs.invalidate(fusion)
                self.evaluations.pop(fusion, None)
                if fusion is not consumer:
                    queue.remove(consumer)
                    to_update.pop(consumer, None)
                changed = True
                for o in fusion.operands:
                    # XLA skips broadcasts (and the operands of a fused broadcast) here:
                    # a CSE'd broadcast feeds many fusions, and re-pricing it after every
                    # one of them is quadratic; it is priced once and fused at its turn.
                    if o is producer or producer.opcode == "broadcast" or o.opcode in (
                            "broadcast", "constant", "get-tuple-element"):
                        continue
                    if hlo_is_fusible(o):
                        to_update[o] = None
                to_update[fusion] = None
                fused_now.add(fusion)
            if producer.parent is comp and producer.user_count == 0 and not producer.is_root:
                queue.remove(producer)
                to_update.pop(producer, None)
                self._remove(comp, producer)
            for inst in to_update:
                if inst.parent is comp:
                    # The memoized facts of an instruction are functions of the instruction
                    # itself (its body, shapes, operand count), not of its users, so only
                    # the fusions changed here lose theirs; an rng's fusibility depends on
                    # its user count, so it is asked again.
                    if inst in fused_now or inst.opcode == "rng":
                        self.info.invalidate(inst)
                    queue.invalidate(inst)
                    queue.set_priority(inst)
        # finally, small constants go into every fusible user
        for constant in [i for i in comp.instructions if _is_small_constant(i)]:
            if constant in self.tainted:
                continue
            for user in list(constant.users):
                if user not in self.tainted and gpu_fusible(user) and not can_emit_input_fused_scatter(constant, user) and \
                        user.parent is comp:
                    self._fuse(constant, user, comp)
                    changed = True
            if constant.parent is comp and constant.user_count == 0 and not constant.is_root:
                remove(comp, constant)
        return changed

    def _fuse(self, producer, consumer, comp):
        kind = choose_fusion_kind(producer, consumer)
        if producer.opcode == "fusion" and consumer.opcode != "fusion" and \
                producer.user_count == 1 and producer.called[0].root.opcode != "tuple":
            # grow the producer's fusion downwards: same result, linear cost
            set_kind(producer, kind)
            return absorb_consumer(producer, consumer)
        if consumer.opcode == "fusion":
            fusion = consumer
            if kind == "kInput":
                set_kind(fusion, kind)
        else:
            fusion = create_fusion(comp, consumer, kind)
        absorb(fusion, producer)
        return fusion

    def _remove(self, comp, inst) -> None:
        if inst.opcode == "fusion":
            from ._fusion_util import remove_fusion
            remove_fusion(comp, inst)
        else:
            remove(comp, inst)
