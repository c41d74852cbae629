"""``--backend cuda-sim``: the CUDA backend's kernels, compiled by the host C++ compiler
against an emulation header (``emu.h``) and run on the CPU with CUDA's semantics
(barriers, warp shuffles, shared memory, atomics; bounds-checked buffer accesses).
Library calls run on the host, as the interpreter does them."""
from __future__ import annotations

from ..cuda.target import target_device


class SimExecutable:
    name = "cuda-sim"

    def __init__(self, module, debug: bool = True, config=None, device_info=None):
        from ..cuda.program import build_program, full_source
        from .compiler import compile_sim
        from .device import SimDevice
        self.module = module
        self.device_info = device_info or target_device(module)
        self.program = build_program(module, self.device_info, config)
        kernels = [(k.name, [t for t, _, _ in k.params]) for k in self.program.kernels]
        self.library = compile_sim(full_source(self.program), kernels, debug=debug)
        self.device = SimDevice(self.library)
        self._runner = None

    def runner(self, profile: bool = False):
        from ..cuda.runtime import Runner
        if self._runner is None or self._runner.profile != profile:
            self._runner = Runner(self.program, self.device, profile)
        return self._runner

    def run(self, args):
        return self.runner().run(args)


def compile(module, **options):  # noqa: A001 - the backends' verb
    return SimExecutable(module, **options)
