"""Module -> one CUDA C++ translation unit + thunks per computation (what runs, in order).

    prog = build_program(module, device)     # no GPU, no compiler needed
    prog.source                              # the .cu (--stage=cuda)
    prog.kernels                             # KernelSource per kernel (launch dims, params)
    prog.entry.thunks                        # Launch / Copy / HostCall / Gemm / While ...

Thunk kinds (XLA's thunks, in spirit):

* ``Launch``: one kernel, its arguments as buffer slices; a convolution's launch also
  carries its cuDNN graph (``spec``: a :class:`~.conv_plan.ConvPlan`), which the CUDA
  device runs instead where cuDNN loads and builds it (``CudaDeviceAdapter.cudnn_conv``),
  the kernel being the fallback (and what cuda-sim runs);
* ``Copy``: a device-to-device copy (in-place outputs whose input lives elsewhere);
* ``Library``: a gemm through cuBLASLt (``gemm_plan.py``) where nvmath-python is
  installed and the autotuner chose no tile configuration, else as our own kernel
  (``gemm_emitter.py``: the thunk's ``kernel`` and launch ``args``); an fft through cuFFT
  (``fft_plan.py``), a cholesky / triangular solve through cuSOLVER / cuBLAS
  (``solver_plan.py``); ``libraries.py`` runs them, on the host where a library is missing;
* ``HostCall``: an instruction no kernel or library covers yet (the library ops in layouts
  no plan maps, integer convolutions, s4/c64 element types, collectives ...; convolutions, sort /
  topk and scatter have kernels: ``LIBRARY_EMITTERS``), run by the interpreter on the
  host between device work;
* ``While`` / ``Conditional`` / ``Call``: host control flow around device thunks, reading
  the predicate back, or running a known trip count (XLA's ``WhileThunk``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...codegen import Control, Copy, ElementalUnsupported, Kernel, LibraryCall, make_plan
from ...errors import UnsupportedError
from . import gemm_fusion_kernel  # noqa: F401 - registers the triton_gemm emitter
from . import row_norm  # noqa: F401 - registers the row_normalization emitter
from .conv import emit_conv
from .conv_plan import conv_plan, kernel_selected
from .emitters import LaunchConfig, emit_kernel
from .gemm_emitter import config_of, emit_gemm
from .gemm_plan import GemmPlan
from .libraries import library_plan
from .scatter import emit_scatter
from .solver_plan import CholeskyPlan
from .sort import emit_sort
from .renderer import STORAGE

PRELUDE_NAME = "prelude.cuh"
# Library-call steps with a kernel of their own, asked in turn: each returns the kernel
# or a list of kernels launched in order (sort's merge sort; scratch in ``__device__``
# arrays of their own), scatter also the input it updates in place; None when the step
# is not its kind, or raises when it cannot take it (the step then runs as a library call
# or on the host).
LIBRARY_EMITTERS = (emit_conv, emit_scatter, emit_sort)


@dataclass
class Thunk:
    kind: str                         # launch | copy | host | library | while | conditional | call
    name: str                         # the instruction (profile rows)
    step: object = None
    kernel: object = None             # KernelSource (launch)
    args: list = field(default_factory=list)  # slices (launch: per param; copy: [dst, src])
    nbytes: int = 0
    callees: list = field(default_factory=list)  # ComputationProgram (control)
    spec: object = None               # library call parameters
    workspaces: list = field(default_factory=list)  # library: outputs to zero (read later)
    tuned_kernel: bool = False        # a gemm the autotuner gave one of our kernel's tiles


@dataclass
class ComputationProgram:
    plan: object
    thunks: list = field(default_factory=list)

    @property
    def root_slices(self):
        ca = self.plan.assignment
        return [ca.slices[v] for v in self.plan.root_values]


@dataclass
class Program:
    module: object
    mplan: object
    source: str
    kernels: list
    entry: ComputationProgram
    computations: dict
    host_fallbacks: list = field(default_factory=list)  # (step, why) run on the host
    # (step, why): library paths that fell back to our kernel at run time (cuDNN missing,
    # a graph cuDNN refused), one note per step
    library_fallbacks: list = field(default_factory=list)

    @property
    def arena_size(self) -> int:
        return self.mplan.assignment.arena_size

    @property
    def constants(self):
        return self.mplan.assignment.constants


def prelude() -> str:
    from importlib import resources
    return resources.files(__package__).joinpath(PRELUDE_NAME).read_text(encoding="utf-8")


def build_program(module, device, config: LaunchConfig | None = None,
                  use_libraries: bool = True, names: set | None = None,
                  gemm_kernels: bool = True) -> Program:
    """``names``: kernel names already taken (programs compiled together, as the tests
    do for every corpus module at once, share one set).  ``gemm_kernels``: every gemm
    thunk gets our kernel (for where cuBLASLt is missing or refuses); False on a device
    with cuBLASLt, where only the calls tuned to one of its tiles need it (NVRTC time)."""
    mplan = make_plan(module)
    names = set() if names is None else names
    kernels: list = []
    fallbacks: list = []
    progs: dict = {}
    for comp, plan in mplan.plans.items():
        progs[comp] = ComputationProgram(plan)
    for comp, plan in mplan.plans.items():
        cp = progs[comp]
        for st in plan.steps:
            cp.thunks.extend(_thunks_for(st, names, kernels, device, config, progs,
                                         use_libraries, fallbacks, gemm_kernels))
    body = "\n".join(k.code for k in kernels)
    source = (f"// hlo-opt CUDA kernels for module {module.name}\n"
              f"#include \"{PRELUDE_NAME}\"\n\n{body}")
    return Program(module, mplan, source, kernels, progs[module.entry], progs, fallbacks)


def full_source(prog: Program) -> str:
    """The translation unit with the prelude inlined (what NVRTC and g++ compile)."""
    return prog.source.replace(f'#include "{PRELUDE_NAME}"', prelude(), 1)


def split_sources(prog: Program, parts: int) -> list[tuple[str, list[str]]]:
    """The program's kernels in at most ``parts`` translation units of about equal
    source size, in program order, each with the prelude: (source, kernel names)."""
    kernels = prog.kernels
    parts = max(1, min(parts, len(kernels)))
    if parts == 1:
        return [(full_source(prog), [k.name for k in kernels])]
    total = sum(len(k.code) for k in kernels)
    groups: list[list] = [[]]
    size = 0
    for k in kernels:
        if groups[-1] and size >= total * len(groups) / parts and len(groups) < parts:
            groups.append([])
        groups[-1].append(k)
        size += len(k.code)
    head = prelude()
    return [(head + "\n" + "\n".join(k.code for k in g), [k.name for k in g]) for g in groups]


def combined_source(programs) -> str:
    """One translation unit for several programs built with a shared ``names`` set."""
    return prelude() + "\n" + "\n".join(k.code for p in programs for k in p.kernels)


def _thunks_for(st, names, kernels, device, config, progs, use_libraries, fallbacks,
                gemm_kernels=True):
    out = []
    if isinstance(st, Kernel):
        from .launch_config import launch_config_of
        try:
            ks = emit_kernel(st, names, device, launch_config_of(st.instruction) or config)
        except (UnsupportedError, KeyError, ElementalUnsupported) as e:
            # an element type or op the renderer lacks (c64, f4 ...): the step runs on the
            # host, and the program says so (Program.host_fallbacks)
            fallbacks.append((st.name, str(e)))
            return [Thunk("host", st.name, st)]
        for n, i in st.in_place.items():
            if st.input_slices[i] != st.output_slices[n]:
                out.append(Thunk("copy", st.name, st, args=[st.output_slices[n],
                                                            st.input_slices[i]],
                                 nbytes=st.output_slices[n].size))
        for k in ks:
            kernels.append(k)
            args = [st.input_slices[slot] if role == "in" else st.output_slices[slot]
                    for _, role, slot in k.params]
            out.append(Thunk("launch", st.name, st, kernel=k, args=args))
        return out
    if isinstance(st, Control):
        return [Thunk(st.kind, st.name, st, callees=[progs[c.computation]
                                                     for c in st.computations])]
    if isinstance(st, Copy):
        return [Thunk("copy", st.name, st, args=[o, i], nbytes=o.size)
                for o, i in zip(st.output_slices, st.input_slices)]
    if isinstance(st, LibraryCall):
        for emit in LIBRARY_EMITTERS:
            try:
                got = emit(st, names, device)
            except (UnsupportedError, KeyError, ElementalUnsupported) as e:
                fallbacks.append((st.name, str(e)))
                continue
            if got is None:
                continue
            k, base = got if isinstance(got, tuple) else (got, None)
            ks = k if isinstance(k, list) else [k]   # several: launched in order
            kernels.extend(ks)
            out = []
            if base is not None and st.input_slices[base] != st.output_slices[0]:
                out.append(Thunk("copy", st.name, st, args=[st.output_slices[0],
                                                            st.input_slices[base]],
                                 nbytes=st.output_slices[0].size))
            launches = [_launch(st, x) for x in ks]
            if emit is emit_conv and use_libraries and not kernel_selected(st.instruction):
                launches[0].spec = conv_plan(st.instruction)
            return out + launches
        spec = library_plan(st.instruction) if use_libraries else None
        if spec is not None:  # workspaces: the outputs something reads (zeroed)
            w = getattr(spec, "first_workspace", 1)
            written = 2 if isinstance(spec, CholeskyPlan) else None   # potrf's info
            workspaces = [sl for j, (v, sl) in enumerate(zip(st.outputs[w:],
                                                             st.output_slices[w:]), w)
                          if j != written and sl.size and _leaf_read(v.inst, v.leaf)]
            tuned = isinstance(spec, GemmPlan) and config_of(st.instruction) is not None
            if isinstance(spec, GemmPlan) and (gemm_kernels or tuned):
                try:  # with our kernel, for where cuBLASLt is not
                    k = emit_gemm(st, spec, names, device)
                except (UnsupportedError, KeyError) as e:
                    fallbacks.append((st.name, f"gemm kernel: {e}"))
                else:
                    kernels.append(k)
                    t = _launch(st, k)
                    t.kind, t.spec, t.workspaces = "library", spec, workspaces
                    t.tuned_kernel = tuned
                    return [t]
            return [Thunk("library", st.name, st, spec=spec, workspaces=workspaces)]
        return [Thunk("host", st.name, st)]
    raise AssertionError(f"unknown step {st!r}")


def _leaf_read(inst, leaf: int) -> bool:
    """Whether anything can read tuple element ``leaf`` of ``inst``'s result."""
    if inst.is_root:
        return True
    return any(u.opcode != "get-tuple-element" or u.attr("index") == leaf
               for u in inst.iter_users())


def _launch(st, k) -> Thunk:
    args = [st.input_slices[slot] if role == "in" else st.output_slices[slot]
            for _, role, slot in k.params]
    return Thunk("launch", st.name, st, kernel=k, args=args)


def storage_ctype(dtype: str) -> str:
    return STORAGE[dtype]
