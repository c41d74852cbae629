"""``cpu-instruction-fusion``: XLA's CpuInstructionFusion (InstructionFusion with the CPU
rules of cpu_instruction_fusion.cc), driven by the same producer-into-consumer loop as
the GPU ``fusion`` pass.  XLA:CPU runs it once, duplicating cheap producers; here each
computation gets either that one run or the GPU pair of runs (without, then with
duplication), whichever leaves its kernels writing fewer bytes (see
:class:`CpuInstructionFusion`).  Two duplication rules are stricter than XLA's: a producer
is duplicated only when it can be fused into all its users, and only while the consumer
reads at most four arrays over 4 KiB (:data:`MAX_DUPLICATED_INPUTS`); with XLA's rules a
transformer training step ran 30% slower than with the pair of runs.

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

from hlo_opt.analysis.gpu.fusible import (is_always_duplicable, is_expensive,
                                          reuses_operand_elements)
from hlo_opt.fuel import FuelPool, fuel_scope
from hlo_opt.rewrite.graph import computation_batch, fusible_computations

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
    duplicate_only_into_all_users = True

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
        reason = self.base_should_fuse(consumer, i)
        # the base rules (duplication) first: they reject most expensive producers at
        # once, and the reuse analysis walks the whole fused computation
        if not reason and producer.opcode != "fusion" and is_expensive(producer) and \
                reuses_operand_elements(consumer, i):
            return "Fusion is not profitable."
        reason = reason or self._duplication_reads_too_much(producer, consumer)
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

    def _duplication_reads_too_much(self, producer, consumer) -> str | None:
        """A duplicated producer makes the consumer read the producer's operands too:
        past MAX_DUPLICATED_INPUTS arrays, each fused copy re-reads them all and the
        recomputation costs more than the intermediate it saves (a transformer training
        step's optimizer updates ran 30% slower)."""
        if producer.user_count == 1 and producer.has_user(consumer):
            return None
        if is_always_duplicable(producer):
            return None
        inputs = {o for o in consumer.operands if o is not producer}
        inputs.update(producer.operands)
        if sum(1 for o in inputs if _is_large(o)) > MAX_DUPLICATED_INPUTS:
            return "Duplication would read too many arrays."
        return None


# a duplicated producer may leave its consumer fusion reading at most this many arrays
# of more than SMALL_ARRAY_BYTES
MAX_DUPLICATED_INPUTS = 4
SMALL_ARRAY_BYTES = 4096


def _is_large(inst) -> bool:
    return inst.shape.is_array() and inst.shape.byte_size() > SMALL_ARRAY_BYTES


class CpuInstructionFusion(GpuInstructionFusion):
    """``may_duplicate=None`` (the default) chooses per computation between XLA:CPU's one
    run that may duplicate and the GPU pair of runs (without, then with duplication):
    both are tried on a copy of the module and each computation keeps the one whose
    kernels write fewer bytes (the pair on a tie).  The one run fuses a chain of cheap
    ops shared by several outputs (threefry's rounds) into one kernel per output, where
    the pair's first run leaves fusions a later run cannot extend; on long chains feeding
    dots and reductions it duplicates more and materialises more than the pair does."""

    name = "cpu-instruction-fusion"

    def _run(self, module) -> bool:
        if self.may_duplicate is not None:
            return self._run_phases(module, lambda comp: (self.may_duplicate,))
        # the two ways can differ only where a loop-fusible array has several users
        open_ = {comp.name for comp in fusible_computations(module)
                 if any(_shared_loop_fusible(i) for i in comp.instructions)}
        choice = {}
        if open_:
            single = self._bytes_written_after(module, (True,), open_)
            pair = self._bytes_written_after(module, (False, True), open_)
            choice = {name: (True,) for name in open_ if single[name] < pair[name]}
        return self._run_phases(module, lambda comp: choice.get(comp.name, (False, True)))

    def _run_phases(self, module, phases_of) -> bool:
        changed = False
        for may_duplicate in (False, True):
            rules = CpuFusionRules(module, may_duplicate)
            for comp in fusible_computations(module):
                if may_duplicate in phases_of(comp):
                    changed |= self._run_on_computation(comp, rules)
        return changed

    def _bytes_written_after(self, module, phases, names) -> dict:
        """Name -> bytes its kernels write, for the computations ``names`` of a copy of
        ``module`` fused with ``phases`` (fuel is not spent on the copy)."""
        trial = module.clone()
        with computation_batch(trial), fuel_scope(FuelPool({})):
            self._run_phases(trial, lambda comp: phases if comp.name in names else ())
        return {comp.name: _kernel_bytes_written(comp) for comp in fusible_computations(trial)
                if comp.name in names}


def _shared_loop_fusible(inst) -> bool:
    """A loop-fusible array value with several users."""
    return inst.user_count > 1 and inst.opcode != "fusion" and can_be_loop_fused(inst) and \
        inst.shape.is_array() and inst.shape.num_elements() > 1


_NOT_KERNELS = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})


def _kernel_bytes_written(comp) -> int:
    return sum(i.shape.byte_size() for i in comp.instructions
               if i.opcode not in _NOT_KERNELS and i.shape.is_array()
               and i.shape.num_elements() > 1)
