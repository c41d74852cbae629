"""``multi_output_fusion``: XLA's GpuMultiOutputFusion.

Visiting instructions from the root up, for each one:

1. *sibling* fusion: its users that are fusions (multi-output fusions first, then
   fusions, then plain ops) are merged pairwise into one multi-output fusion when they
   are not connected, their loops iterate over the same shape (a reduction: over its
   input; heroes compatible), and the result fits the budget.  The shared operand is
   then read once.
2. *producer-consumer* fusion: a producer with several users is fused into one consumer
   as an extra output (so its other users read that output instead of a separate kernel)
   when no cycle results, it fits, and the cost model says it runs faster.

Cycle checks use :class:`~hlo_opt.analysis.reachability.Reachability` (updated as fusions
are formed) instead of rebuilding XLA's n^2 reachability map after every fusion.
"""
from __future__ import annotations

from hlo_opt.analysis.cost import CostCache
from hlo_opt.analysis.perf_model import estimate_run_times
from hlo_opt.fuel import consume_fuel
from hlo_opt.analysis.reachability import Reachability

from hlo_opt.analysis.gpu.fusible import (choose_fusion_kind, is_fusible_as_mof_root,
                                          is_fusion_kind, producer_multi_output_fusible,
                                          real_hero_for_mof, shapes_compatible_for_mof)
from hlo_opt.analysis.gpu.fusion_facts import (FusionFacts, fusion_fits_in_budget,
                                               producer_consumer_merged_too_large)
from hlo_opt.rewrite.fusion import absorb, create_fusion, set_kind
from hlo_opt.rewrite.graph import computation_batch, control_tainted, fusible_computations


def _is_profitable_operand(inst) -> bool:
    """XLA's IsProfitableOperand: an effective scalar (any opcode) is not worth sharing."""
    return not (inst.shape.is_array() and inst.shape.num_elements() == 1)


def _unique_slice(parent, inst):
    """XLA's FindUniqueSlice: the one slice through which ``inst`` (a slice, or a fusion
    reading ``parent`` through a single-use parameter) reads ``parent``, else None."""
    if inst.opcode == "slice":
        return inst
    if inst.opcode != "fusion":
        return None
    result = None
    params = inst.called[0].parameters
    for i, o in enumerate(inst.operands):
        if o is parent:
            if result is not None:
                return None
            p = params[i]
            if p.user_count != 1:
                return None
            result = _unique_slice(p, p.users[0])
            if result is None:
                return None
    return result


def _slices_disjoint(a, b, parent) -> str | None:
    """XLA's ParameterSlicesAreNonOverlapping: siblings reading disjoint slices of a
    large (>= 1024 bytes) shared operand gain nothing from sharing it."""
    if not parent.shape.is_array() or parent.shape.byte_size() < 1024:
        return None
    s1, s2 = _unique_slice(parent, a), _unique_slice(parent, b)
    if s1 is None or s2 is None:
        return None
    for (lo1, hi1, _), (lo2, hi2, _) in zip(s1.attr("slice").dims, s2.attr("slice").dims):
        if not (lo1 < hi2 and lo2 < hi1):
            return "slices are non-overlapping"
    return None


def _fusion_priority(inst) -> int:
    if inst.is_multi_output_fusion:
        return 2
    return 1 if inst.opcode == "fusion" else 0


def _is_nestable_variadic_reduction(inst) -> bool:
    if not inst.shape.is_tuple():
        return False
    if inst.opcode == "reduce":
        from hlo_opt.analysis.gpu.reduction import is_reduction_from_or_to_contiguous_dimensions
        return not is_reduction_from_or_to_contiguous_dimensions(inst)
    return inst.opcode == "fusion" and is_fusion_kind(inst, "kLoop") and \
        inst.called[0].root.opcode == "reduce"


def _tuple_valued_root(inst) -> bool:
    """A fusion (or op) whose value is a tuple without being a multi-output fusion, other
    than a variadic input reduction (a reduce from or to contiguous dimensions; it joins
    a multi-output fusion as one tuple-shaped output, as in XLA): not supported as a
    multi-output partner here."""
    root = inst.called[0].root if inst.opcode == "fusion" else inst
    if root.opcode == "tuple" and inst.opcode == "fusion" or not root.shape.is_tuple():
        return False
    if root.opcode == "reduce":
        from hlo_opt.analysis.gpu.reduction import is_reduction_from_or_to_contiguous_dimensions
        return not is_reduction_from_or_to_contiguous_dimensions(root)
    return True


def sibling_candidate(inst) -> str | None:
    if inst.user_count == 0:
        return "user count is zero"
    reason = _root_reason(inst)
    if reason:
        return reason
    if inst.is_multi_output_fusion and any(u.opcode != "get-tuple-element" for u in inst.users):
        return "there exists a non-GTE user"
    return None


def _root_reason(inst) -> str | None:
    """The checks of sibling_candidate that ask the instruction itself only."""
    if not is_fusible_as_mof_root(inst):
        return "not fusible as MOF root"
    if _is_nestable_variadic_reduction(inst) or _tuple_valued_root(inst):
        return "merging with variadic reductions is not supported yet"
    return None


def _legal_to_fuse(a, b, device, info) -> str | None:
    for x in (a, b):
        if x.opcode == "fusion" and x.called[0].root.opcode == "dynamic-update-slice":
            return "can't fuse multiple DUSs"
    return fusion_fits_in_budget(a, b, device, False, info)


class GpuMultiOutputFusion:
    name = "multi_output_fusion"

    def run(self, module) -> bool:
        with computation_batch(module):
            return self._run(module)

    def _run(self, module) -> bool:
        self.device = module.config.device
        changed = False
        for comp in fusible_computations(module):
            changed |= self._run_on(comp)
        return changed

    def _run_on(self, comp) -> bool:
        self.costs = CostCache()
        reach = Reachability(comp)
        info = FusionFacts()
        self.info = info
        self.tainted = control_tainted(comp)
        changed = False
        worklist = comp.post_order()
        while worklist:
            producer = worklist.pop()
            if producer.parent is not comp or producer.opcode == "constant" or \
                    producer in self.tainted or is_fusion_kind(producer, "kCustom"):
                continue
            if self._fuse_siblings(comp, producer, reach, info):
                changed = True
            consumer = self._pick_consumer(producer, reach, info)
            if consumer is None or not consume_fuel(
                    self.name, lambda: f"fuse %{producer.name} into %{consumer.name} "
                                       "(multi-output)"):
                continue
            changed = True
            for x in (producer, consumer):
                info.invalidate(x)
                self.costs.invalidate(x)
            if consumer.opcode != "fusion":
                consumer = create_fusion(comp, consumer, choose_fusion_kind(producer, consumer))
            absorb(consumer, producer, as_output=True, move=True)
            reach.forget(producer)
            reach.update(consumer)
        return changed

    # -- memoized facts (functions of an instruction itself; dropped with ``info``'s
    # when the pass changes it; an rng's fusibility depends on its user count: asked
    # afresh) --
    def _root_ok(self, inst) -> str | None:
        """sibling_candidate's checks of the instruction itself."""
        if inst.opcode == "rng":
            return _root_reason(inst)
        return self.info.memo("mof_root", inst, _root_reason)

    def _sibling_candidate(self, inst) -> str | None:
        """sibling_candidate(inst)."""
        if inst.user_count == 0:
            return "user count is zero"
        reason = self._root_ok(inst)
        if reason:
            return reason
        if inst.is_multi_output_fusion and any(u.opcode != "get-tuple-element" for u in inst.users):
            return "there exists a non-GTE user"
        return None

    def _shapes_compatible(self, a, b) -> str | None:
        memo = self.info.memo
        return shapes_compatible_for_mof(a, b, (memo("mof_hero", a, real_hero_for_mof),
                                                memo("mof_hero", b, real_hero_for_mof)))

    # -- siblings --
    def _fuse_siblings(self, comp, parent, reach: Reachability, info) -> bool:
        if not _is_profitable_operand(parent):
            return False
        changed = False
        siblings = sorted(parent.users, key=_fusion_priority, reverse=True)
        i = 0
        while i < len(siblings):
            a = siblings[i]
            if a.parent is not comp or a.opcode != "fusion" or self._sibling_candidate(a) or \
                    a in self.tainted:
                i += 1
                continue
            j = i + 1
            while j < len(siblings):
                b = siblings[j]
                if b.parent is not comp or b in self.tainted or self._sibling_candidate(b) \
                        or reach.connected(a, b) \
                        or self._shapes_compatible(a, b) or _slices_disjoint(a, b, parent) \
                        or _legal_to_fuse(a, b, self.device, info) \
                        or not consume_fuel(self.name, lambda: f"fuse sibling %{b.name} "
                                                               f"into %{a.name}"):
                    j += 1
                    continue
                for x in (a, b):
                    info.invalidate(x)
                    self.costs.invalidate(x)
                was_input = is_fusion_kind(b, "kInput")
                absorb(a, b, as_output=True, move=True)
                if was_input:
                    set_kind(a, "kInput")
                reach.forget(b)
                reach.update(a)
                changed = True
                del siblings[j]
            i += 1
        return changed

    # -- producer / consumer --
    def _pick_consumer(self, producer, reach: Reachability, info):
        users = producer.users
        if not users or (len(users) == 1 and not users[0].is_multi_output_fusion):
            return None
        if producer.opcode == "fusion" and producer.fusion_kind == "kCustom":
            return None
        if producer_multi_output_fusible(producer) or _tuple_valued_root(producer):
            return None
        candidates = []
        memo = info.memo
        for consumer in users:
            if consumer in self.tainted:
                continue
            if consumer.opcode == "rng":
                if not is_fusible_as_mof_root(consumer) or _tuple_valued_root(consumer):
                    continue
            elif not memo("mof_root_fusible", consumer, is_fusible_as_mof_root) or \
                    memo("tuple_root", consumer, _tuple_valued_root):
                continue
            if consumer.is_multi_output_fusion and any(
                    u.opcode != "get-tuple-element" for u in consumer.users):
                continue
            if self._shapes_compatible(producer, consumer):
                continue
            if any(o is not producer and reach.reaches(producer, o) for o in consumer.operands):
                continue
            if fusion_fits_in_budget(producer, consumer, self.device, False, info):
                continue
            if producer_consumer_merged_too_large(producer, consumer, None, info):
                continue
            unfused, fused = estimate_run_times(producer, [consumer], multi_output=True,
                                                device=self.device, cache=self.costs)
            if fused > unfused:
                continue
            candidates.append(consumer)
        if not candidates:
            return None
        return max(candidates, key=_fusion_priority)
