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


def load_library(factory, dev):
    """(``factory(dev)``, None), or (None, why it did not load: a missing package, library
    or driver; the thunks then run as our kernels or on the host)."""
    try:
        return factory(dev), None
    except Exception as e:  # noqa: BLE001 - any failure to load is a fallback, said once
        return None, f"{type(e).__name__}: {str(e)[:200]}"


def new_cublaslt(dev):
    from .cublaslt import CublasLt
    return CublasLt(dev)


def new_cudnn(dev):
    from .cudnn_conv import CudnnConv
    return CudnnConv(dev)


class CudaDeviceAdapter:
    """The runtime's device protocol over the driver, with the module's kernels."""

    def __init__(self, dev, loaded, libs=None):
        """``libs``: libraries loaded already (name -> (object or None, why not))."""
        self.d = dev
        self.mod = loaded
        self._kernel_only: set = set()   # conv steps cuDNN refused (the kernel runs them)
        self.name = f"cuda ({dev.name})"
        self._libs: dict = {}
        self.library_errors: dict = {}
        for name, (lib, why) in (libs or {}).items():
            self._keep(name, lib, why)
        for m in ("alloc", "upload", "download", "copy", "memset", "sync", "begin_capture",
                  "end_capture", "launch_graph"):
            setattr(self, m, getattr(dev, m))

    def launch(self, k, addrs) -> None:
        self.d.launch_function(self.mod.function(k.name), k.grid, k.block, addrs)

    def cublaslt(self):
        """cuBLASLt on this device, or None when nvmath-python (or cuBLAS) is missing."""
        return self._load("cublaslt", new_cublaslt)

    def _load(self, name: str, factory):
        """A library object (``factory(driver device)``), loaded once, or None when it
        cannot load (why kept in ``library_errors``)."""
        if name not in self._libs:
            self._keep(name, *load_library(factory, self.d))
        return self._libs[name]

    def _keep(self, name, lib, why) -> None:
        self._libs[name] = lib
        if why:
            self.library_errors[name] = why

    def cufft(self):
        """cuFFT on this device, or None (nvmath-python or libcufft missing)."""
        from .cufft import Cufft
        return self._load("cufft", Cufft)

    def solvers(self):
        """cuSOLVER + cuBLAS on this device, or None (nvmath-python or a library missing)."""
        from .cusolver import Solvers
        return self._load("solvers", Solvers)

    def cudnn(self):
        """cuDNN convolutions on this device, or None when the frontend (or libcudnn)
        is missing."""
        return self._load("cudnn", new_cudnn)

    def cudnn_conv(self, runner, thunk, frame) -> bool:
        """A convolution launch through cuDNN (its ``spec`` plan); False when the kernel
        must run it instead (recorded once per step in ``library_fallbacks``)."""
        st = thunk.step
        if st.name in self._kernel_only:
            return False
        conv = self.cudnn()
        why = None if conv is not None else \
            f"cuDNN unavailable: {self.library_errors.get('cudnn', 'not loaded')}"
        if conv is not None and runner._capturing and not conv.ready(thunk.spec):
            return False  # nothing may be built or allocated in a capture: the kernel
        if conv is not None:
            try:
                conv.run(thunk.spec, [runner.addr(sl, frame) for sl in st.input_slices],
                         runner.addr(st.output_slices[0], frame))
            except Exception as e:  # noqa: BLE001 - a graph cuDNN refused, a gone engine
                if runner._capturing:
                    raise  # the capture is void: the runner drops graphs and reruns
                why = f"cuDNN: {type(e).__name__}: {str(e)[:300]}"
        if why is not None:
            self._kernel_only.add(st.name)
            runner.p.library_fallbacks.append((st.name, f"{why}; the conv kernel runs it"))
            return False
        for sl in st.output_slices[1:]:  # cuDNN's scratch output: zeros, as the kernel's
            if sl.size:
                self.d.memset(runner.addr(sl, frame), sl.size)
        return True

    def library_call(self, runner, thunk, frame) -> None:
        from .libraries import run_library_call
        run_library_call(self, runner, thunk, frame)

    def timer(self):
        from .driver import EventTimer
        return EventTimer(self.d)


class CudaExecutable:
    name = "cuda"

    def __init__(self, module, debug_options=None, cache: bool = True, config=None,
                 prepare=None, prepare_key=None):
        """``prepare``: the pipeline the run command asks for (module -> module), run here
        after the driver probe so that a missing device fails before any pass runs."""
        from .driver import probe
        from .gemm_plan import has_gemms
        from .program import build_program, full_source
        dev = probe()
        if prepare is not None:
            module = prepare(module)
        self.module = module
        self.device = dev
        self.device_info = dev.device_info()
        # with cuBLASLt, gemms need no kernel of ours unless tuned to one
        libs = {"cublaslt": load_library(new_cublaslt, dev)} if has_gemms(module) else {}
        lt = libs.get("cublaslt", (None,))[0]
        self.program = build_program(module, self.device_info, config, gemm_kernels=not lt)
        self.source = full_source(self.program)
        parts, self.compiled = compile_program(self.program, dev.arch, debug_options, cache)
        self.cache_hit = self.compiled.cached
        if debug_options is not None and getattr(debug_options, "xla_dump_to", ""):
            dump(module, debug_options, self.program, self.compiled)
        self.adapter = CudaDeviceAdapter(dev, load_parts(dev, parts), libs)
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


def dump(module, options, program, compiled=None) -> None:
    """XLA:GPU's dump files under ``--xla_dump_to``: ``module_NNNN.NAME.ptx``, our
    ``module_NNNN.NAME.cu`` and ``...gpu_after_optimizations-buffer-assignment.txt``."""
    from ...dump.naming import filename_for
    from ...dump.writer import DumpConfig, DumpDirectory
    config = DumpConfig.from_options(options)
    if not config.should_dump_module(module.name):
        return
    directory = DumpDirectory(config)
    files = [("cu", program.source),
             ("gpu_after_optimizations-buffer-assignment.txt",
              program.mplan.assignment.to_text() + "\n")]
    if compiled is not None:
        files.insert(0, ("ptx", compiled.ptx))
    for suffix, text in files:
        directory.write_text(filename_for(0, module.name, "", suffix), text, stdout_ok=False)


def compile(module, **options):  # noqa: A001 - the backends' verb
    return CudaExecutable(module, **options)


def compile_program(prog, arch: str, options=None, use_cache: bool = True):
    """([(CompiledModule, kernel names)] per part, the parts merged): one translation unit,
    or ``compilation_parts(options)`` compiled in parallel."""
    from .compiler import compilation_parts, compile_cuda_parts, merged
    from .program import split_sources
    split = split_sources(prog, compilation_parts(options))
    mods = compile_cuda_parts([src for src, _ in split], arch, prog.module.name, use_cache)
    return list(zip(mods, [names for _, names in split])), merged(mods)


def load_parts(dev, parts):
    """The compiled parts loaded on ``dev``: one module, or one per part looked up by
    kernel name."""
    from .driver import LoadedModules
    if len(parts) == 1:
        return dev.load_module(parts[0][0].cubin)
    return LoadedModules([dev.load_module(m.cubin) for m, _ in parts],
                         [names for _, names in parts])


def deviceless(module, options=None, config=None):
    """(program, CompiledModule) for the gpu_specs target (Hopper by default)."""
    from .program import build_program
    info = target_device(module, options)
    prog = build_program(module, info, config)
    return prog, compile_program(prog, arch_of(info), options)[1]
