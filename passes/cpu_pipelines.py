"""XLA's CPU compiler pipelines as data, in XLA's order (CpuCompiler::RunHloPasses:
RunHloPassesThroughLayoutAssn, then RunHloPassesAfterLayoutAssn), and the whole: ``cpu``.

    cpu = sharding-removal, HLO passes through layout assignment,
          hlo normalization, HLO passes after layout assignment

Every XLA pass is listed by XLA's name; the ones not registered in hlo-opt are left out
when the pipelines are registered and ``hlo-opt pipelines cpu`` lists them as not ported
(:func:`missing_passes`).  Two names differ from XLA's on purpose: the CPU instruction
fusion registers as ``cpu-instruction-fusion`` (XLA calls it ``fusion``, the name the GPU
pass already has) and the CPU multi-output fusion as ``cpu-multi-output-fusion``.
"""
from __future__ import annotations

from passes.pipelines import SIMPLIFICATION, Fix, PassSpec, Seq

CPU_PIPELINE_NAMES = ("sharding-removal", "HLO passes through layout assignment",
                      "hlo normalization", "HLO passes after layout assignment", "cpu")

_missing: dict[str, list[str]] = {}


def _layout_sensitive_algsimp() -> PassSpec:
    from passes.algsimp.options import AlgebraicSimplifierOptions
    return PassSpec("algsimp", required=True,
                    options=AlgebraicSimplifierOptions(is_layout_sensitive=True))


def _raw_specs() -> dict:
    sharding = Seq("sharding-removal", ["flatten-call-graph", "sharding-remover", "dce"])
    simplification = Fix(Seq("simplification", list(SIMPLIFICATION.body.items)))
    post_scatter = Fix(Seq("post_scatter_expansion_simplification",
                           list(SIMPLIFICATION.body.items)))
    through = Seq("HLO passes through layout assignment", [
        "batched_gather_scatter_normalizer", "result_caster", "dot_decomposer",
        "operand_upcaster", "rng-expander", "rng-bit-generator-expander",
        "zero_sized_hlo_elimination", "dynamic-index-splitter", "conditional-to-select",
        "map-inline", "topk-decomposer", "comparison-expander", "cholesky_expander",
        "qr_expander", "eigh_expander", "triangular_solve_expander",
        "all_to_all_decomposer", "stochastic_convert_decomposer", "call-inliner",
        "batch-dot-simplification", "dot_decomposer", "all-reduce-promotion",
        "float-normalization-bf16", "float-normalization-f8", "float-normalization-s4",
        "batch-dot-simplification",
        PassSpec("convolution-group-converter", convert_batch_groups_only=True),
        "batchnorm_expander", "logistic-expander", "conditional-canonicalizer",
        "dynamic_dimension_simplifier", "dynamic_padder", "convolution-canonicalization",
        "change-op-data-type", simplification, "select-and-scatter-expander",
        PassSpec("scatter_expander", mode="all"), post_scatter,
        "bitcast-dtypes-expander", "topk-rewriter", "transpose-folding", "cse",
        "opt-barrier-expander", "tuple-simplifier", "while-loop-trip-count-annotator",
        "flatten-call-graph", "cpu-layout-assignment", "subbyte-normalization",
        "shape-canonicalizer", "literal-canonicalizer"])
    normalization = Seq("hlo normalization", [
        "reshape-decomposer", "reduce-decomposer", "broadcast_canonicalizer"])
    after = Seq("HLO passes after layout assignment", [
        "reshape-decomposer", "cpu-instruction-fusion", "fusion-wrapper",
        "cpu-multi-output-fusion", "tuple-simplifier", "all-reduce-combiner",
        "tuple-simplifier",
        Fix(Seq("simplification after layout assignment", [
            _layout_sensitive_algsimp(), "dce", "cse"])),
        "parallel-task-assigner", "dce", "optimize_input_output_buffer_alias",
        "copy-insertion", "small-while-loop-hoisting", "dce"])
    stages = [sharding, through, normalization, after]
    specs = {s.name: s for s in stages}
    specs["cpu"] = Seq("cpu", stages)
    return specs


def _prune(spec, available: set, path: str):
    if isinstance(spec, str):
        if str(spec) in available:
            return spec
        _missing.setdefault(path, []).append(str(spec))
        return None
    if isinstance(spec, Fix):
        body = _prune(spec.body, available, path)
        return None if body is None else Fix(body, spec.max_iterations)
    items = [x for x in (_prune(i, available, spec.name) for i in spec.items)
             if x is not None]
    return Seq(spec.name, items)


def missing_passes() -> dict[str, list[str]]:
    """pipeline -> XLA passes it names that hlo-opt has not ported (left out)."""
    return {k: sorted(set(v)) for k, v in _missing.items()}


# Registered passes that XLA's CPU pipeline runs but hlo-opt leaves out on purpose:
# the GPU versions would make GPU decisions (layouts, copies) that XLA:CPU does not.
EXCLUDED = {"copy-insertion": "the GPU copy insertion; the CPU backend's buffer "
                              "assignment copies while-loop state itself"}


def register_cpu_pipelines(table) -> dict:
    from passes.registry import pass_names
    _missing.clear()
    available = set(pass_names()) - set(EXCLUDED)
    specs = {name: _prune(spec, available, name) for name, spec in _raw_specs().items()}
    for name in EXCLUDED:
        for path, items in list(_missing.items()):
            _missing[path] = [f"{name} ({EXCLUDED[name]})" if x == name else x
                              for x in items]
    table.update(specs)
    return specs
