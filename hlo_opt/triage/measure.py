"""Compile a module on a backend, run it on seeded inputs, time it, count its kernels.

Backends are reached through :func:`hlo_opt.backends.compile` only, so any backend name
works.  What an executable may offer beyond ``run(args)`` is used where present:

- ``kernel_count`` (an int, or a method returning one), or ``program.kernels`` (the cuda
  backend's kernel list): the kernels it launches; else the kernels are counted from the
  optimized module (fusions, library calls and other data-moving instructions:
  :func:`hlo_opt.analysis.cost.kernel_breakdown`);
- ``device_name`` (str) or ``device_info.name``: the device it runs on; else the backend
  and the host's CPU;
- ``run_profiled(args) -> (outputs, seconds)``, or the cuda backend's ``profile(args,
  iterations) -> rows`` (``time_us`` per call, ``calls``): the kernel time of one run
  (``--profile`` times kernels instead of the whole call).

Bytes moved always come from the cost model (:func:`hlo_opt.analysis.cost.module_cost`).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import platform
import socket
import statistics
import time
from dataclasses import dataclass, field

from ..errors import HloError

__all__ = ["Measurement", "host_name", "machine_of", "measure", "median", "spread",
           "text_digest"]


@dataclass
class Measurement:
    times_s: list[float]
    kernels: int
    bytes: float
    host: str
    device: str
    outputs: list = field(default_factory=list, repr=False)  # of the first timed run
    pair_times_s: list[float] = field(default_factory=list)  # the paired baseline's

    @property
    def time_s(self) -> float:
        return median(self.times_s)


def median(values) -> float:
    return float(statistics.median(values)) if values else float("nan")


def spread(values) -> float:
    """(max - min) / median: the relative width of the times (0 for one run)."""
    if len(values) < 2:
        return 0.0
    m = median(values)
    return (max(values) - min(values)) / m if m > 0 else 0.0


def text_digest(module) -> str:
    """A digest of the module's canonical text, equal across processes and machines."""
    return hashlib.sha256(module.to_text().encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def host_name() -> str:
    return socket.gethostname() or "localhost"


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def machine_of(executable, backend: str) -> tuple[str, str]:
    """(host name, device name) of a compiled executable."""
    device = getattr(executable, "device_name", None)
    if callable(device):
        device = device()
    if not device:
        device = getattr(getattr(executable, "device_info", None), "name", None)
    return host_name(), str(device) if device else f"{backend} on {_cpu_model()}"


def _kernel_count(executable, module) -> int:
    count = getattr(executable, "kernel_count", None)
    if callable(count):
        count = count()
    if isinstance(count, int):
        return count
    kernels = getattr(getattr(executable, "program", None), "kernels", None)
    if isinstance(kernels, (list, tuple)):
        return len(kernels)
    from ..analysis.cost import kernel_breakdown
    return kernel_breakdown(module)["kernels"]


def measure(module, backend: str, args, repeat: int = 1, warmup: int = 0,
            profile: bool = False, lock=None, pair=None) -> Measurement:
    """Compile ``module`` on ``backend`` and run it ``warmup`` + ``repeat`` times on
    ``args``; the times of the ``repeat`` timed runs.  ``lock`` (a lock shared by
    concurrent workers) is held over the runs, so that timed runs never overlap while
    compiles do.  ``pair`` (another executable, the baseline's) is run alternately with
    this one, first or second by turns, so both see the same machine load
    (``pair_times_s``).  Compile and run errors propagate (HloError for a user's module
    or backend, anything else for a bug)."""
    from ..analysis.cost import module_cost
    from ..backends import compile as compile_module
    executable = compile_module(module, backend)
    profiled = getattr(executable, "run_profiled", None) or \
        getattr(executable, "profile", None)
    if profile and profiled is None:
        raise HloError(f"backend '{backend}' has no profile data (--profile needs an "
                       "executable with run_profiled)")
    with lock if lock is not None else _NO_LOCK:
        outputs, times, pair_times = _runs(executable, args, repeat, warmup, profile, pair)
    host, device = machine_of(executable, backend)
    return Measurement(times, _kernel_count(executable, module),
                       float(module_cost(module).bytes_accessed), host, device,
                       list(outputs or []), pair_times)


_NO_LOCK = contextlib.nullcontext()


def _timed(executable, args, profile: bool):
    if profile:
        profiled = getattr(executable, "run_profiled", None)
        if profiled is not None:
            result, seconds = profiled(args)
        else:  # profile rows: per-call microseconds and calls of each kernel, one run
            rows = executable.profile(args, 1)
            result = None
            seconds = sum(r["time_us"] * r["calls"] for r in rows) * 1e-6
    else:
        start = time.perf_counter()
        result = executable.run(args)
        seconds = time.perf_counter() - start
    return result, float(seconds)


def _runs(executable, args, repeat, warmup, profile, pair):
    outputs = None
    for _ in range(warmup):
        executable.run(args)
        if pair is not None:
            pair.run(args)
    times, pair_times = [], []
    for i in range(repeat):
        if pair is not None and i % 2 == 0:
            pair_times.append(_timed(pair, args, profile)[1])
        result, seconds = _timed(executable, args, profile)
        times.append(seconds)
        if pair is not None and i % 2 == 1:
            pair_times.append(_timed(pair, args, profile)[1])
        if outputs is None:
            outputs = result if result is not None else executable.run(args)
    return outputs, times, pair_times
