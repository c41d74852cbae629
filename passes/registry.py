"""The pass registry: XLA's ``name()`` string -> pass class, one explicit table sorted by
name (as XLA's ``xla/hlo/tools/hlo_opt/opt_lib.cc``).

A pass is an object with ``name`` (XLA's spelling) and ``run(module) -> bool`` (did it
change anything).  It never prints: the pipeline runner reports, verifies and dumps; it
reads its options from ``module.config``.  Adding a pass = one file in ``passes/`` + one
line here + tests.  This is the app side of the one import direction: the core
(``hlo_opt/``) never imports it; the CLI, the optimize entry point and the pipelines
connect names to passes through it.
"""
from __future__ import annotations

from typing import Protocol

from hlo_opt.errors import PassError

from passes.algsimp import AlgebraicSimplifier
from passes.batchnorm_expander import BatchNormExpander
from passes.call_inliner import CallInliner
from passes.collectives.all_gather_broadcast_reorder import AllGatherBroadcastReorder
from passes.collectives.all_gather_combiner import AllGatherCombiner
from passes.collectives.all_reduce_combiner import AllReduceCombiner
from passes.collectives.all_reduce_folder import AllReduceFolder
from passes.collectives.all_reduce_reassociate import AllReduceReassociate
from passes.collectives.reduce_scatter_combiner import ReduceScatterCombiner
from passes.collectives.reduce_scatter_creator import ReduceScatterCreator
from passes.conditional_simplifier import ConditionalSimplifier
from passes.cpu_instruction_fusion import CpuInstructionFusion
from passes.cpu_layout_assignment import CpuLayoutAssignment
from passes.constant_folding import HloConstantFolding
from passes.convolution_group_converter import ConvolutionGroupConverter
from passes.cse import HloCSE
from passes.dce import HloDCE
from passes.dot_decomposer import DotDecomposer
from passes.dot_merger import DotMerger
from passes.dynamic_index_splitter import DynamicIndexSplitter
from passes.flatten_call_graph import FlattenCallGraph
from passes.gpu.algorithm_pickers import GemmAlgorithmPicker, GpuConvAlgorithmPicker
from passes.gpu.bfloat16_normalization import BFloat16Normalization
from passes.gpu.conv_padding_legalization import GpuConvPaddingLegalization
from passes.gpu.conv_rewriter import GpuConvRewriter
from passes.gpu.copy_insertion import CopyInsertion
from passes.gpu.cublas_pad_for_gemms import CublasPadForGemms
from passes.gpu.cudnn_pad_for_convolutions import CudnnPadForConvolutions
from passes.gpu.cudnn_vectorize_convolutions import CudnnVectorizeConvolutions
from passes.gpu.fused_conv_rewriter import CudnnFusedConvRewriter
from passes.gpu.fusion_launch_autotuner import FusionLaunchAutotuner
from passes.gpu.fusion_wrapper import FusionWrapper
from passes.gpu.fusion_merger import FusionMerger
from passes.gpu.gemm_fusion import GemmFusion
from passes.gpu.gemm_broadcast_folding_rewriter import GemmBroadcastFoldingRewriter
from passes.gpu.gemm_rewriter import GemmRewriter
from passes.gpu.gpusolver_rewriter import GpusolverRewriter
from passes.gpu.horizontal_input_fusion import GpuHorizontalInputFusion
from passes.gpu.horizontal_loop_fusion import GpuHorizontalLoopFusion
from passes.gpu.instruction_fusion import GpuInstructionFusion
from passes.gpu.layout_assignment import GpuLayoutAssignment
from passes.gpu.multi_output_fusion import GpuMultiOutputFusion
from passes.gpu.priority_fusion import GpuPriorityFusion
from passes.gpu.reduction_dimension_grouper import ReductionDimensionGrouper
from passes.gpu.reduction_layout_normalizer import ReductionLayoutNormalizer
from passes.gpu.reduction_splitter import ReductionSplitter
from passes.gpu.rename_fusions import RenameFusions
from passes.gpu.softmax_rewriter_triton import SoftmaxRewriterTriton
from passes.gpu.tree_reduction_rewriter import GpuTreeReductionRewriter
from passes.gpu.sort_iota_fusion import SortIotaFusion
from passes.gpu.triangular_solve_rewriter import TriangularSolveRewriter
from passes.gpu.variadic_op_splitter import VariadicOpSplitter
from passes.reduction_degenerate_dim_remover import ReductionDegenerateDimRemover
from passes.reshape_mover import ReshapeMover
from passes.rng_bit_generator_expander import RngBitGeneratorExpander
from passes.sanitize_constant_names import SanitizeConstantNames
from passes.scatter_expander import ScatterExpander
from passes.simplify_sorts import SortSimplifier
from passes.slice_sinker import SliceSinker
from passes.stable_sort_expander import StableSortExpander
from passes.test_only import TestOnlyBreakVerifier, TestOnlyCrash, TestOnlyMiscompile
from passes.transpose_folding import TransposeFolding
from passes.tuple_simplifier import TupleSimplifier
from passes.while_loop_constant_sinking import WhileLoopConstantSinking
from passes.while_loop_simplifier import WhileLoopSimplifier
from passes.while_loop_trip_count_annotator import WhileLoopTripCountAnnotator
from passes.zero_sized_hlo_elimination import ZeroSizedHloElimination


class Pass(Protocol):
    name: str

    def run(self, module) -> bool: ...


PASSES: dict[str, type] = {
    "algsimp": AlgebraicSimplifier,
    "all-gather-broadcast-reorder": AllGatherBroadcastReorder,
    "all-gather-combiner": AllGatherCombiner,
    "all-reduce-combiner": AllReduceCombiner,
    "all-reduce-folder": AllReduceFolder,
    "all-reduce-reassociate": AllReduceReassociate,
    "batchnorm_expander": BatchNormExpander,
    "bfloat16-normalization": BFloat16Normalization,
    "call-inliner": CallInliner,
    "constant_folding": HloConstantFolding,
    "convolution-group-converter": ConvolutionGroupConverter,
    "copy-insertion": CopyInsertion,
    "cpu-instruction-fusion": CpuInstructionFusion,
    "cpu-layout-assignment": CpuLayoutAssignment,
    "cse": HloCSE,
    "cublas-gemm-rewriter": GemmRewriter,
    "cublas-pad-for-gemms": CublasPadForGemms,
    "cudnn-conv-rewriter": GpuConvRewriter,
    "cudnn-fused-convolution-rewriter": CudnnFusedConvRewriter,
    "cudnn_pad_for_convolutions": CudnnPadForConvolutions,
    "cudnn_vectorize_convolutions": CudnnVectorizeConvolutions,
    "dce": HloDCE,
    "dot-merger": DotMerger,
    "dot_decomposer": DotDecomposer,
    "dynamic-index-splitter": DynamicIndexSplitter,
    "flatten-call-graph": FlattenCallGraph,
    "fusion": GpuInstructionFusion,
    "fusion-launch-autotuner": FusionLaunchAutotuner,
    "fusion-wrapper": FusionWrapper,
    "fusion_merger": FusionMerger,
    "gemm-algorithm-picker": GemmAlgorithmPicker,
    "gemm-broadcast-folding-rewriter": GemmBroadcastFoldingRewriter,
    "gpu-conv-algorithm-picker": GpuConvAlgorithmPicker,
    "gpu-conv-padding-legalization": GpuConvPaddingLegalization,
    "gpu-tree-reduction-rewriter": GpuTreeReductionRewriter,
    "gpusolver-rewriter": GpusolverRewriter,
    "horizontal_input_fusion": GpuHorizontalInputFusion,
    "horizontal_loop_fusion": GpuHorizontalLoopFusion,
    "layout-assignment": GpuLayoutAssignment,
    "multi_output_fusion": GpuMultiOutputFusion,
    "priority-fusion": GpuPriorityFusion,
    "reduce-scatter-combiner": ReduceScatterCombiner,
    "reduce-scatter-creator": ReduceScatterCreator,
    "reduction-degenerate-dim-remover": ReductionDegenerateDimRemover,
    "reduction-dimension-grouper": ReductionDimensionGrouper,
    "reduction-layout-normalizer": ReductionLayoutNormalizer,
    "reduction-splitter": ReductionSplitter,
    "rename_fusions": RenameFusions,
    "reshape-mover": ReshapeMover,
    "rng-bit-generator-expander": RngBitGeneratorExpander,
    "sanitize-constant-names": SanitizeConstantNames,
    "scatter_expander": ScatterExpander,
    "simplify-conditional": ConditionalSimplifier,
    "simplify-sorts": SortSimplifier,
    "simplify-while-loops": WhileLoopSimplifier,
    "slice-sinker": SliceSinker,
    "sort-iota-fusion": SortIotaFusion,
    "stable-sort-expander": StableSortExpander,
    "test-only-break-verifier": TestOnlyBreakVerifier,  # wrong on purpose: bisect's tests
    "test-only-crash": TestOnlyCrash,
    "test-only-miscompile": TestOnlyMiscompile,
    "transpose-folding": TransposeFolding,
    "triangular-solve-rewriter": TriangularSolveRewriter,
    "triton-gemm-rewriter": GemmFusion,
    "triton-softmax-rewriter": SoftmaxRewriterTriton,
    "tuple-simplifier": TupleSimplifier,
    "variadic-op-splitter": VariadicOpSplitter,
    "while-loop-constant-sinking": WhileLoopConstantSinking,
    "while-loop-trip-count-annotator": WhileLoopTripCountAnnotator,
    "zero_sized_hlo_elimination": ZeroSizedHloElimination,
}


def pass_names() -> list[str]:
    """Every registered pass name, sorted."""
    return sorted(PASSES)


def create_pass(name: str, **kwargs) -> Pass:
    """A new instance of the pass registered as ``name`` (constructor ``kwargs`` passed on);
    an unknown name is a :class:`PassError`."""
    cls = PASSES.get(name)
    if cls is None:
        raise PassError(f"INVALID_ARGUMENT: Pass {name} not found.")
    return cls(**kwargs)
