"""``--backend cuda-sim``: the CUDA backend's kernels, compiled by the host C++ compiler
against an emulation header (``emu.h``) and run on the CPU with CUDA's semantics
(barriers, warp shuffles, shared memory, atomics; bounds-checked buffer accesses).
Gemms run as their NVRTC-path kernel (``gemm_emitter.py``: cuda-sim has no cuBLASLt); other
library calls run on the host, as the interpreter does them."""
from __future__ import annotations

from ..cuda.target import target_device


class SimExecutable:
    name = "cuda-sim"

    def __init__(self, module, debug_options=None, cache: bool = True, debug: bool = True,
                 config=None, device_info=None, program=None, library=None, prepare=None,
                 prepare_key=None):
        """``program``/``library``: built beforehand (``compile_batch``); ``prepare``: the
        pipeline the run command asks for (module -> module)."""
        from ..cuda.program import build_program, full_source
        from .compiler import compile_sim
        from .device import SimDevice
        if prepare is not None:
            module = prepare(module)
        self.module = module
        self.device_info = device_info or target_device(module, debug_options)
        self.program = program or build_program(module, self.device_info, config)
        if debug_options is not None and getattr(debug_options, "xla_dump_to", ""):
            from ..cuda import dump
            dump(module, debug_options, self.program)
        if library is None:
            kernels = [(k.name, [t for t, _, _ in k.params]) for k in self.program.kernels]
            library = compile_sim(full_source(self.program), kernels, debug=debug)
        self.library = library
        self.device = SimDevice(self.library)
        self._runner = None

    def runner(self, profile: bool = False):
        from ..cuda.runtime import Runner
        if self._runner is None or self._runner.profile != profile:
            self._runner = Runner(self.program, self.device, profile)
        return self._runner

    def run(self, args):
        return self.runner().run(args)

    def profile(self, args, iterations: int = 1):
        r = self.runner(profile=True)
        r.times.clear()
        for _ in range(iterations):
            r.run(args)
        return r.profile_rows()


def compile_batch(programs, parts: int = 2, debug: bool = True):
    """Executables for several programs (built with one shared ``names`` set) from a few
    host-compiler runs in parallel (the tests compile every corpus module this way: two
    big translation units instead of ~400 small ones)."""
    from ..cuda.program import combined_source
    from .compiler import compile_sim_many
    parts = max(1, min(parts, len(programs)))
    groups = [programs[i::parts] for i in range(parts)]
    units = [(combined_source(g), [(k.name, [t for t, _, _ in k.params])
                                   for p in g for k in p.kernels]) for g in groups if g]
    libs = compile_sim_many(units, debug=debug)
    out = {}
    for g, lib in zip([g for g in groups if g], libs):
        for p in g:
            out[id(p)] = SimExecutable(p.module, program=p, library=lib)
    return [out[id(p)] for p in programs]


def compile(module, **options):  # noqa: A001 - the backends' verb
    return SimExecutable(module, **options)
