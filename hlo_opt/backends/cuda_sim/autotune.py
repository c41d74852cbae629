"""cuda-sim's autotuning candidates: launch configurations of the generated kernels, the
conv kernel's algorithms for the cuDNN convolution calls it takes and our gemm kernel's
tile configurations for the cuBLAS gemm calls (all variants of one instruction in one
translation unit: one host-compiler run, cached by content; run by the emulator straight
on the tuner's host buffers), and, for the gemm calls (first: the reference) and the
convolutions cuda-sim runs on the host, the host provider's candidates."""
from __future__ import annotations

import ctypes

from ...autotune.candidates import device_cache_key, measure_wall
from ...autotune.host_provider import HostProvider
from ...autotune.redzone import HostMemory
from ..cuda.launch_tuning import (LaunchCandidate, candidate_source, constants_in,
                                  kernel_variants, merged_kernels)
from ..cuda.target import target_device


class SimProvider:
    """Candidates for ``--autotune-provider=cuda-sim``."""

    name = "cuda-sim"

    def __init__(self, device_info=None, measure=None, debug: bool = True):
        self.memory = HostMemory()          # kernels get host addresses
        self.device_info = device_info or target_device()
        self.measure = measure or measure_wall
        self.debug = debug                  # bounds-checked kernels: an out-of-bounds read disqualifies
        self._host = HostProvider(self.measure)
        self._variants: dict = {}
        self._keep: list = []
        self._constants = constants_in(self.memory, self._keep)

    def device_key(self) -> str:
        d = self.device_info
        return "cuda-sim " + device_cache_key(d.compute_capability, d.core_count,
                                              d.clock_rate_ghz, d.memory_bandwidth,
                                              d.l2_cache_size)

    def _kernel_variants(self, inst):
        if inst not in self._variants:
            self._variants[inst] = kernel_variants(inst, self.device_info)
        return self._variants[inst]

    def kind_of(self, inst) -> str | None:
        kind = self._host.kind_of(inst)
        if kind is not None:
            return kind
        if inst.opcode == "fusion" and len(self._kernel_variants(inst)) > 1:
            return "fusion"
        return None

    def prepare(self, insts) -> None:
        """Every candidate kernel of ``insts`` compiled ahead, as many host-compiler runs
        at a time as there are cores: their first launches then find the libraries in
        the cache.  Best effort: a unit that does not compile fails at its first launch,
        as without this."""
        import os
        from .compiler import SimCompileError, compile_sim_many
        units = []
        for vs in map(self._kernel_variants, insts):
            if vs:
                code, kernels, _ = merged_kernels(vs)
                units.append((candidate_source(code), kernels))
        step = os.cpu_count() or 1
        if len(units) > 1:
            for i in range(0, len(units), step):
                try:
                    compile_sim_many(units[i:i + step], debug=self.debug)
                except SimCompileError:
                    pass

    def candidates(self, inst) -> list:
        vs = self._kernel_variants(inst)
        host_kind = self._host.kind_of(inst)
        if not vs and host_kind is not None:
            return self._host.candidates(inst)
        host = self._host.candidates(inst) if host_kind == "gemm" else []
        from .compiler import SimKernelError
        code, kernels, maps = merged_kernels(vs)
        lib: list = []

        def launch(name, k, addrs):
            if not lib:
                from .compiler import compile_sim
                lib.append(compile_sim(candidate_source(code), kernels, debug=self.debug))
            lib[0].launch(name, k.grid, k.block, k.fibered,
                          [ctypes.c_void_p(a) for a in addrs])
        return host + [LaunchCandidate(v, names, launch, ctypes.memmove, self._constants,
                                       errors=(SimKernelError,))
                       for v, names in zip(vs, maps)]


def autotune_provider(options=None):
    """The provider for ``options``' target (``--xla_gpu_target_config_filename``)."""
    return SimProvider(target_device(options=options) if options is not None else None)
