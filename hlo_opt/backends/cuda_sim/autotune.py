"""cuda-sim's autotuning candidates: launch configurations of the generated kernels
(compiled by g++ against the emulation header, run on host memory), and, for the gemm
and convolution library calls cuda-sim runs on the host, the host provider's candidates.

All variants of one fusion go into one translation unit (one host-compiler run, cached
by content); each candidate launches its kernels straight on the autotuner's buffers:
parameter slices are the input buffers, the root slices the output buffers, any other
arena slice lies in the candidate's scratch buffer (redzone-guarded like the rest).
"""
from __future__ import annotations

import ctypes
import re

from ...autotune.candidates import CandidateError, device_cache_key, measure_wall
from ...autotune.host_provider import HostProvider
from ...autotune.redzone import HostMemory
from ...autotune.results import CandidateKey
from ..cuda.launch_tuning import config_name, variants
from ..cuda.target import target_device


class LaunchCandidate:
    def __init__(self, variant, library_ref, rename: dict, constants):
        self.variant = variant
        self.name = config_name(variant.config)
        self.key = CandidateKey.other(self.name)
        self.scratch_bytes = variant.program.arena_size
        self._lib = library_ref          # [SimLibrary] filled on first run
        self._rename = rename            # kernel name -> name in the shared library
        self._constants = constants

    def run(self, inputs, outputs, scratch) -> None:
        from ..cuda_sim.compiler import SimKernelError
        prog = self.variant.program
        lib = self._lib[0]()
        roots = {sl: out.address for sl, out in zip(prog.entry.root_slices, outputs)}
        consts = self._constants(prog)

        def addr(sl) -> int:
            if sl in roots:
                return roots[sl]
            if sl.kind == "param":
                return inputs[sl.index].address
            if sl.kind == "const":
                return consts[sl.index]
            if scratch is None:
                raise CandidateError(f"{self.name}: arena slice {sl} without scratch")
            return scratch.address + sl.offset
        for t in prog.entry.thunks:
            if t.kind == "launch":
                k = t.kernel
                try:
                    lib.launch(self._rename[k.name], k.grid, k.block, k.fibered,
                               [ctypes.c_void_p(addr(s)) for s in t.args])
                except SimKernelError as e:
                    raise CandidateError(str(e)) from None
            elif t.kind == "copy":
                dst, src = addr(t.args[0]), addr(t.args[1])
                if dst != src and t.nbytes:
                    ctypes.memmove(dst, src, t.nbytes)
            else:
                raise CandidateError(f"{self.name}: cannot run a {t.kind} thunk")


class SimProvider:
    """Candidates for ``--autotune-provider=cuda-sim`` (and the cuda-sim backend)."""

    name = "cuda-sim"

    def __init__(self, device_info=None, measure=None, debug: bool = False):
        self.memory = HostMemory()          # kernels get host addresses
        self.device_info = device_info or target_device()
        self.measure = measure or measure_wall
        self.debug = debug                  # bounds-checked kernels (slower)
        self._host = HostProvider(self.measure)
        self._variants: dict = {}
        self._keep: list = []

    def device_key(self) -> str:
        d = self.device_info
        return "cuda-sim " + device_cache_key(d.compute_capability, d.core_count,
                                              d.clock_rate_ghz, d.memory_bandwidth,
                                              d.l2_cache_size)

    def _fusion_variants(self, inst):
        if inst not in self._variants:
            self._variants[inst] = variants(inst, self.device_info)
        return self._variants[inst]

    def kind_of(self, inst) -> str | None:
        kind = self._host.kind_of(inst)
        if kind is not None:
            return kind
        if inst.opcode == "fusion" and len(self._fusion_variants(inst)) > 1:
            return "fusion"
        return None

    def candidates(self, inst) -> list:
        if self._host.kind_of(inst) is not None:
            return self._host.candidates(inst)
        vs = self._fusion_variants(inst)
        lib: list = [None]
        renames = []
        kernels, codes = [], []
        for i, v in enumerate(vs):
            rename = {}
            for k in v.program.kernels:
                new = f"{k.name}__v{i}"
                rename[k.name] = new
                codes.append(re.sub(rf"\b{re.escape(k.name)}\b", new, k.code))
                kernels.append((new, [t for t, _, _ in k.params]))
            renames.append(rename)

        def library():
            if lib[0] is None:
                from ..cuda.program import prelude
                from .compiler import compile_sim
                lib[0] = compile_sim(prelude() + "\n" + "\n".join(codes), kernels,
                                     debug=self.debug)
            return lib[0]
        return [LaunchCandidate(v, [library], rename, self._constants)
                for v, rename in zip(vs, renames)]

    def _constants(self, program) -> list:
        """Addresses of the program's constants (uploaded once per program)."""
        cached = getattr(program, "_autotune_consts", None)
        if cached is not None:
            return cached
        from ..cuda.runtime import to_physical
        out = []
        for c in program.constants:
            data = to_physical(c.literal.array, c.shape) if c.shape.num_elements() else b""
            buf = self.memory.allocate(max(len(data), 16))
            self._keep.append(buf)
            if data:
                ctypes.memmove(buf.ctypes.data, data, len(data))
            out.append(buf.ctypes.data)
        program._autotune_consts = out
        return out


def autotune_provider(options=None):
    """The provider for ``options``' target (``--xla_gpu_target_config_filename``)."""
    return SimProvider(target_device(options=options) if options is not None else None)
