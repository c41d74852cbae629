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
    shapes = [inst.shape]
    if inst.opcode == "fusion":
        root = inst.fused_computation.root
        shapes = [o.shape for o in root.operands] if root.opcode == "tuple" else [root.shape]
        if inst.attrs.get("kind") == "kInput":
            shapes += [p.shape for p in inst.fused_computation.parameters]
    elif inst.opcode in ("reduce", "reduce-window", "scatter", "sort"):
        shapes += [o.shape for o in inst.operands]
    return max((s.num_elements() for shape in shapes for s in shape.leaves() if s.is_array()),
               default=1)


def run_time(inst, device: DeviceInfo = DEFAULT_DEVICE, cache: CostCache | None = None
             ) -> RunTime:
    if cache is not None:
        rt = cache.run_times.get(inst)
        if rt is not None:
            return rt
    cost = (cache or CostCache()).cost(inst)
    compute = _compute_time(device, cost.flops + 4 * cost.transcendentals, _threads(inst))
    read = _read_time(device, cost.bytes_read, cost.bytes_read)
    write = cost.bytes_written / device.memory_bandwidth
    rt = RunTime(_combine(compute, read + write), compute, read, write)
    if cache is not None:
        cache.run_times[inst] = rt
    return rt


def _producer_read_bytes(producer, cache: CostCache) -> float:
    return cache.cost(producer).bytes_read


def fused_exec_time(producer, producer_rt: RunTime, consumer,
                    device: DeviceInfo = DEFAULT_DEVICE, cache: CostCache | None = None
                    ) -> float:
    """Time of ``consumer`` with ``producer`` fused into it."""
    cache = cache or CostCache()
    consumer_cost = cache.cost(consumer)
    utilization = 0.0
    producer_bytes_in_consumer = 0.0
    for i, o in enumerate(consumer.operands):
        if o is producer:
            utilization += cache.utilization(consumer, i)
            if consumer.opcode == "fusion":
                producer_bytes_in_consumer += fusion_param_read_bytes(
                    consumer.fused_computation.parameters[i])
            else:
                producer_bytes_in_consumer += shape_bytes(producer.shape)
    producer_cost = cache.cost(producer)
    flops = consumer_cost.flops + 4 * consumer_cost.transcendentals + utilization * (
        producer_cost.flops + 4 * producer_cost.transcendentals)
    compute = _compute_time(device, flops, _threads(consumer))
    producer_in = _producer_read_bytes(producer, cache)
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
