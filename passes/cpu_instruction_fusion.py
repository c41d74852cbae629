"""``cpu-instruction-fusion``: XLA's CpuInstructionFusion (InstructionFusion with the CPU
rules of cpu_instruction_fusion.cc), driven by the same producer-into-consumer loop as
the GPU ``fusion`` pass, run once with duplication (XLA:CPU's default) rather than the GPU
pair of runs without, then with duplication.

Rules: the producer must be loop-fusible (elementwise, bitcast, broadcast, concatenate,
dynamic-slice, dynamic-update-slice, gather, iota, pad, reduce, reshape, reverse, slice,
transpose); no large constants (> 1 MiB, ``xla_cpu`` default threshold); no concatenate
with more than 8 operands or on a minor dimension of >= 128 elements; no expensive
producer into a consumer that reuses its elements; no fusion producers; no constant into
a non-fusion; the fusion emitter's code-duplication limit.  A dot consumer takes a small
(< 16 KiB) vector operand's producer (matrix-vector products); anything else fuses only
into a loop fusion or a loop-fusible consumer.  Every fusion is ``kLoop``.

Not ported: XLA's output fusion of a matrix-vector dot into its ``add`` user (``kOutput``;
the CPU backend calls BLAS for dots instead), and the thunk runtime's scatter blocking.
"""
from __future__ import annotations

from hlo_opt.analysis.gpu.fusible import is_expensive, reuses_operand_elements
from hlo_opt.rewrite.graph import fusible_computations

from passes.gpu.instruction_fusion import FusionRules, GpuInstructionFusion

LOOP_FUSIBLE = frozenset({
    "bitcast", "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice",
    "gather", "iota", "pad", "reduce", "reshape", "reverse", "slice", "transpose"})
FUSION_THRESHOLD_BYTES = 16 * 1024
MAX_CONCATENATE_ARGUMENTS = 8
LARGE_CONSTANT_BYTES = 1 << 20


def can_be_loop_fused(inst) -> bool:
    from hlo_opt.ir.opcodes import is_elementwise
    return is_elementwise(inst.opcode) or inst.opcode in LOOP_FUSIBLE


def _minor_dim_concatenate(inst) -> bool:
    if inst.shape.rank <= 1:
        return False
    d = inst.dimensions[0]
    return d == inst.shape.effective_layout().minor_to_major[0] and inst.shape.dims[d] >= 128


class CpuFusionRules(FusionRules):
    def is_expensive(self, inst) -> bool:
        # CpuInstructionFusion::IsExpensive: exp, sqrt, rsqrt and float divide are
        # expensive on the CPU (the GPU rules call them cheap)
        return is_expensive(inst)

    def should_fuse(self, consumer, i) -> str | None:
        if consumer in self.tainted or consumer.operands[i] in self.tainted:
            return "control dependencies"
        producer = consumer.operands[i]
        if producer.opcode == "constant" and producer.shape.byte_size() > LARGE_CONSTANT_BYTES:
            return "Don't fuse large constants."
        if not can_be_loop_fused(producer):
            return "Producer is not loop-fusible."
        for x in (producer, consumer):
            if x.opcode == "concatenate" and (len(x.operands) > MAX_CONCATENATE_ARGUMENTS
                                              or _minor_dim_concatenate(x)):
                return "Concatenate fusion is inefficient."
        if producer.opcode != "fusion" and is_expensive(producer) and \
                reuses_operand_elements(consumer, i):
            return "Fusion is not profitable."
        reason = self.base_should_fuse(consumer, i)
        if reason:
            return reason
        if producer.opcode == "constant" and consumer.opcode != "fusion":
            return "Not fusing: insufficient non-constant nodes."
        if producer.opcode == "fusion":
            return "Not fusing: producer is itself a fusion node."
        if consumer.opcode == "fusion" and \
                self.evaluation(consumer).code_duplication_too_high(producer):
            return "Code duplication too high"
        if consumer.opcode == "dot" and consumer.shape.rank <= 1:
            a, b = consumer.operands
            if a.shape.rank == 1 and i == 1 and a.shape.byte_size() < FUSION_THRESHOLD_BYTES:
                return None
            if b.shape.rank == 1 and i == 0 and b.shape.byte_size() < FUSION_THRESHOLD_BYTES:
                return None
        if consumer.opcode == "fusion" and consumer.fusion_kind == "kLoop":
            return None
        if consumer.opcode != "fusion" and can_be_loop_fused(consumer):
            return None
        return "Not fusing: not found a fusible case"

    def fuse(self, producer, consumer, comp, kind=None):
        return super().fuse(producer, consumer, comp, kind="kLoop")


class CpuInstructionFusion(GpuInstructionFusion):
    name = "cpu-instruction-fusion"

    def _run(self, module) -> bool:
        # one run that may duplicate, as XLA:CPU adds it (CpuInstructionFusion's
        # may_duplicate defaults to true): the GPU pair's first, non-duplicating run
        # would fuse chains into fusions that a later run cannot fuse further
        may_duplicate = True if self.may_duplicate is None else self.may_duplicate
        rules = CpuFusionRules(module, may_duplicate)
        changed = False
        for comp in fusible_computations(module):
            changed |= self._run_on_computation(comp, rules)
        return changed
