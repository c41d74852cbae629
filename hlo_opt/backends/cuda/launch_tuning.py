"""Launch configurations as autotuning candidates (shared by ``cuda`` and ``cuda-sim``).

A fusion is cut out into a module of its own (parameters -> the fusion), and the kernel
plan is built once per :class:`~.emitters.LaunchConfig` that changes the generated code
or the launch: threads per block (loop and in-place kernels), the grid cap, threads per
row for row reductions and row normalisations, elements per thread (vector width) of loop
kernels, shared-memory tiles for transposes on or off and their thread tile (32 x block/32
threads walk each 32 x 32 tile).  Variants that produce identical kernels are merged.
The chosen configuration is written into the fusion's ``backend_config`` as
``launch_config`` (an hlo-opt field: XLA has no launch knob for non-Triton fusions) and
read back by :func:`launch_config_of` when the program is built.

A cuDNN convolution call is cut out the same way and built once per conv algorithm
(:func:`conv_variants`): candidates keyed ``CandidateKey.cudnn(algo_id)``, which
``gpu-conv-algorithm-picker`` writes back as ``cudnn_conv_backend_config.algorithm``.
A cuBLAS gemm call is built once per tile configuration of our gemm kernel
(:func:`gemm_call_variants`, ``gemm_emitter.CONFIGS``): candidates keyed
``CandidateKey.other("triton:block_m=...")``, which ``gemm-algorithm-picker`` writes back
as the call's ``triton_gemm_config``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...text.printer import attr_texts
from .emitters import LaunchConfig
from .launch_config import config_name

LOOP_BLOCKS = (128, 256, 512)
ROW_THREADS = (32, 256)
VECTOR_WIDTHS = (1, 2)       # the default is 4
TUNABLE = ("launch", "copy")


def standalone_module(inst):
    """``inst`` (a fusion, a custom call) alone: its operands as parameters, it the root."""
    from ...api import parse_hlo
    comps: list = []

    def visit(c):
        for callee in c.called_computations():
            visit(callee)
        if c not in comps:
            comps.append(c)
    for c in inst.called:
        visit(c)
    params = [f"  %p.{i} = {o.shape.to_text()} parameter({i})"
              for i, o in enumerate(inst.operands)]
    attrs = [a for a in attr_texts(inst, print_metadata=False)
             if not a.startswith("control-predecessors")]
    root = (f"  ROOT %{inst.name} = {inst.shape.to_text()} {inst.opcode}("
            + ", ".join(f"%p.{i}" for i in range(len(inst.operands))) + "), "
            + ", ".join(attrs))
    text = (f"HloModule standalone_{inst.name}\n\n"
            + "\n\n".join(c.to_text(True, False) for c in comps)
            + "\n\nENTRY %standalone.entry {\n" + "\n".join(params + [root]) + "\n}\n")
    return parse_hlo(text, f"<{inst.name}>")


@dataclass
class Variant:
    """One program of a tuned instruction; ``name`` and ``key`` (the candidate's) default
    to the launch / tile configuration's (``CandidateKey.other(config_name(config))``)."""
    config: object
    program: object
    kinds: list = field(default_factory=list)
    name: str = ""
    key: object = None

    def __post_init__(self):
        from ...autotune.results import CandidateKey
        self.name = self.name or config_name(self.config)
        self.key = self.key or CandidateKey.other(self.name)


def _pure_kernels(program) -> bool:
    """Only launches, copies and gemms as our kernel: the candidate can run it on the
    tuner's buffers."""
    return bool(program.kernels) and all(t.kind in TUNABLE or _kernel_gemm(t)
                                         for t in program.entry.thunks)


def _kernel_gemm(t) -> bool:
    return t.kind == "library" and t.kernel is not None


def _signature(program) -> tuple:
    return tuple((k.code, tuple(k.grid), tuple(k.block)) for k in program.kernels)


def variants(fusion, device) -> list[Variant]:
    """One :class:`Variant` per distinct kernel set; [] when the fusion is not a pure
    kernel (a host or library call would run instead)."""
    from .program import build_program
    if any(o.shape.is_tuple() for o in fusion.operands):
        return []
    module = standalone_module(fusion)
    base = build_program(module, device, LaunchConfig())
    if not _pure_kernels(base):
        return []
    kinds = {k.kind for k in base.kernels}
    if kinds == {"triton_gemm"}:
        return _gemm_variants(module, device)
    default = LaunchConfig()
    configs = [default]
    if kinds & {"loop", "in_place_dynamic_update_slice", "transpose"}:
        configs += [replace(default, block=b) for b in LOOP_BLOCKS]
    if "loop" in kinds and hasattr(default, "unroll"):        # vector width
        configs += [replace(default, unroll=u) for u in VECTOR_WIDTHS]
    if kinds & {"row_reduction", "row_normalization"}:
        configs += [replace(default, row_threads=t) for t in ROW_THREADS]
    if hasattr(default, "tile_transposes") and kinds & {"loop", "transpose"}:
        configs.append(replace(default, tile_transposes=not default.tile_transposes))
    out, seen = [], set()
    for cfg in configs:
        prog = base if cfg == default else build_program(module, device, cfg)
        sig = _signature(prog)
        if sig in seen:
            continue
        seen.add(sig)
        out.append(Variant(cfg, prog, sorted(kinds)))
    return out


def _gemm_variants(module, device) -> list[Variant]:
    """A gemm fusion: one variant per tile candidate (``triton_gemm_config``)."""
    from ...codegen.gemm_fusion import TILE_CANDIDATES, set_tile_config
    from .program import build_program
    fusion = module.entry.root
    out = []
    for tile in TILE_CANDIDATES:
        set_tile_config(fusion, tile)
        prog = build_program(module, device)
        if prog.host_fallbacks or not prog.kernels:
            continue
        out.append(Variant(tile, prog, ["triton_gemm"]))
    return out


def conv_variants(call, device) -> list[Variant]:
    """A cuDNN convolution call the conv kernel takes: one :class:`Variant` per algorithm
    (``conv.ALGORITHMS``) whose kernel differs from those before it, keyed
    ``CandidateKey.cudnn(algo_id)``; [] for any other instruction or a call that would run
    on the host."""
    from ...autotune.results import CandidateKey
    from .conv import ALGORITHMS, is_convolution, with_algorithm
    if call.opcode != "custom-call" or not is_convolution(call) \
            or any(o.shape.is_tuple() for o in call.operands):
        return []
    return _distinct_variants(
        standalone_module(call), device, ALGORITHMS,
        lambda root, alg: with_algorithm(root, alg.algo_id),
        lambda alg, prog: Variant(alg, prog, sorted({k.kind for k in prog.kernels}),
                                  name=alg.name, key=CandidateKey.cudnn(alg.algo_id)))


def gemm_call_variants(call, device) -> list[Variant]:
    """A cuBLAS gemm call our gemm kernel takes: one :class:`Variant` per tile
    configuration (``gemm_emitter.CONFIGS``) that can run it and whose kernel differs from
    those before it, keyed by the tile's name (``triton:block_m=...``); [] for anything
    else."""
    from ...autotune.kinds import default_kind_of
    from .gemm_emitter import CONFIGS, usable, with_config
    from .gemm_plan import gemm_plan
    if default_kind_of(call) != "gemm" or any(o.shape.is_tuple() for o in call.operands):
        return []
    plan = gemm_plan(call)
    if plan is None:
        return []
    module = standalone_module(call)
    module.entry.root.name = "gemm"   # the same call elsewhere: the same source (cached)
    return _distinct_variants(module, device,
                              [t for t in CONFIGS if usable(plan, t, device)], with_config,
                              lambda tile, prog: Variant(tile, prog, ["gemm"]))


def _distinct_variants(module, device, settings, apply, variant) -> list[Variant]:
    """``variant(setting, program)`` for each setting ``apply(root, setting)`` gives the
    one-call ``module`` whose kernels differ from those before it; [] as soon as one
    program has anything but kernels."""
    from .program import build_program
    out, seen = [], set()
    for setting in settings:
        apply(module.entry.root, setting)
        prog = build_program(module, device)
        if not _pure_kernels(prog):
            return []
        sig = _signature(prog)
        if sig not in seen:
            seen.add(sig)
            out.append(variant(setting, prog))
    return out


def kernel_variants(inst, device) -> list[Variant]:
    """What the ``cuda`` and ``cuda-sim`` providers tune with generated kernels: a
    fusion's launch configurations, a cuDNN convolution call's algorithms, a cuBLAS gemm
    call's tile configurations ([] else)."""
    if inst.opcode == "fusion":
        return variants(inst, device)
    return conv_variants(inst, device) or gemm_call_variants(inst, device)


class LaunchCandidate:
    """One variant run straight on the autotuner's buffers: parameter slices are the
    input buffers, root slices the output buffers, other arena slices lie in the
    candidate's scratch buffer.  ``launch(name, kernel, addrs)`` and ``copy(dst, src,
    n)`` are the backend's; ``constants(program)`` gives the constants' addresses."""

    def __init__(self, variant, name_map: dict, launch, copy, constants, errors=()):
        self.variant = variant
        self.name, self.key = variant.name, variant.key
        self.scratch_bytes = _scratch_bytes(variant.program)
        self._names = name_map
        self._launch, self._copy, self._constants = launch, copy, constants
        self._errors = tuple(errors)

    def run(self, inputs, outputs, scratch) -> None:
        from ...autotune.candidates import CandidateError
        prog = self.variant.program
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
        try:
            for t in prog.entry.thunks:
                if t.kind == "launch" or _kernel_gemm(t):   # a gemm's workspace: unread
                    self._launch(self._names[t.kernel.name], t.kernel,
                                 [addr(s) for s in t.args])
                elif t.kind == "copy":
                    dst, src = addr(t.args[0]), addr(t.args[1])
                    if dst != src and t.nbytes:
                        self._copy(dst, src, t.nbytes)
                else:
                    raise CandidateError(f"{self.name}: cannot run a {t.kind} thunk")
        except self._errors as e:
            raise CandidateError(str(e)) from None


def _scratch_bytes(program) -> int:
    """Arena bytes the thunks touch besides the outputs (which are the tuner's buffers)."""
    roots = set(program.entry.root_slices)
    ends = [sl.offset + sl.size for t in program.entry.thunks for sl in t.args
            if getattr(sl, "kind", None) == "arena" and sl not in roots]
    return max(ends, default=0)


def merged_kernels(vs: list) -> tuple[str, list, list]:
    """All variants' kernels in one translation unit, renamed ``<name>__v<i>``: (code,
    [(new name, [param c types])], [old -> new name map per variant])."""
    import re
    codes, kernels, maps = [], [], []
    for i, v in enumerate(vs):
        names = {}
        for k in v.program.kernels:
            new = f"{k.name}__v{i}"
            names[k.name] = new
            codes.append(re.sub(rf"\b{re.escape(k.name)}\b", new, k.code))
            kernels.append((new, [t for t, _, _ in k.params]))
        maps.append(names)
    return "\n".join(codes), kernels, maps


def constants_in(memory, keep: list):
    """``constants(program)`` for :class:`LaunchCandidate`: each program's constants
    written once into ``memory`` (allocations kept alive in ``keep``)."""
    def constants(program) -> list:
        cached = getattr(program, "_autotune_consts", None)
        if cached is not None:
            return cached
        import numpy as np
        from .runtime import to_physical
        out = []
        for c in program.constants:
            data = to_physical(c.literal.array, c.shape) if c.shape.num_elements() else b""
            alloc = memory.allocate(max(len(data), 16))
            keep.append(alloc)
            if data:
                memory.write(alloc, 0, np.frombuffer(data, np.uint8))
            out.append(memory.address(alloc))
        program._autotune_consts = out
        return out
    return constants
