"""``--backend cuda``: the kernel plan rendered as CUDA C++, compiled by NVRTC to CUBIN
for the device's exact ``sm_XX``, launched through cuda-python's driver bindings.

    exe = hlo_opt.backends.compile(module, "cuda")   # probes the driver once
    outs = exe.run(args)                              # numpy in, numpy out
    exe.profile(args)                                 # per-thunk device times

Without a device, ``build_program`` + ``compile_cuda`` still give the ``.cu`` and the PTX
(``--platform=gpu --stage=cuda|ptx``), for sm_90 unless a gpu_specs file says otherwise.
"""
from __future__ import annotations

from .target import arch_of, target_device


class CudaDeviceAdapter:
    """The runtime's device protocol over the driver, with the module's kernels."""

    def __init__(self, dev, loaded, libraries=None):
        self.d = dev
        self.mod = loaded
        self.libraries = libraries
        self.name = f"cuda ({dev.name})"
        for m in ("alloc", "upload", "download", "copy", "sync", "begin_capture",
                  "end_capture", "launch_graph"):
            setattr(self, m, getattr(dev, m))

    def launch(self, k, addrs) -> None:
        self.d.launch_function(self.mod.function(k.name), k.grid, k.block, addrs)

    def library_call(self, runner, thunk, frame) -> None:
        from .libraries import run_library_call
        run_library_call(self, runner, thunk, frame)

    def timer(self):
        from .driver import EventTimer
        return EventTimer(self.d)


class CudaExecutable:
    name = "cuda"

    def __init__(self, module, config=None):
        from .compiler import compile_cuda
        from .driver import probe
        from .program import build_program, full_source
        self.module = module
        dev = probe()
        self.device = dev
        self.device_info = dev.device_info()
        self.program = build_program(module, self.device_info, config)
        self.source = full_source(self.program)
        self.compiled = compile_cuda(self.source, dev.arch, name=f"{module.name}.cu")
        self.adapter = CudaDeviceAdapter(dev, dev.load_module(self.compiled.cubin))
        self._runners: dict = {}

    def runner(self, profile: bool = False):
        from .runtime import Runner
        r = self._runners.get(profile)
        if r is None:
            r = self._runners[profile] = Runner(self.program, self.adapter, profile)
        return r

    def run(self, args):
        return self.runner().run(args)

    def profile(self, args, iterations: int = 1):
        r = self.runner(profile=True)
        r.times.clear()
        for _ in range(iterations):
            r.run(args)
        return r.profile_rows()


def compile(module, **options):  # noqa: A001 - the backends' verb
    return CudaExecutable(module, **options)


def deviceless(module, options=None, config=None):
    """(program, CompiledModule) for the gpu_specs target (Hopper by default)."""
    from .compiler import compile_cuda
    from .program import build_program, full_source
    info = target_device(module, options)
    prog = build_program(module, info, config)
    return prog, compile_cuda(full_source(prog), arch_of(info), name=f"{module.name}.cu")
