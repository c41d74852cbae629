"""The CUDA backend's autotuning candidates on a real device: launch configurations of
the generated kernels (all variants of one fusion in one NVRTC module, launched through
the driver straight on the tuner's redzone-guarded device buffers) and, for the cuBLAS
gemm custom calls, the algorithms cuBLASLt's heuristic offers (XLA's gemm-algorithm-
picker; ``selected_algorithm`` is the index into that list), timed with CUDA events
after a warm-up launch, and our gemm kernel's tile configurations (launched as the fusions'
variants are, keyed ``CandidateKey.other("triton:block_m=...")``: gemm-algorithm-picker
writes the winner back as the call's ``triton_gemm_config``, and the runtime then
launches that kernel instead of calling cuBLASLt); without cuBLASLt only the tiles.

Convolutions (the cuDNN custom calls the conv kernel takes) offer the kernel's
algorithms (``conv.ALGORITHMS``), one launch each on the same buffers, keyed
``CandidateKey.cudnn(algo_id)``, then, where cuDNN loads and takes the call's
:class:`~.conv_plan.ConvPlan`, cuDNN's engines (the heuristics' first
``MAX_CUDNN_ENGINES`` that build), keyed as XLA's frontend algorithms
(``algo_id`` = the engine id, ``is_cudnn_frontend``, ``tuning_knobs``) with the engine's
workspace as the candidate's scratch: ``gpu-conv-algorithm-picker`` writes the winner
into ``cudnn_conv_backend_config.algorithm`` and the runtime runs that engine, or the
kernel when a kernel algorithm won.  Without a driver or device, :func:`autotune_provider`
returns None and the caller compiles deviceless.
"""
from __future__ import annotations

from ...autotune.candidates import device_cache_key
from ...autotune.kinds import default_kind_of
from ...autotune.redzone import DeviceMemory
from ...errors import HloError
from .buffer_kernels import cuda_buffer_kernels
from .launch_tuning import (LaunchCandidate, candidate_source, constants_in, kernel_variants,
                            merged_kernels)

MAX_CUDNN_ENGINES = 4   # each engine a build (runtime-compiled ones take ~1 s)


class CudaProvider:
    name = "cuda"

    def __init__(self, dev):
        self.dev = dev
        self.memory = DeviceMemory(dev, cuda_buffer_kernels(dev))
        self.device_info = dev.device_info()
        self._variants: dict = {}
        self._keep: list = []
        self._constants = constants_in(self.memory, self._keep)
        self._lt = None
        self._dnn = None

    def device_key(self) -> str:
        d = self.device_info
        return device_cache_key(d.compute_capability, d.core_count, d.clock_rate_ghz,
                                d.memory_bandwidth, d.l2_cache_size)

    def _kernel_variants(self, inst):
        if inst not in self._variants:
            self._variants[inst] = kernel_variants(inst, self.device_info)
        return self._variants[inst]

    def kind_of(self, inst) -> str | None:
        if inst.opcode == "fusion" and len(self._kernel_variants(inst)) > 1:
            return "fusion"
        kind = default_kind_of(inst)
        if kind == "conv" and self._kernel_variants(inst):
            return "conv"
        if kind == "gemm" and (self._gemm(inst) is not None or self._kernel_variants(inst)):
            return "gemm"
        return None

    def _gemm(self, inst):
        """(cuBLASLt, the call's GemmPlan) when cuBLASLt can run it, else None."""
        from .gemm_plan import gemm_plan
        plan = gemm_plan(inst)
        if plan is None:
            return None
        if self._lt is None:   # no nvmath-python / cuBLAS: the tiles only
            from . import new_cublaslt, load_library
            self._lt = load_library(new_cublaslt, self.dev)[0] or False
        return (self._lt, plan) if self._lt else None

    def _cudnn(self):
        """cuDNN convolutions on this device, or None (no frontend / libcudnn)."""
        if self._dnn is None:   # no frontend / libcudnn: the kernel's algorithms only
            from . import new_cudnn, load_library
            self._dnn = load_library(new_cudnn, self.dev)[0] or False
        return self._dnn or None

    def _cudnn_candidates(self, inst) -> list:
        import dataclasses
        from .conv_plan import conv_plan
        plan = conv_plan(inst)
        conv = self._cudnn() if plan is not None else None
        if conv is None:
            return []
        plan = dataclasses.replace(plan, engine=None)
        try:
            engines = conv.engines(plan, limit=MAX_CUDNN_ENGINES)
        except Exception:  # noqa: BLE001 - cuDNN does not take this graph
            return []
        return [CudnnConvCandidate(conv, plan, *e) for e in engines]

    def candidates(self, inst) -> list:
        out = []
        gemm = self._gemm(inst) if default_kind_of(inst) == "gemm" else None
        if gemm is not None:
            lt, plan = gemm
            try:
                count = lt.algorithm_count(plan)
            except Exception:  # noqa: BLE001 - cuBLASLt has no algorithm: the tiles only
                count = 0
            out = [GemmCandidate(lt, plan, i) for i in range(count)]
        if self._kernel_variants(inst):
            out += self._launch_candidates(inst, self._kernel_variants(inst))
            if inst.opcode == "custom-call" and default_kind_of(inst) != "gemm":
                out += self._cudnn_candidates(inst)
        return out

    def prepare(self, insts) -> None:
        """Every candidate kernel of ``insts`` compiled at once, NVRTC on a thread per
        instruction (XLA compiles autotuning candidates on a thread pool): their first
        launches then read the compile cache.  Best effort: a source that does not compile
        fails at its first launch, as without this."""
        from .compiler import compile_cuda_parts
        sources = [candidate_source(merged_kernels(vs)[0])
                   for vs in map(self._kernel_variants, insts) if vs]
        if len(sources) > 1:
            try:
                compile_cuda_parts(sources, self.dev.arch, "autotune")
            except HloError:
                pass

    def _launch_candidates(self, inst, vs) -> list:
        from .compiler import compile_cuda
        from .driver import CudaDriverError
        code, _, maps = merged_kernels(vs)
        loaded: list = []

        def launch(name, k, addrs):
            if not loaded:
                mod = compile_cuda(candidate_source(code), self.dev.arch,
                                   name=f"autotune_{inst.name}.cu")
                loaded.append(self.dev.load_module(mod.cubin))
            self.dev.launch_function(loaded[0].function(name), k.grid, k.block, addrs)
        return [LaunchCandidate(v, names, launch, self.dev.copy, self._constants,
                                errors=(CudaDriverError,))
                for v, names in zip(vs, maps)]

    def measure(self, run, max_iters: int = 10, threshold: float = 0.05) -> float:
        """Warm up, then event-timed runs until one is within 5% of the best."""
        from .driver import EventTimer
        run()
        self.dev.sync()
        timer = EventTimer(self.dev)
        best = float("inf")
        for _ in range(max_iters):
            timer.start()
            run()
            dt = timer.stop()
            old, best = best, min(best, dt)
            if old != float("inf") and abs(dt - old) / max(old, 1e-12) < threshold:
                break
        return best


class GemmCandidate:
    """cuBLASLt's ``index``-th heuristic algorithm for a gemm call, on the tuner's buffers
    (inputs: the call's operands; outputs: its value, the aux output of an ``*_AUX``
    epilogue, then the workspace)."""

    scratch_bytes = 0   # cuBLASLt's workspace is its own

    def __init__(self, lt, plan, index: int):
        import dataclasses
        from ...autotune.results import CandidateKey
        self.lt = lt
        self.plan = dataclasses.replace(plan, algorithm=index)
        self.key = CandidateKey.gemm(index)
        self.name = f"cublaslt-algorithm-{index}"

    def run(self, inputs, outputs, scratch) -> None:
        from ...autotune.candidates import CandidateError
        p = self.plan
        try:
            self.lt.run(p, *p.pointers(lambda i: inputs[i].address, outputs[0].address,
                                       outputs[1].address if p.aux else None))
        except Exception as e:  # noqa: BLE001 - cuBLAS refused this algorithm here
            raise CandidateError(f"{self.name}: {type(e).__name__}: {e}") from None


class CudnnConvCandidate:
    """cuDNN's engine at plan ``index`` for a convolution call, on the tuner's buffers
    (inputs: the call's operands; outputs: its value, then the scratch), the tuner's
    scratch buffer as its workspace."""

    def __init__(self, conv, plan, index: int, engine: int, knobs: tuple, workspace: int):
        from ...autotune.results import CandidateKey
        self.conv, self.plan, self.index = conv, plan, index
        extra = {"tuning_knobs": tuple(knobs)} if knobs else {}
        self.key = CandidateKey.cudnn(engine, is_cudnn_frontend=True, **extra)
        self.name = f"cudnn-engine-{engine}" + "".join(f",{k}={v}" for k, v in knobs)
        self.scratch_bytes = int(workspace)

    def run(self, inputs, outputs, scratch) -> None:
        from ...autotune.candidates import CandidateError
        try:
            self.conv.run(self.plan, [b.address for b in inputs], outputs[0].address,
                          index=self.index,
                          workspace=scratch.address if scratch is not None else None)
        except Exception as e:  # noqa: BLE001 - cuDNN refused this engine here
            raise CandidateError(f"{self.name}: {type(e).__name__}: {e}") from None



def autotune_provider(options=None):
    """A provider on device 0, or None when there is no driver / device."""
    try:
        from .driver import CudaDriverError, probe
        from .toolchain import MissingToolError
    except ImportError:
        return None
    try:
        return CudaProvider(probe())
    except (CudaDriverError, MissingToolError):
        return None
