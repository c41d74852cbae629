"""XLA's GPU compiler pipelines as data, in the seed's order (GpuCompiler::
OptimizeHloModule, NVPTXCompiler, gpu_compiler.cc), and the whole of them: ``gpu``.

    gpu = spmd-simplify, optimization (with simplification), collective-optimizations,
          conv-canonicalization, layout assignment, nvptx post-layout-assignment part 1,
          post-layout-assignment, nvptx post-layout-assignment part 2, fusion,
          horizontal-fusion, post-fusion-optimization, GPU-ir-emit-prepare

Each pipeline lists XLA's passes by XLA's names.  A name no module has registered yet
(a pass not written so far) is left out when the pipelines are registered, and
:func:`missing_passes` says which; so the pipelines grow as passes land, without edits
here.  ``fusion`` runs ``priority-fusion`` when ``--xla_gpu_enable_priority_fusion``
(the default in ``hlo_opt/flags.py``), else XLA's classic ``fusion`` (twice, without and
with duplication) and ``fusion_merger``; the choice is made from the options in force
when the pipeline is built.

:func:`register_gpu_pipelines` adds the pipelines to ``passes.pipelines.PIPELINES``.
"""
from __future__ import annotations

from passes.pipelines import Fix, PassSpec, Seq

__all__ = ["FlagSeq", "PassSpec", "GPU_PIPELINE_NAMES", "gpu_pipeline_specs",
           "missing_passes", "register_gpu_pipelines"]


def kwargs_supported() -> bool:
    """Does ``passes.pipelines`` build a :class:`PassSpec` with its arguments?"""
    from passes.pipelines import _build
    try:
        built = _build(Seq("probe", [PassSpec("fusion", may_duplicate=False)]))
        return getattr(built.items[0], "may_duplicate", None) is False
    except Exception:  # noqa: BLE001 - an older builder: no
        return False


def _layout_sensitive_algsimp() -> PassSpec:
    """XLA runs AlgebraicSimplifier layout-sensitively once layouts are assigned (a
    layout-blind one drops the copies layout assignment inserted)."""
    from passes.algsimp.options import AlgebraicSimplifierOptions
    return PassSpec("algsimp", required=True,
                    options=AlgebraicSimplifierOptions(is_layout_sensitive=True))


class FlagSeq(Seq):
    """A pipeline whose items depend on a boolean DebugOptions flag, read when the
    pipeline is built (XLA's compiler builds its pipelines from the flags the same way)."""

    def __init__(self, name: str, flag: str, if_true, if_false):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "flag", flag)
        object.__setattr__(self, "if_true", tuple(if_true))
        object.__setattr__(self, "if_false", tuple(if_false))

    @property
    def items(self):  # noqa: D401 - the Seq field, computed
        from passes.gpu._options import current_options
        return self.if_true if getattr(current_options(), self.flag) else self.if_false

    def __eq__(self, other):
        return isinstance(other, FlagSeq) and (self.name, self.flag, self.if_true,
                                               self.if_false) == (
            other.name, other.flag, other.if_true, other.if_false)

    def __hash__(self):
        return hash((self.name, self.flag))

    def __repr__(self):
        return f"FlagSeq({self.name!r}, {self.flag}: {list(self.items)})"


def _raw_specs(table) -> dict:
    """The pipelines with every XLA pass name (before leaving out unregistered ones)."""
    optimization = table.get("optimization", "optimization")
    spmd_simplify = Seq("spmd-simplify", [])  # XLA runs it only for SPMD (several
    # partitions) after spmd-partitioner; hlo-opt compiles for one device: a no-op.
    collective = Seq("collective-optimizations", [
        "all-reduce-folder", "reduce-scatter-creator", "all-reduce-reassociate", "algsimp",
        "all-gather-broadcast-reorder"])
    conv = Seq("conv-canonicalization", [
        "gpusolver-rewriter", "cudnn-conv-rewriter", "cudnn-fused-convolution-rewriter",
        "gpu-conv-padding-legalization", "cudnn_pad_for_convolutions",
        "cudnn_vectorize_convolutions", "call-inliner", "tuple-simplifier", Fix("algsimp"),
        "constant_folding"])
    layout = Seq("layout assignment", ["layout-assignment"])
    nvptx1 = Seq("nvptx post-layout-assignment part 1", [
        "cublas-pad-for-gemms", "constant_folding"])
    post_layout = Seq("post-layout-assignment", [
        "reduction-degenerate-dim-remover", "reduction-layout-normalizer",
        "reduction-dimension-grouper", Fix("reduction-splitter"),
        Fix("gpu-tree-reduction-rewriter"), Fix(_layout_sensitive_algsimp()),
        "cublas-gemm-rewriter",
        "gemm-broadcast-folding-rewriter", "bfloat16-normalization",
        "gpu-conv-algorithm-picker", "tuple-simplifier", "cse"])
    nvptx2 = Seq("nvptx post-layout-assignment part 2", [
        "gemm-algorithm-picker", "triangular-solve-rewriter"])
    fusion = Fix(FlagSeq(
        "fusion", "xla_gpu_enable_priority_fusion",
        ["variadic-op-splitter", "priority-fusion", "cse", "multi_output_fusion", "cse",
         "dce"],
        ["variadic-op-splitter", PassSpec("fusion", may_duplicate=False),
         PassSpec("fusion", may_duplicate=True), "fusion_merger", "multi_output_fusion",
         "cse", "dce"]))
    horizontal = Seq("horizontal-fusion", [
        "horizontal_loop_fusion", "horizontal_input_fusion", "cse", "dce"])
    post_fusion = Seq("post-fusion-optimization", [
        "rename_fusions", "all-gather-combiner", "all-reduce-combiner",
        "reduce-scatter-combiner"])
    prepare = Seq("GPU-ir-emit-prepare", [
        "dce", "flatten-call-graph", "copy-insertion", "sanitize-constant-names"])
    stages = [spmd_simplify, optimization, collective, conv, layout, nvptx1, post_layout,
              nvptx2, fusion, horizontal, post_fusion, prepare]
    specs = {s.name: s for s in stages
             if not isinstance(s, str) and s.name in GPU_PIPELINE_NAMES}
    specs["gpu"] = Seq("gpu", stages)
    return specs


GPU_PIPELINE_NAMES = ("spmd-simplify", "collective-optimizations", "conv-canonicalization",
                      "layout assignment", "nvptx post-layout-assignment part 1",
                      "post-layout-assignment", "nvptx post-layout-assignment part 2",
                      "fusion", "horizontal-fusion", "post-fusion-optimization",
                      "GPU-ir-emit-prepare", "gpu")

_missing: dict[str, list[str]] = {}


def _prune(spec, available: set, path: str, table_names: set):
    if isinstance(spec, str):
        if isinstance(spec, PassSpec) and spec.required and spec.kwargs and \
                not _KWARGS_OK[0]:
            _missing.setdefault(path, []).append(
                f"{spec} ({', '.join(f'{k}=...' for k in spec.kwargs)}: the pipeline builder "
                "cannot pass arguments)")
            return None
        if spec in available:
            return spec
        _missing.setdefault(path, []).append(str(spec))
        return None
    if isinstance(spec, Fix):
        body = _prune(spec.body, available, path, table_names)
        return None if body is None else Fix(body, spec.max_iterations)
    if isinstance(spec, FlagSeq):
        t = [x for x in (_prune(i, available, spec.name, table_names) for i in spec.if_true)
             if x is not None]
        f = [x for x in (_prune(i, available, spec.name, table_names) for i in spec.if_false)
             if x is not None]
        return FlagSeq(spec.name, spec.flag, t, f)
    items = [x for x in (_prune(i, available, spec.name, table_names) for i in spec.items)
             if x is not None]
    return Seq(spec.name, items)


_KWARGS_OK = [False]


def gpu_pipeline_specs(table, available: set) -> dict:
    """The GPU pipelines with passes not in ``available`` left out."""
    _missing.clear()
    _KWARGS_OK[0] = kwargs_supported()
    out = {}
    for name, spec in _raw_specs(table).items():
        if isinstance(spec, str):
            continue
        out[name] = _prune(spec, available, name, set())
    return out


def missing_passes() -> dict[str, list[str]]:
    """pipeline -> XLA passes it names that are not registered (left out)."""
    return {k: sorted(set(v)) for k, v in _missing.items()}


def register_gpu_pipelines(table=None) -> dict:
    """Add the GPU pipelines to the named-pipeline table (``passes.pipelines.PIPELINES``
    by default); returns what was added."""
    from passes.pipelines import PIPELINES
    from passes.registry import pass_names
    table = PIPELINES if table is None else table
    specs = gpu_pipeline_specs(table, set(pass_names()))
    table.update(specs)
    return specs
