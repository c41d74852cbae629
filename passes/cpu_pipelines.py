"""XLA's CPU compiler pipelines (CpuCompiler::RunHloPasses: RunHloPassesThroughLayoutAssn,
then RunHloPassesAfterLayoutAssn, cpu_compiler.cc), in XLA's order, as plain functions
of the module config, and the whole of them: ``cpu``.

    cpu = sharding-removal, HLO passes through layout assignment, hlo normalization,
          HLO passes after layout assignment

Every pass hlo-opt has is created through the registry under XLA's name; the XLA passes
it has not ported are listed, in place, in :data:`NOT_PORTED` (``hlo-opt pipelines cpu``
prints them).  Two names differ from XLA's on purpose: the CPU instruction fusion is
``cpu-instruction-fusion`` and the CPU layout assignment ``cpu-layout-assignment`` (XLA
calls them ``fusion`` and ``layout-assignment``, the names the GPU passes have here).
"""
from __future__ import annotations

from hlo_opt.ir.config import HloModuleConfig
from hlo_opt.pipeline import Fixpoint, Pipeline
from passes.algsimp.options import AlgebraicSimplifierOptions
from passes.gpu_pipelines import simplification as gpu_simplification
from passes.registry import create_pass

__all__ = ["CPU_STAGES", "NOT_PORTED", "after_layout_assignment", "cpu",
           "hlo_normalization", "sharding_removal", "through_layout_assignment"]

# pipeline -> the XLA passes (XLA's names, XLA's order) hlo-opt leaves out, and why
NOT_PORTED: dict[str, list[str]] = {
    "sharding-removal": ["sharding-remover (single device: no shardings to remove)"],
    "HLO passes through layout assignment": [
        "batched_gather_scatter_normalizer", "result_caster", "operand_upcaster",
        "rng-expander", "conditional-to-select", "map-inline", "topk-decomposer",
        "comparison-expander", "cholesky_expander", "qr_expander", "eigh_expander",
        "triangular_solve_expander", "all_to_all_decomposer",
        "stochastic_convert_decomposer", "batch-dot-simplification",
        "all-reduce-promotion", "float-normalization-bf16 (and the f8/s4/u4/f4 ones)",
        "logistic-expander", "conditional-canonicalizer", "dynamic_dimension_simplifier",
        "dynamic_padder", "convolution-canonicalization", "change-op-data-type",
        "select-and-scatter-expander", "bitcast-dtypes-expander", "topk-rewriter",
        "opt-barrier-expander", "subbyte-normalization", "shape-canonicalizer",
        "literal-canonicalizer",
        "convolution-group-converter for feature groups of non-f16/f32 types"],
    "hlo normalization": ["reshape-decomposer", "reduce-decomposer",
                          "broadcast_canonicalizer"],
    "HLO passes after layout assignment": [
        "reshape-decomposer", "fusion-wrapper (the CPU backend's plan wraps unfused "
        "instructions itself)", "cpu-multi-output-fusion", "parallel-task-assigner",
        "optimize_input_output_buffer_alias",
        "copy-insertion (the GPU pass is registered; the CPU backend's buffer assignment "
        "copies while state itself)", "small-while-loop-hoisting"],
}


def _passes(*names) -> list:
    return [create_pass(n) for n in names]


def sharding_removal(config: HloModuleConfig) -> Pipeline:
    return Pipeline("sharding-removal", _passes("flatten-call-graph", "dce"))


def _cpu_algsimp(gpu_algsimp):
    """XLA's CPU compiler runs its layout-insensitive algsimp with
    ``set_enable_dot_strength_reduction(false)``: a dot with a vector operand stays a dot
    (the CPU backend emits a matrix-vector dot as loops), not a multiply and a reduce
    that, fused into a loop kernel, re-reads a matrix column per output element (a
    ``lax.scan`` cell's ``h @ w`` ran 15x slower that way)."""
    return create_pass("algsimp", options=gpu_algsimp.options.replace(
        enable_dot_strength_reduction=False))


def simplification(config: HloModuleConfig) -> Fixpoint:
    """The GPU's "simplification" fixpoint with the CPU compiler's algsimp options."""
    fix = gpu_simplification(config)
    fix.body.items = [_cpu_algsimp(p) if p.name == "algsimp" else p
                      for p in fix.body.items]
    return fix


def through_layout_assignment(config: HloModuleConfig) -> Pipeline:
    post_scatter = simplification(config)
    post_scatter.body.name = "post_scatter_expansion_simplification"
    return Pipeline("HLO passes through layout assignment", [
        *_passes("dot_decomposer", "rng-bit-generator-expander",
                 "zero_sized_hlo_elimination", "dynamic-index-splitter", "call-inliner",
                 "dot_decomposer"),
        create_pass("convolution-group-converter", convert_batch_groups_only=True),
        create_pass("batchnorm_expander"),
        simplification(config),
        create_pass("scatter_expander", mode="all"),
        post_scatter,
        *_passes("transpose-folding", "cse", "tuple-simplifier",
                 "while-loop-trip-count-annotator", "flatten-call-graph",
                 "cpu-layout-assignment")])


def hlo_normalization(config: HloModuleConfig) -> Pipeline:
    return Pipeline("hlo normalization", [])


def after_layout_assignment(config: HloModuleConfig) -> Pipeline:
    algsimp = create_pass("algsimp",
                          options=AlgebraicSimplifierOptions(is_layout_sensitive=True))
    return Pipeline("HLO passes after layout assignment", [
        *_passes("cpu-instruction-fusion", "tuple-simplifier", "all-reduce-combiner",
                 "tuple-simplifier"),
        Fixpoint(Pipeline("simplification after layout assignment",
                          [algsimp, create_pass("dce"), create_pass("cse")])),
        create_pass("dce"), create_pass("dce")])


CPU_STAGES = {
    "sharding-removal": sharding_removal,
    "HLO passes through layout assignment": through_layout_assignment,
    "hlo normalization": hlo_normalization,
    "HLO passes after layout assignment": after_layout_assignment,
}


def cpu(config: HloModuleConfig) -> Pipeline:
    """The whole of XLA's CPU compiler HLO passes (what ``run --backend cpu`` runs)."""
    return Pipeline("cpu", [make(config) for make in CPU_STAGES.values()])
