"""A GPU run-time model for fusion decisions (the shape of XLA's GpuPerformanceModel):
an instruction or fusion runs in ``compute + memory - 0.95 * min(compute, memory)`` plus a
kernel launch; fusing a producer into a consumer re-computes the producer as often as the
consumer reads each of its elements and reads the producer's inputs instead of its
output.

``estimate_run_times(producer, consumers)`` -> (time_unfused, time_fused) in seconds, as
``GpuPerformanceModel::EstimateRunTimes``.  Simplified against XLA: no per-block L1
model; reads smaller than L2 get XLA's 2.5x L2 speed-up.  Coalescing is XLA's heuristic
(``IsReadCoalescedHeuristic``) for a producer-consumer fusion only: a fusion that is not a
tiled transpose and contains a transpose of the minor dimension (not of a broadcast or
iota) reads uncoalesced, at the memory bandwidth divided by the waste factor
(``GetCoalescingWasteFactor``: DRAM->L2 transaction size / element size); this is what
keeps a transpose out of a concatenate or binary loop fusion.
"""
from __future__ import annotations

from dataclasses import dataclass

from .cost import (_UTILIZATION_OPCODES, CostCache, _CostEntry, _own_operand_utilization,
                   _elements, _param_utilization, fusion_param_read_bytes, instruction_cost,
                   shape_bytes)
from .device import DEFAULT_DEVICE, DeviceInfo
from .gpu.fusible import (fused_instructions, is_elementwise, is_intermediate,
                          is_physically_transposing, reshape_copy_layout, tiled_transpose)
from .layout import minor_to_major
from hlo_opt.ir.types import BIT_WIDTH

KERNEL_LAUNCH_OVERHEAD = 1e-6  # seconds (kKernelLaunchOverhead)
MEMORY_COMPUTE_PARALLELISM = 0.95
L2_CACHE_SPEEDUP = 2.5
DRAM_TO_L2_TRANSACTION_SIZE_BYTES = 64  # se::DeviceDescription's default (2 sectors)


@dataclass
class RunTime:
    exec_time: float
    compute_time: float
    read_time: float
    write_time: float


def transposes_minor_dimension(inst) -> bool:
    """XLA's TransposesMinorDimension: a copy or transpose (or a reshape that moves bytes,
    as the copy it is) whose most minor non-trivial output dimension is not the operand's
    most minor non-trivial dimension."""
    op = inst.opcode
    if op not in ("copy", "transpose", "reshape") or not inst.shape.is_array():
        return False
    src = inst.operands[0].shape
    dst = inst.shape
    if op == "reshape":  # one that is no bitcast: a copy of the operand (see fusible)
        layout = reshape_copy_layout(inst)
        if layout is None:
            return False
        op, dst = "copy", src.with_layout(layout)
    src_m2m = minor_to_major(src)
    first_src = next((d for d in src_m2m if src.dims[d] != 1), None)
    if op == "copy":
        first_dst = next((d for d in minor_to_major(dst) if dst.dims[d] != 1), None)
        return first_src != first_dst
    for out_dim in minor_to_major(dst):
        if dst.dims[out_dim] == 1:
            continue
        return first_src is not None and \
            src_m2m.index(inst.dimensions[out_dim]) > src_m2m.index(first_src)
    return False


def _of_broadcast(inst) -> bool:
    """A broadcast or iota, seen through bitcasts and unary elementwise ops."""
    while True:
        op = inst.opcode
        if op == "broadcast" or op == "iota":
            return True
        if len(inst.operands) != 1 or (op != "bitcast" and not is_elementwise(inst)):
            return False
        inst = inst.operands[0]


def _bad_transpose(inst, cache: CostCache) -> bool:
    """IsReadCoalescedHeuristic's is_bad_transpose (memoized): ``inst`` (or one of its
    fused instructions) transposes the minor dimension of something that is not a
    broadcast or iota."""
    e = cache.entry(inst)
    v = e.bad_transpose
    if v is None:
        body = fused_instructions(inst) if inst.opcode == "fusion" else (inst,)
        v = e.bad_transpose = any(transposes_minor_dimension(i) and
                                  not _of_broadcast(i.operands[0]) for i in body
                                  if i.opcode in ("copy", "transpose", "reshape"))
    return v


def _fused_transpose_hero(producer, consumer) -> bool:
    """Whether the fusion of ``producer`` into ``consumer`` would be a tiled transpose
    (EmitterFusionKind::kTranspose): from the consumer's root through intermediate
    (unary elementwise, bitcast-like) ops, into the producer, to a transpose that moves
    data (XLA's transpose emitter takes more permutations than :func:`tiled_transpose`
    describes; counting them all keeps e.g. ``transpose(exp(x)), dimensions={2,1,0}``
    fused, as XLA does)."""
    fused = consumer.opcode == "fusion"
    roots = consumer.fusion_outputs()
    for h in roots:
        in_producer = False
        while h is not None:
            if h.opcode == "parameter":
                if in_producer or not fused or \
                        consumer.operands[h.parameter_number] is not producer:
                    break
                h = producer
            if h is producer:
                in_producer = True
                if producer.opcode == "fusion":
                    h = producer.called[0].root
                    if h.opcode == "tuple":
                        break
            if tiled_transpose(h) or (h.opcode in ("copy", "transpose", "reshape") and
                                      is_physically_transposing(h)):
                return True  # (XLA tiles more transposes than tiled_transpose knows)
            if h.opcode == "fusion" or not is_intermediate(h):
                break
            nxt = h.operands[0]
            if not fused and not in_producer and nxt is not producer:
                break  # an unfused consumer's operand other than the producer
            if not fused and in_producer and producer.opcode != "fusion":
                break  # the unfused producer's operands are outside
            h = nxt
    return False


def _waste_factor(producer, consumer, cache: CostCache) -> int:
    """1 where the fused kernel reads coalesced, else XLA's GetCoalescingWasteFactor of
    the producer's first operand's element type (IsReadCoalescedHeuristic, for the
    transpose rule)."""
    if not (_bad_transpose(producer, cache) or _bad_transpose(consumer, cache)):
        return 1
    if _fused_transpose_hero(producer, consumer):
        return 1
    et = producer.operands[0].shape.element_type if producer.operands else "f32"
    size = max(BIT_WIDTH.get(et, 32) // 8, 1)
    return max(DRAM_TO_L2_TRANSACTION_SIZE_BYTES // size, 1)


def _compute_time(device: DeviceInfo, flops: float, num_threads: int) -> float:
    fpus = device.core_count * device.fpus_per_core
    active = max(min(num_threads, fpus), 1)
    flops_per_second = device.clock_rate_ghz * 1e9 * 2 * active  # an FMA is two flops
    return flops / flops_per_second


def _read_time(device: DeviceInfo, bytes_net: float, bytes_total: float,
               waste: int = 1) -> float:
    """Read time; ``waste`` > 1: uncoalesced, from DRAM at the bandwidth over it."""
    bandwidth = device.memory_bandwidth
    if waste != 1:
        return bytes_total * waste / bandwidth
    if bytes_net < device.l2_cache_size:
        bandwidth *= L2_CACHE_SPEEDUP
    return bytes_total / bandwidth


def _combine(compute: float, memory: float) -> float:
    return compute + memory - MEMORY_COMPUTE_PARALLELISM * min(compute, memory)


def _threads(inst) -> int:
    """Threads the kernel launches: one per output element for loop kernels; a reduction
    (or an input fusion) iterates over its input, so its operands' size counts."""
    op = inst.opcode
    if op == "fusion":
        fc = inst.called[0]
        root = fc.root
        shapes = [o.shape for o in root.operands] if root.opcode == "tuple" else [root.shape]
        if inst.fusion_kind == "kInput":
            shapes += [p.shape for p in fc.parameters]
    elif op in ("reduce", "reduce-window", "scatter", "sort"):
        shapes = [inst.shape] + [o.shape for o in inst.operands]
    else:
        shapes = [inst.shape]
    best = None
    for shape in shapes:
        et = shape.element_type
        if et == "tuple":
            for s in shape.leaves():
                if s.is_array():
                    n = s.num_elements()
                    if best is None or n > best:
                        best = n
        elif et != "token" and et != "opaque":  # an array: its (cached) element count
            n = _elements(shape)
            if best is None or n > best:
                best = n
    return 1 if best is None else best


def _cached_threads(inst, cache: CostCache) -> int:
    e = cache.entry(inst)
    n = e.threads
    if n is None:
        n = e.threads = _threads(inst)
    return n


def run_time(inst, device: DeviceInfo = DEFAULT_DEVICE, cache: CostCache | None = None
             ) -> RunTime:
    if cache is not None:
        e = cache.entry(inst)
        rt = e.run_time
        if rt is not None:
            return rt
    c = cache if cache is not None else CostCache()
    cost = c.cost(inst)
    compute = _compute_time(device, cost.flops + 4 * cost.transcendentals,
                            _cached_threads(inst, c))
    read = _read_time(device, cost.bytes_read, cost.bytes_read)
    write = cost.bytes_written / device.memory_bandwidth
    rt = RunTime(_combine(compute, read + write), compute, read, write)
    if cache is not None:
        e.run_time = rt
    return rt


def fused_exec_time(producer, producer_rt: RunTime, consumer,
                    device: DeviceInfo = DEFAULT_DEVICE, cache: CostCache | None = None
                    ) -> float:
    """Time of ``consumer`` with ``producer`` fused into it."""
    cache = cache or CostCache()
    return _fused_exec_time(producer, consumer, device, cache)


def _fused_exec_time(producer, consumer, device: DeviceInfo, cache: CostCache,
                     producer_cost=None) -> float:
    """The time of ``consumer`` with ``producer`` fused into it: the one formula
    (:func:`_compute_time`, :func:`_read_time` twice and :func:`_combine`, inlined: the
    same float operations in the same order, bit-identical results).  ``producer_cost``:
    the producer's instruction cost, when the caller knows it."""
    entries = cache.entries
    ce = entries.get(consumer)
    if ce is None:
        ce = entries[consumer] = _CostEntry()
    consumer_cost = ce.cost
    if consumer_cost is None:
        consumer_cost = ce.cost = instruction_cost(consumer)
    utilization = 0.0
    producer_bytes_in_consumer = 0.0
    producer_bytes = None  # shape_bytes(producer.shape), when a plain consumer asks
    i = 0
    if consumer.opcode == "fusion":  # cache.utilization / param_read_bytes, inlined
        comp = consumer.called[0]
        params = comp.parameters
        for o in consumer.operands:
            if o is producer:
                memo = ce.util
                if memo is None:
                    memo = ce.util = {}
                utilization += _param_utilization(comp, params[i], memo)
                per_param = ce.param_bytes
                if per_param is None:
                    per_param = ce.param_bytes = {}
                b = per_param.get(i)
                if b is None:
                    b = per_param[i] = fusion_param_read_bytes(params[i])
                producer_bytes_in_consumer += b
            i += 1
    else:
        special = consumer.opcode in _UTILIZATION_OPCODES
        for o in consumer.operands:
            if o is producer:
                utilization += _own_operand_utilization(consumer, i) if special else 1.0
                if producer_bytes is None:
                    producer_bytes = shape_bytes(producer.shape)
                producer_bytes_in_consumer += producer_bytes
            i += 1
    if producer_cost is None:
        producer_cost = cache.cost(producer)
    flops = consumer_cost.flops + 4 * consumer_cost.transcendentals + utilization * (
        producer_cost.flops + 4 * producer_cost.transcendentals)
    # _compute_time
    threads = ce.threads
    if threads is None:
        threads = ce.threads = _threads(consumer)
    fpus = device.core_count * device.fpus_per_core
    active = threads if threads < fpus else fpus
    if active < 1:
        active = 1
    compute = flops / (device.clock_rate_ghz * 1e9 * 2 * active)
    producer_in = producer_cost.bytes_read  # the producer's inputs, read instead
    other_reads = consumer_cost.bytes_read - producer_bytes_in_consumer
    if 0.0 > other_reads:  # max(other_reads, 0.0)
        other_reads = 0.0
    # _read_time twice
    bandwidth = device.memory_bandwidth
    l2 = device.l2_cache_size
    b1 = bandwidth * L2_CACHE_SPEEDUP if other_reads < l2 else bandwidth
    if 1e-9 > utilization:  # max(utilization, 1e-9)
        utilization = 1e-9
    b2 = bandwidth * L2_CACHE_SPEEDUP if producer_in < l2 else bandwidth
    waste = _waste_factor(producer, consumer, cache)
    if waste == 1:
        read = other_reads / b1 + (producer_in * utilization) / b2
    else:  # uncoalesced reads (_read_time with the waste factor)
        read = other_reads * waste / bandwidth + (producer_in * utilization) * waste / bandwidth
    memory = read + consumer_cost.bytes_written / bandwidth
    # _combine
    return compute + memory - MEMORY_COMPUTE_PARALLELISM * (
        memory if memory < compute else compute)


def estimate_run_times(producer, consumers, multi_output: bool = False,
                       device: DeviceInfo = DEFAULT_DEVICE, cache: CostCache | None = None
                       ) -> tuple[float, float]:
    """(time unfused, time with ``producer`` fused into each of ``consumers``): the
    run times of :func:`run_time` and the fused times of :func:`_fused_exec_time`, the
    producer's cost looked up once."""
    cache = cache or CostCache()
    entries = cache.entries
    pe = entries.get(producer)
    producer_rt = pe.run_time if pe is not None else None
    if producer_rt is None:
        producer_rt = run_time(producer, device, cache)
    producer_cost = cache.cost(producer)
    unfused = KERNEL_LAUNCH_OVERHEAD * (len(consumers) + 1) + producer_rt.exec_time
    fused = KERNEL_LAUNCH_OVERHEAD * len(consumers)
    for consumer in consumers:
        ce = entries.get(consumer)
        rt = ce.run_time if ce is not None else None
        if rt is None:
            rt = run_time(consumer, device, cache)
        unfused += rt.exec_time
        fused += _fused_exec_time(producer, consumer, device, cache, producer_cost)
    if multi_output:
        fused += producer_rt.write_time
    return unfused, fused
