"""The facts the GPU fusion passes ask about an instruction, memoized, and the fusion
rules built on them that every fusion pass shares (one definition each).

* :class:`FusionFacts`: per-instruction facts (fusibility, shared-memory use, unnested
  reductions, basic-block splits, emitted IR size, input-fusibility, ...) memoized in a
  :class:`Facts` record per instruction (a fusion's found in one walk over its body,
  :func:`fusion_facts`), plus ``memo`` for any other property a pass asks repeatedly.
  The facts are functions of the instruction itself (its body, shapes, operand count,
  kind): a pass ``invalidate``\\ s an instruction it changes.
* :func:`fusion_fits_in_budget` (XLA's FusionFitsInBudget) and
  :func:`producer_consumer_merged_too_large`
  (GpuHloCostAnalysis::ProducerConsumerMergedTooLarge): the budget rules of
  ``priority-fusion``, ``fusion``, ``fusion_merger`` and ``multi_output_fusion``.
  Their ``*_facts`` forms take the two records as well, for callers that hold them.
* :meth:`FusionFacts.fusion_kind`: choose_fusion_kind from the memoized facts.

Decision functions return ``None`` when fusion is allowed and a reason string when it
is not (XLA's FusionDecision).
"""
from __future__ import annotations

from hlo_opt.ir.opcodes import EMITTER_FUSIBLE

from hlo_opt.analysis.gpu.fusible import (MAX_OPERANDS_AND_OUTPUTS_PER_FUSION,
                                          MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION,
                                          fused_instructions, is_elementwise, is_fusible,
                                          is_input_fusible, is_input_fusible_reduction,
                                          is_intermediate, shared_memory, subshape_count,
                                          unnested_reductions)
from hlo_opt.analysis.gpu.indexing import IndexingEvaluation

__all__ = ["MAX_BASIC_BLOCK_SPLITS_PER_FUSION", "MAX_IR_SIZE", "SPLITTING", "Facts",
           "FusionFacts", "all_intermediate", "basic_block_splits", "fusion_facts",
           "fusion_fits_in_budget", "fusion_fits_in_budget_facts", "gpu_fusible", "ir_size",
           "producer_consumer_merged_too_large", "merged_too_large_facts",
           "significant_reduce"]

MAX_IR_SIZE = 10_000
MAX_BASIC_BLOCK_SPLITS_PER_FUSION = 10
# opcodes whose emitted code splits a basic block
SPLITTING = frozenset({"reduce", "reduce-window", "concatenate", "scatter", "sort",
                       "select-and-scatter"})


# ---- the facts, one by one ------------------------------------------------------------------

def ir_size(inst) -> int:
    """Instructions emitted for ``inst`` (a fusion: its body's, parameters aside)."""
    if inst.opcode != "fusion":
        return 1
    n = 0
    for i in inst.called[0].iter_instructions():
        if i.opcode != "parameter":
            n += 1
    return n


def basic_block_splits(inst) -> int:
    """Basic blocks the emitted code of ``inst`` splits (one per splitting op)."""
    if inst.opcode != "fusion":
        return 1 if inst.opcode in SPLITTING else 0
    n = 0
    for i in inst.called[0].iter_instructions():
        if i.opcode in SPLITTING:
            n += 1
    return n


def gpu_fusible(inst) -> bool:
    """priority_fusion.cc's IsFusible: elementwise ops and what the emitters handle."""
    if not is_fusible(inst):
        return False
    if inst.opcode == "fusion":
        return inst.fusion_kind != "kCustom"
    if is_elementwise(inst):
        return True
    return inst.opcode in EMITTER_FUSIBLE


def significant_reduce(inst) -> bool:
    """A reduce (or a fusion holding one) that reduces 16+ elements per output."""
    op = inst.opcode
    if op == "fusion":
        body = inst.called[0].iter_instructions()
    elif op == "reduce":
        body = (inst,)
    else:
        return False
    for node in body:
        if node.opcode == "reduce" and node.shape.is_array():
            if node.operands[0].shape.num_elements() // max(node.shape.num_elements(), 1) >= 16:
                return True
    return False


def all_intermediate(inst) -> bool:
    """``inst`` (every instruction of a fusion's body) is an intermediate op
    (:func:`~hlo_opt.analysis.gpu.fusible.is_intermediate`)."""
    if inst.opcode != "fusion":
        return is_intermediate(inst)
    return all(is_intermediate(i) for i in fused_instructions(inst))


# ---- the memoized record ----------------------------------------------------------------------

class Facts:
    """The memoized facts of one instruction (None: not asked yet): ``fusible``
    (:func:`gpu_fusible`), ``sigred`` (:func:`significant_reduce`), ``inred``
    (is_input_fusible_reduction), ``infus`` (is_input_fusible), ``allint``
    (:func:`all_intermediate`), ``shared`` (shared_memory), ``reductions``
    (unnested_reductions), ``splits`` (:func:`basic_block_splits`), ``irsize``
    (:func:`ir_size`), ``inscatter`` (is_input_fusible_scatter), ``inplace`` (has
    in-place operands)."""

    __slots__ = ("fusible", "sigred", "inred", "infus", "allint", "shared", "reductions",
                 "splits", "irsize", "inscatter", "inplace")

    def __init__(self):
        self.fusible = self.sigred = self.inred = self.infus = self.allint = None
        self.shared = self.reductions = self.splits = self.irsize = None
        self.inscatter = self.inplace = None


def fusion_facts(fusion) -> Facts:
    """The facts of a fusion that one walk over its body finds (the same values as
    gpu_fusible, significant_reduce, shared_memory, unnested_reductions,
    basic_block_splits, ir_size and is_input_fusible_scatter ask one by one); the rest
    stay to be asked."""
    f = Facts()
    comp = fusion.called[0]
    sigred = False
    shared = reductions = splits = irsize = 0
    splitting = SPLITTING
    for i in comp.iter_instructions():
        op = i.opcode
        if op == "parameter":
            continue
        irsize += 1
        if op in splitting:
            splits += 1
        if op == "reduce":
            if not sigred and i.shape.is_array() and i.operands[0].shape.num_elements() // max(
                    i.shape.num_elements(), 1) >= 16:
                sigred = True
            shared += shared_memory(i)
            reductions += unnested_reductions(i)
        elif op == "copy" or op == "transpose":
            shared += shared_memory(i)
        elif op == "fusion":
            shared += shared_memory(i)
            reductions += unnested_reductions(i)
    kind = fusion.fusion_kind
    f.fusible = kind != "kCustom"  # is_fusible is true for every fusion
    f.sigred = sigred
    f.shared = shared
    f.reductions = reductions
    f.splits = splits
    f.irsize = irsize
    f.inscatter = kind == "kInput" and comp.root.opcode == "scatter"
    return f


_MISSING = object()


class FusionFacts:
    """The memoized fusion facts of a pass: a :class:`Facts` record per instruction
    (``record``) and memo tables for any other property (``memo``); ``invalidate`` an
    instruction that changes."""

    __slots__ = ("records", "memos")

    def __init__(self):
        self.records: dict = {}  # instruction -> Facts
        self.memos: dict = {}    # key -> {instruction: value}

    def record(self, inst) -> Facts:
        f = self.records.get(inst)
        if f is None:
            f = self.records[inst] = fusion_facts(inst) if inst.opcode == "fusion" else Facts()
        return f

    def invalidate(self, inst) -> None:
        self.records.pop(inst, None)
        for table in self.memos.values():
            table.pop(inst, None)

    def clear(self) -> None:
        self.records.clear()
        self.memos.clear()

    def memo(self, key: str, inst, fn):
        table = self.memos.get(key)
        if table is None:
            table = self.memos[key] = {}
        v = table.get(inst, _MISSING)
        if v is _MISSING:
            v = table[inst] = fn(inst)
        return v

    # -- the record's facts --
    def input_fusible(self, inst) -> bool:
        f = self.record(inst)
        v = f.infus
        if v is None:
            v = f.infus = is_input_fusible(inst)
        return v

    def input_fusible_reduction(self, inst) -> bool:
        f = self.record(inst)
        v = f.inred
        if v is None:
            v = f.inred = is_input_fusible_reduction(inst)
        return v

    def fusion_kind(self, producer, consumer) -> str:
        """choose_fusion_kind(producer, consumer) from the memoized facts (an rng is
        never input-fusible, whatever its user count)."""
        return "kInput" if self.input_fusible(consumer) or self.input_fusible(producer) \
            else "kLoop"


# ---- the shared rules -------------------------------------------------------------------------

def fusion_fits_in_budget(a, b, device, is_consumer_producer_fusion: bool = False,
                          facts: FusionFacts | None = None) -> str | None:
    """XLA's FusionFitsInBudget: shared memory, unnested reductions, operands and
    outputs of ``a`` and ``b`` fused (``facts`` memoizes the per-instruction counts)."""
    if facts is None:
        return fusion_fits_in_budget_facts(a, Facts(), b, Facts(), device,
                                           is_consumer_producer_fusion)
    return fusion_fits_in_budget_facts(a, facts.record(a), b, facts.record(b), device,
                                       is_consumer_producer_fusion)


def fusion_fits_in_budget_facts(a, fa: Facts, b, fb: Facts, device,
                                is_consumer_producer_fusion: bool = False) -> str | None:
    """:func:`fusion_fits_in_budget` with the records of ``a`` and ``b`` at hand."""
    x = fa.shared
    if x is None:
        x = fa.shared = shared_memory(a)
    y = fb.shared
    if y is None:
        y = fb.shared = shared_memory(b)
    budget = device.shared_memory_per_block
    if x + y > budget:
        return f"shared memory usage would be over the budget of {budget}B"
    x = fa.reductions
    if x is None:
        x = fa.reductions = unnested_reductions(a)
    y = fb.reductions
    if y is None:
        y = fb.reductions = unnested_reductions(b)
    if x + y > MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION:
        return (f"over {MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION} unnested reductions in "
                "fusion")
    sa = a.shape
    sb = b.shape
    outputs = (subshape_count(sa) if sa.element_type == "tuple" else 1) + \
        (subshape_count(sb) if sb.element_type == "tuple" else 1)
    if len(a.operands) + len(b.operands) - 1 + outputs <= MAX_OPERANDS_AND_OUTPUTS_PER_FUSION:
        return None
    operands = set(a.operands) | set(b.operands)
    operands.discard(a)
    operands.discard(b)
    if is_consumer_producer_fusion and len(operands) <= len(a.operands):
        return None
    if len(operands) + outputs > MAX_OPERANDS_AND_OUTPUTS_PER_FUSION:
        return ("Number of operands and output buffers is larger than allowed budget per "
                "fusion")
    return None


def producer_consumer_merged_too_large(producer, consumer, evaluations: dict | None = None,
                                       facts: FusionFacts | None = None) -> bool:
    """GpuHloCostAnalysis::ProducerConsumerMergedTooLarge: the producer is emitted once
    per index it is read at in the consumer.  ``evaluations`` caches the consumer's
    indexing evaluation (the caller drops entries of fusions it changes); ``facts``
    memoizes the per-instruction sizes."""
    if facts is None:
        return merged_too_large_facts(producer, Facts(), consumer, Facts(), evaluations)
    return merged_too_large_facts(producer, facts.record(producer), consumer,
                                  facts.record(consumer), evaluations)


def merged_too_large_facts(producer, pf: Facts, consumer, cf: Facts,
                           evaluations: dict | None = None) -> bool:
    """:func:`producer_consumer_merged_too_large` with the two records at hand."""
    replication = 1
    if consumer.opcode == "fusion" and producer in consumer.operands:
        ev = evaluations.get(consumer) if evaluations is not None else None
        if ev is None:
            ev = IndexingEvaluation(consumer)
            if evaluations is not None:
                evaluations[consumer] = ev
        replication = ev.emitted(producer)
        if replication < 1:
            replication = 1
    a = pf.splits
    if a is None:
        a = pf.splits = basic_block_splits(producer)
    b = cf.splits
    if b is None:
        b = cf.splits = basic_block_splits(consumer)
    n_splits = replication * a + b
    if n_splits > MAX_BASIC_BLOCK_SPLITS_PER_FUSION:
        return True
    a = pf.irsize
    if a is None:
        a = pf.irsize = ir_size(producer)
    b = cf.irsize
    if b is None:
        b = cf.irsize = ir_size(consumer)
    return (a * replication + b) * (1 << n_splits) > MAX_IR_SIZE
