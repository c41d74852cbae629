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

Cost, as XLA's: priorities live in a heap and only the neighbourhood of a fusion (the new
fusion and its operands) is priced again.  What pricing asks is memoized per instruction
and dropped when the instruction changes: the fusibility facts
(:class:`~hlo_opt.analysis.gpu.fusion_facts.FusionFacts`, a fusion's found in one walk over
its body), the cost model's entries
(:class:`~hlo_opt.analysis.cost.CostCache`), can-fuse answers, and each consumer's
indexing evaluation, which grows with the fusion instead of being rebuilt
(:meth:`~._indexing.IndexingEvaluation.absorbed`).  A producer that dies with the fusion
moves into it instead of being copied.  tests/passes/gpu/test_fusion_incremental.py
checks all of this against recomputing from scratch.
"""
from __future__ import annotations

import heapq

from hlo_opt.analysis.cost import CostCache
from hlo_opt.analysis.perf_model import estimate_run_times
from hlo_opt.fuel import consume_fuel

from hlo_opt.analysis.gpu.fusible import (can_emit_input_fused_scatter, choose_fusion_kind,
                                          is_fusible as hlo_is_fusible, is_input_fusible,
                                          is_input_fusible_reduction, in_place_operands,
                                          should_fuse_in_place_op, uses_concatenate_emitter)
from hlo_opt.analysis.gpu.fusion_facts import (FusionFacts, all_intermediate,
                                               fusion_fits_in_budget_facts, gpu_fusible,
                                               merged_too_large_facts, significant_reduce)
from hlo_opt.rewrite.fusion import absorb, absorb_consumer, create_fusion, set_kind
from hlo_opt.rewrite.graph import computation_batch, control_tainted, fusible_computations, remove

INF = float("inf")
_MISSING = object()
# operands of a new fusion whose priority is not recomputed (see the loop)
_NOT_REPRICED = frozenset({"broadcast", "constant", "get-tuple-element"})


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


class GpuPriorityFusion:
    name = "priority-fusion"

    def run(self, module) -> bool:
        with computation_batch(module):
            return self._run(module)

    def _run(self, module) -> bool:
        self.options = module.config.debug_options
        self.device = module.config.device
        self.facts = FusionFacts()
        self.costs = CostCache()
        self.evaluations: dict = {}
        changed = False
        for comp in fusible_computations(module):
            changed |= self._run_on(comp)
        return changed

    # -- decisions --
    def can_fuse(self, producer, consumer) -> str | None:
        """The fusion decision (None: fuse): priority_fusion.cc's rules, then the budget
        rules every fusion pass shares (:mod:`~hlo_opt.analysis.gpu.fusion_facts`).  The
        per-instruction facts it asks are memoized in ``self.facts`` (dropped when an
        instruction changes); this runs for every candidate pair, so it reads their
        records directly."""
        tainted = self.tainted
        if tainted and (producer in tainted or consumer in tainted):
            return "control dependencies"
        facts = self.facts
        records = facts.records
        pop = producer.opcode
        cop = consumer.opcode
        pf = records.get(producer)
        if pf is None:
            pf = facts.record(producer)
        v = pf.fusible
        if v is None:
            v = pf.fusible = gpu_fusible(producer)
        if not v:
            return "the producer is not fusible"
        cf = records.get(consumer)
        if cf is None:
            cf = facts.record(consumer)
        v = cf.fusible
        if v is None:
            v = cf.fusible = gpu_fusible(consumer)
        if not v:
            return "the consumer is not fusible"
        if cop == "bitcast":
            return "not fusing into a single bitcast as consumer"
        # can_emit_input_fused_scatter: nothing to object to unless one of them is an
        # input-fusible scatter
        if pop == "scatter" or cop == "scatter" or (pop == "fusion" and pf.inscatter) or (
                cop == "fusion" and cf.inscatter):
            reason = can_emit_input_fused_scatter(producer, consumer)
            if reason:
                return reason
        v = pf.sigred
        if v is None:
            v = pf.sigred = significant_reduce(producer)
        if v:
            v = cf.sigred
            if v is None:
                v = cf.sigred = significant_reduce(consumer)
            if v:
                return "both the producer and the consumer contain a reduce"
        v = pf.inred
        if v is None:
            v = pf.inred = is_input_fusible_reduction(producer)
        if v:
            v = cf.infus
            if v is None:
                v = cf.infus = is_input_fusible(consumer)
            if not v:
                v = cf.allint
                if v is None:
                    v = cf.allint = all_intermediate(consumer)
                if not v:
                    return "fusion into output of a reduce fusion would create a loop fusion"
        reason = fusion_fits_in_budget_facts(consumer, cf, producer, pf, self.device, True)
        if reason:
            return reason
        if merged_too_large_facts(producer, pf, consumer, cf, self.evaluations):
            return "the fusion would result in an overly large code duplication"
        parent = producer.parent
        if parent is not None and parent.root is producer:  # producer.is_root
            return "not fusing into the output of the root instruction"
        if cop == "fusion":
            v = cf.inplace
            if v is None:
                v = cf.inplace = bool(in_place_operands(consumer))
            if v:
                return should_fuse_in_place_op(producer, consumer)
        elif cop == "dynamic-update-slice" or cop == "scatter":
            return should_fuse_in_place_op(producer, consumer)
        return None

    def can_fuse_cached(self, producer, consumer, queue: _Queue) -> str | None:
        cache = queue.can_fuse_cache.get(producer)
        if cache is None:
            cache = queue.can_fuse_cache[producer] = {}
        else:
            reason = cache.get(consumer, _MISSING)
            if reason is not _MISSING:
                return reason
        reason = cache[consumer] = self.can_fuse(producer, consumer)
        return reason

    def priority(self, producer, queue: _Queue) -> float:
        op = producer.opcode
        if op == "bitcast":
            return INF
        if op == "constant":
            return -INF
        users = producer.users_view  # (read only here: iterating it directly is safe)
        if not users:
            return -INF
        any_non_bitcast = False
        can_fuse_cached = self.can_fuse_cached
        for u in users:
            if u.opcode != "bitcast":
                any_non_bitcast = True
                if can_fuse_cached(producer, u, queue):
                    return -INF
        if not any_non_bitcast:
            return -INF
        unfused, fused = estimate_run_times(producer, users, device=self.device,
                                            cache=self.costs)
        return round((unfused - fused) * 1e9)

    def _kind(self, producer, consumer) -> str:
        """choose_fusion_kind(producer, consumer) from the memoized facts."""
        return self.facts.fusion_kind(producer, consumer)

    # -- the loop --
    def _run_on(self, comp) -> bool:
        self.tainted = control_tainted(comp)
        # the fusions holding a concatenate (only those can take the concatenate
        # emitter's kind: kept as fusions grow, so _fuse never walks a body for it)
        self.with_concatenate = {
            i for i in comp.instructions if i.opcode == "fusion" and
            any(x.opcode == "concatenate" for x in i.called[0].instructions)}
        queue = _Queue(self, comp)
        for inst in comp.post_order():
            if inst.opcode in ("parameter", "tuple", "get-tuple-element") or \
                    inst.user_count == 0 or not hlo_is_fusible(inst):
                continue
            queue.set_priority(inst)
        changed = False
        evaluations = self.evaluations
        cost_entries = self.costs.entries
        facts = self.facts
        self._kept_evaluation = None
        while True:
            producer = queue.pop()
            if producer is None:
                break
            consumers = producer.users
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
                if not consume_fuel(self.name, lambda: f"fuse %{producer.name} into "
                                                       f"%{consumer.name}"):
                    continue  # --xla_fuel spent: this fusion is not made
                queue.invalidate(producer)
                queue.invalidate(consumer)
                cost_entries.pop(producer, None)
                cost_entries.pop(consumer, None)
                kind = self._kind(producer, consumer)
                facts.invalidate(producer)
                facts.invalidate(consumer)
                evaluations.pop(producer, None)
                ev = evaluations.pop(consumer, None)
                fusion = self._fuse(producer, consumer, comp, ev, kind)
                cost_entries.pop(fusion, None)
                evaluations.pop(fusion, None)
                if self._kept_evaluation is not None:
                    evaluations[fusion] = self._kept_evaluation
                    self._kept_evaluation = None
                if fusion is not consumer:
                    queue.remove(consumer)
                    to_update.pop(consumer, None)
                changed = True
                if producer.opcode != "broadcast":
                    for o in fusion.operands:
                        # XLA skips broadcasts (and the operands of a fused broadcast)
                        # here: a CSE'd broadcast feeds many fusions, and re-pricing it
                        # after every one of them is quadratic; it is priced once and fused
                        # at its turn.
                        if o is producer or o.opcode in _NOT_REPRICED:
                            continue
                        if hlo_is_fusible(o):
                            to_update[o] = None
                to_update[fusion] = None
                fused_now.add(fusion)
            if producer.parent is comp and not producer.user_count and comp.root is not producer:
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
                        facts.invalidate(inst)
                    queue.invalidate(inst)
                    queue.set_priority(inst)
        # finally, small constants go into every fusible user
        for constant in [i for i in comp.instructions if _is_small_constant(i)]:
            if constant in self.tainted:
                continue
            for user in list(constant.users):
                if user not in self.tainted and gpu_fusible(user) and \
                        not can_emit_input_fused_scatter(constant, user) and user.parent is comp and consume_fuel(
                            self.name, lambda: f"fuse constant %{constant.name} into "
                                               f"%{user.name}"):
                    self._fuse(constant, user, comp)
                    changed = True
            if constant.parent is comp and constant.user_count == 0 and not constant.is_root:
                remove(comp, constant)
        return changed

    def _fuse(self, producer, consumer, comp, evaluation=None, kind=None):
        """Fuse ``producer`` into ``consumer``; returns the fusion.  ``evaluation``: the
        consumer's indexing evaluation before, if any; brought up to date (and left in
        ``self._kept_evaluation``) when the consumer fusion just grows by the producer.
        ``kind``: choose_fusion_kind(producer, consumer), when the caller knows it.  As
        XLA's ChooseKind (the kind of the emitter the fused analysis picks), a fusion
        that the concatenate emitter takes is kInput."""
        with_concatenate = self.with_concatenate
        concat = any(x.opcode == "concatenate" or x in with_concatenate
                     for x in (producer, consumer))
        fusion = self._fuse_as(producer, consumer, comp, evaluation, kind)
        if concat:
            with_concatenate.add(fusion)
            if fusion.attrs.get("kind") == "kLoop" and uses_concatenate_emitter(fusion):
                set_kind(fusion, "kInput")
        return fusion

    def _fuse_as(self, producer, consumer, comp, evaluation, kind):
        if kind is None:
            kind = choose_fusion_kind(producer, consumer)
        if producer.opcode == "fusion" and consumer.opcode != "fusion" and \
                producer.user_count == 1 and producer.called[0].root.opcode != "tuple":
            # grow the producer's fusion downwards: same result, linear cost
            set_kind(producer, kind)
            fusion = absorb_consumer(producer, consumer)
            self._operand_replaced(fusion)
            return fusion
        if consumer.opcode == "fusion":
            fusion = consumer
            if kind == "kInput":
                set_kind(fusion, kind)
        else:
            fusion = create_fusion(comp, consumer, kind, move=True)
            self._operand_replaced(fusion)
        if evaluation is not None and not evaluation.stale and fusion is consumer and not (
                producer.opcode == "fusion" and producer.called[0].root.opcode == "tuple"):
            clones: list = []
            outs = absorb(fusion, producer, clones=clones, move=True)
            evaluation.absorbed(producer, outs[0], clones)
            self._kept_evaluation = evaluation
        else:
            absorb(fusion, producer, move=True)
        return fusion

    def _operand_replaced(self, fusion) -> None:
        """``fusion`` took the place of an instruction: its users' indexing evaluations
        (if any) still name the old operand; they stay in use as they are, but are no
        longer grown incrementally."""
        evaluations = self.evaluations
        for user in fusion.iter_users():
            ev = evaluations.get(user)
            if ev is not None:
                ev.stale = True

    def _remove(self, comp, inst) -> None:
        if inst.opcode == "fusion":
            from hlo_opt.rewrite.fusion import remove_fusion
            remove_fusion(comp, inst)
        else:
            remove(comp, inst)
