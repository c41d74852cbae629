"""XLA's GPU compiler pipelines, in the seed's order (GpuCompiler::OptimizeHloModule,
NVPTXCompiler, gpu_compiler.cc), as plain functions of the module config (as XLA's
``FusionPipeline(debug_options, device)``), and the whole of them: ``gpu``.

    gpu = spmd-simplify, optimization (with simplification), collective-optimizations,
          conv-canonicalization, layout assignment, nvptx post-layout-assignment part 1,
          post-layout-assignment, nvptx post-layout-assignment part 2, fusion,
          horizontal-fusion, post-fusion-optimization, GPU-ir-emit-prepare

Each pipeline lists XLA's passes by XLA's names, created through the registry: a name
that is not registered is an error.  ``fusion`` runs ``priority-fusion`` when
``--xla_gpu_enable_priority_fusion`` (the default in ``hlo_opt/flags.py``), else XLA's
classic ``fusion`` (twice, without and with duplication) and ``fusion_merger``.
"""
from __future__ import annotations

from hlo_opt.ir.config import HloModuleConfig
from hlo_opt.pipeline import Fixpoint, Pipeline
from passes.algsimp.options import AlgebraicSimplifierOptions
from passes.registry import create_pass

__all__ = ["GPU_STAGES", "collective_optimizations", "conv_canonicalization", "fusion",
           "gpu", "horizontal_fusion", "ir_emit_prepare", "layout_assignment",
           "nvptx_post_layout_part1", "nvptx_post_layout_part2", "optimization",
           "post_fusion_optimization", "post_layout_assignment", "simplification",
           "spmd_simplify"]


def _passes(*names) -> list:
    return [_gpu_algsimp() if n == "algsimp" else create_pass(n) for n in names]


def _gpu_algsimp():
    """Layout-insensitive algsimp with the GPU compiler's options: XLA's GPU compiler turns
    off convolution operand swapping (set_enable_conv_operand_swap(false))."""
    return create_pass("algsimp", options=AlgebraicSimplifierOptions(
        enable_conv_operand_swap=False))


def simplification(config: HloModuleConfig) -> Fixpoint:
    """XLA's GPU "simplification" HloPassFix<HloPassPipeline>, in the seed's order
    (shared/seeds/002: GpuCompiler::OptimizeHloModule)."""
    return Fixpoint(Pipeline("simplification", _passes(
        "batchnorm_expander", "algsimp", "simplify-sorts", "tuple-simplifier",
        "while-loop-constant-sinking", "simplify-while-loops", "slice-sinker", "dce",
        "reshape-mover", "constant_folding", "simplify-conditional")))


def optimization(config: HloModuleConfig) -> Pipeline:
    """XLA's GPU "optimization" pipeline in the seed's order; the seed's passes we do not
    have (gpu_hlo_support_checker, element_type_converter,
    hlo-get-dimension-size-rewriter) are the only ones left out.  ``dot-merger`` (XLA:GPU
    merges "smallish" dots sharing an operand, --xla_gpu_dot_merger_threshold_mb: a
    transformer's Q/K/V projections become one gemm) runs after ``cse``, where the
    dot decomposer's reshapes of a shared operand have become one."""
    return Pipeline("optimization", [
        # XLA's "pre-spmd-partitioner" pipeline runs flatten-call-graph then call-inliner
        # before this one: a computation called from several sites (JAX's threefry,
        # called once per random draw) is cloned per site first, so each inlined while
        # loop owns its body and the while-loop simplifications reach it.
        create_pass("flatten-call-graph"),
        *_passes("zero_sized_hlo_elimination", "dynamic-index-splitter", "call-inliner",
                 "dot_decomposer"),
        # XLA's GPU compiler converts batch groups only (its cost model declines the rest);
        # expanding feature groups would make depthwise convolutions dense, 32-64x the flops.
        create_pass("convolution-group-converter", convert_batch_groups_only=True),
        create_pass("stable-sort-expander"),
        simplification(config), simplification(config), simplification(config),
        *_passes("zero_sized_hlo_elimination", "transpose-folding", "cse", "dce"),
        # XLA:GPU merges dots that share an operand right after its simplification fixpoint
        # (which ends with transpose-folding, cse and dce): "smallish" dots only
        # (--xla_gpu_dot_merger_threshold_mb)
        create_pass("dot-merger", max_size_to_merge=(
            config.debug_options.xla_gpu_dot_merger_threshold_mb << 20)),
        create_pass("while-loop-trip-count-annotator")])


def spmd_simplify(config: HloModuleConfig) -> Pipeline:
    """XLA runs it only for SPMD (several partitions) after spmd-partitioner; hlo-opt
    compiles for one device: a no-op."""
    return Pipeline("spmd-simplify", [])


def collective_optimizations(config: HloModuleConfig) -> Pipeline:
    return Pipeline("collective-optimizations", _passes(
        "all-reduce-folder", "reduce-scatter-creator", "all-reduce-reassociate", "algsimp",
        "all-gather-broadcast-reorder"))


def conv_canonicalization(config: HloModuleConfig) -> Pipeline:
    return Pipeline("conv-canonicalization", [
        *_passes("gpusolver-rewriter", "cudnn-conv-rewriter",
                 "cudnn-fused-convolution-rewriter", "gpu-conv-padding-legalization",
                 "cudnn_pad_for_convolutions", "cudnn_vectorize_convolutions",
                 "call-inliner", "tuple-simplifier"),
        Fixpoint(_gpu_algsimp()), create_pass("constant_folding")])


def layout_assignment(config: HloModuleConfig) -> Pipeline:
    return Pipeline("layout assignment", _passes("layout-assignment"))


def nvptx_post_layout_part1(config: HloModuleConfig) -> Pipeline:
    return Pipeline("nvptx post-layout-assignment part 1",
                    _passes("cublas-pad-for-gemms", "constant_folding"))


def _gemm_fusion(config: HloModuleConfig) -> list:
    """XLA runs GemmFusion ("triton-gemm-rewriter") before the cuBLAS rewriter when
    ``--xla_gpu_enable_triton_gemm`` is on and the GPU is Ampere or newer."""
    if config.debug_options.xla_gpu_enable_triton_gemm and \
            config.device.is_at_least_ampere:
        return _passes("triton-gemm-rewriter")
    return []


def post_layout_assignment(config: HloModuleConfig) -> Pipeline:
    # XLA runs AlgebraicSimplifier layout-sensitively once layouts are assigned (a
    # layout-blind one drops the copies layout assignment inserted).
    layout_algsimp = create_pass(
        "algsimp", options=AlgebraicSimplifierOptions(is_layout_sensitive=True))
    # XLA runs the softmax rewriter for Ampere and newer, after layout normalisation and
    # before reduction-dimension-grouper (which makes the pattern harder to match)
    softmax = []
    if config.device.is_at_least_ampere:
        softmax = [Fixpoint(create_pass(
            "algsimp", options=AlgebraicSimplifierOptions(is_layout_sensitive=True))),
            *_passes("cse", "constant_folding", "dce", "triton-softmax-rewriter")]
    return Pipeline("post-layout-assignment", [
        *_passes("reduction-degenerate-dim-remover", "reduction-layout-normalizer"),
        *softmax,
        create_pass("reduction-dimension-grouper"),
        Fixpoint(create_pass("reduction-splitter")),
        Fixpoint(create_pass("gpu-tree-reduction-rewriter")), Fixpoint(layout_algsimp),
        *_gemm_fusion(config),
        *_passes("cublas-gemm-rewriter", "gemm-broadcast-folding-rewriter",
                 "bfloat16-normalization", "gpu-conv-algorithm-picker", "tuple-simplifier",
                 "cse")])


def nvptx_post_layout_part2(config: HloModuleConfig) -> Pipeline:
    return Pipeline("nvptx post-layout-assignment part 2",
                    _passes("gemm-algorithm-picker", "triangular-solve-rewriter"))


def fusion(config: HloModuleConfig) -> Fixpoint:
    """Priority fusion or the classic passes, as ``--xla_gpu_enable_priority_fusion``."""
    if config.debug_options.xla_gpu_enable_priority_fusion:
        items = _passes("variadic-op-splitter", "sort-iota-fusion", "priority-fusion", "cse",
                        "multi_output_fusion", "cse", "dce")
    else:
        items = [create_pass("variadic-op-splitter"),
                 create_pass("fusion", may_duplicate=False),
                 create_pass("fusion", may_duplicate=True),
                 *_passes("fusion_merger", "multi_output_fusion", "cse", "dce")]
    return Fixpoint(Pipeline("fusion", items))


def horizontal_fusion(config: HloModuleConfig) -> Pipeline:
    return Pipeline("horizontal-fusion", _passes(
        "horizontal_loop_fusion", "horizontal_input_fusion", "cse", "dce"))


def post_fusion_optimization(config: HloModuleConfig) -> Pipeline:
    return Pipeline("post-fusion-optimization", _passes(
        "rename_fusions", "all-gather-combiner", "all-reduce-combiner",
        "reduce-scatter-combiner"))


def ir_emit_prepare(config: HloModuleConfig) -> Pipeline:
    # XLA wraps what is left unfused after scheduling; here right at the end
    return Pipeline("GPU-ir-emit-prepare", _passes(
        "dce", "flatten-call-graph", "copy-insertion", "sanitize-constant-names",
        "fusion-wrapper"))


# The stages of ``gpu``, in order.
GPU_STAGES = (spmd_simplify, optimization, collective_optimizations, conv_canonicalization,
              layout_assignment, nvptx_post_layout_part1, post_layout_assignment,
              nvptx_post_layout_part2, fusion, horizontal_fusion, post_fusion_optimization,
              ir_emit_prepare)


def gpu(config: HloModuleConfig) -> Pipeline:
    """The whole GPU compiler pipeline (every stage above, in order)."""
    return Pipeline("gpu", [stage(config) for stage in GPU_STAGES])
