"""A GPU run-time model for fusion decisions (the shape of XLA's GpuPerformanceModel):
an instruction or fusion runs in ``compute + memory - 0.95 * min(compute, memory)`` plus a
kernel launch; fusing a producer into a consumer re-computes the producer as often as the
consumer reads each of its elements and reads the producer's inputs instead of its
output.

``estimate_run_times(producer, consumers)`` -> (time_unfused, time_fused) in seconds, as
``GpuPerformanceModel::EstimateRunTimes``.  Simplified against XLA: no per-block L1
model, no coalescing model; reads smaller than L2 get XLA's 2.5x L2 speed-up.
"""
from __future__ import annotations

from dataclasses import dataclass

from .cost import CostCache, fusion_param_read_bytes, shape_bytes
from .device import DEFAULT_DEVICE, DeviceInfo

KERNEL_LAUNCH_OVERHEAD = 1e-6  # seconds (kKernelLaunchOverhead)
MEMORY_COMPUTE_PARALLELISM = 0.95
L2_CACHE_SPEEDUP = 2.5


@dataclass
class RunTime:
    exec_time: float
    compute_time: float
    read_time: float
    write_time: float


def _compute_time(device: DeviceInfo, flops: float, num_threads: int) -> float:
    fpus = device.core_count * device.fpus_per_core
    active = max(min(num_threads, fpus), 1)
    flops_per_second = device.clock_rate_ghz * 1e9 * 2 * active  # an FMA is two flops
    return flops / flops_per_second


def _read_time(device: DeviceInfo, bytes_net: float, bytes_total: float) -> float:
    bandwidth = device.memory_bandwidth
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
        if inst.attrs.get("kind") == "kInput":
            shapes += [p.shape for p in fc.parameters]
    elif op in ("reduce", "reduce-window", "scatter", "sort"):
        shapes = [inst.shape] + [o.shape for o in inst.operands]
    else:
        shapes = [inst.shape]
    best = None
    for shape in shapes:
        for s in (shape.leaves() if shape.element_type == "tuple" else (shape,)):
            if s.is_array():
                n = s.num_elements()
                if best is None or n > best:
                    best = n
    return 1 if best is None else best


def _cached_threads(inst, cache: CostCache) -> int:
    n = cache.threads.get(inst)
    if n is None:
        n = cache.threads[inst] = _threads(inst)
    return n


def run_time(inst, device: DeviceInfo = DEFAULT_DEVICE, cache: CostCache | None = None
             ) -> RunTime:
    if cache is not None:
        rt = cache.run_times.get(inst)
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
        cache.run_times[inst] = rt
    return rt


def fused_exec_time(producer, producer_rt: RunTime, consumer,
                    device: DeviceInfo = DEFAULT_DEVICE, cache: CostCache | None = None
                    ) -> float:
    """Time of ``consumer`` with ``producer`` fused into it."""
    cache = cache or CostCache()
    consumer_cost = cache.cost(consumer)
    utilization = 0.0
    producer_bytes_in_consumer = 0.0
    is_fusion = consumer.opcode == "fusion"
    i = 0
    for o in consumer.operands:
        if o is producer:
            utilization += cache.utilization(consumer, i)
            if is_fusion:
                producer_bytes_in_consumer += cache.param_read_bytes(consumer, i)
            else:
                producer_bytes_in_consumer += shape_bytes(producer.shape)
        i += 1
    producer_cost = cache.cost(producer)
    flops = consumer_cost.flops + 4 * consumer_cost.transcendentals + utilization * (
        producer_cost.flops + 4 * producer_cost.transcendentals)
    compute = _compute_time(device, flops, _cached_threads(consumer, cache))
    producer_in = producer_cost.bytes_read  # the producer's inputs, read instead
    other_reads = max(consumer_cost.bytes_read - producer_bytes_in_consumer, 0.0)
    read = _read_time(device, other_reads, other_reads) + \
        _read_time(device, producer_in, producer_in * max(utilization, 1e-9))
    write = consumer_cost.bytes_written / device.memory_bandwidth
    return _combine(compute, read + write)


def estimate_run_times(producer, consumers, multi_output: bool = False,
                       device: DeviceInfo = DEFAULT_DEVICE, cache: CostCache | None = None
                       ) -> tuple[float, float]:
    cache = cache or CostCache()
    producer_rt = run_time(producer, device, cache)
    unfused = KERNEL_LAUNCH_OVERHEAD * (len(consumers) + 1) + producer_rt.exec_time
    fused = KERNEL_LAUNCH_OVERHEAD * len(consumers)
    for consumer in consumers:
        unfused += run_time(consumer, device, cache).exec_time
        fused += fused_exec_time(producer, producer_rt, consumer, device, cache)
    if multi_output:
        fused += producer_rt.write_time
    return unfused, fused
