"""What a backend hands the autotuner: candidates, and a provider that makes them.

A *candidate* is one way to compute an instruction (a cuBLAS algorithm, an NVRTC gemm
tile configuration, a cuDNN engine, a launch configuration): given the input and output
buffers (and scratch, if it asks for any) it runs once.  The *provider* belongs to a
backend (``cuda``, ``cuda-sim``, the host provider in :mod:`.host_provider`); it says
which instructions it can tune, lists their candidates in a fixed order (the first is
the backend's heuristic choice, what level 0 leaves in place), owns the memory buffers
live in, and times a run.  The core never imports a backend.
"""
from __future__ import annotations

import time
from typing import Callable, Protocol, Sequence

from .redzone import Buffer, Memory
from .results import CandidateKey


class CandidateError(Exception):
    """A candidate cannot run this instruction (recorded as DISQUALIFIED)."""


class Candidate(Protocol):
    key: CandidateKey
    name: str
    scratch_bytes: int

    def run(self, inputs: Sequence[Buffer], outputs: Sequence[Buffer],
            scratch: Buffer | None) -> None: ...


class CandidateProvider(Protocol):
    name: str
    memory: Memory

    def device_key(self) -> str:
        """The device part of a cache key (XLA's DeviceDescriptionToCacheKey)."""

    def kind_of(self, instruction) -> str | None:
        """"gemm", "conv" or "fusion" when this provider can tune it, else None."""

    def candidates(self, instruction) -> list[Candidate]: ...

    def measure(self, run: Callable[[], None]) -> float:
        """Seconds one execution of ``run`` takes (after a warm-up run)."""


def measure_wall(run: Callable[[], None], clock=time.perf_counter, max_iters: int = 10,
                 threshold: float = 0.05) -> float:
    """Warm up once, then time runs until one lands within ``threshold`` of the best so
    far (at most ``max_iters``): the loop XLA's conv picker uses.  Returns the best."""
    run()
    best = float("inf")
    for _ in range(max_iters):
        t0 = clock()
        run()
        dt = clock() - t0
        old, best = best, min(best, dt)
        if old != float("inf") and abs(dt - old) / max(old, 1e-12) < threshold:
            break
    return best


def device_cache_key(cc: tuple[int, int], cores: int, clock_ghz: float,
                     bandwidth_bytes_s: float, l2_bytes: int) -> str:
    """XLA's ``AutotuneCacheKey::DeviceDescriptionToCacheKey`` for a CUDA device."""
    bw = round(bandwidth_bytes_s / 1e9)
    l2 = l2_bytes / (1 << 20)
    return (f"CUDA: {cc[0]}.{cc[1]}, Cores: {cores}, GPU clock: {_num(clock_ghz)} GHz, "
            f"Memory bandwidth: {_num(bw)} GB/s, L2 cache: {_num(l2)} MB")


def _num(x) -> str:
    """absl::StrCat's %g-like shortest form (6 significant digits)."""
    return f"{x:.6g}"
