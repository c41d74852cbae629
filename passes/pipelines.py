"""The named pipelines, as data (``hlo-opt --pipeline NAME``, ``hlo-opt pipelines``).

A spec is a pass name (a string, XLA's spelling), ``Seq(name, [items])`` for a pipeline,
or ``Fix(item, max_iterations=25)`` for a fixpoint (XLA's ``HloPassFix``).  Pipeline names
follow XLA's GPU compiler (``optimization``, ``simplification``, ...).  To add a pass to a
pipeline, add its name to the list; :func:`build_pipeline` resolves every name through the
registry and fails loudly (``Pass <x> not found.``) on a name that is not registered.
"""
from __future__ import annotations

from dataclasses import dataclass

from hlo_opt.errors import PassError

__all__ = ["PIPELINES", "Fix", "PassSpec", "Seq", "build_pipeline", "pipeline_names", "spec_pass_names"]


@dataclass(frozen=True)
class Seq:
    """A pipeline: ``name`` and its items (pass names, Seq, Fix) run in order."""

    name: str
    items: tuple

    def __init__(self, name: str, items):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "items", tuple(items))


@dataclass(frozen=True)
class Fix:
    """Repeat ``body`` (a pass name or a Seq) until it changes nothing (at most N times)."""

    body: "Seq | str"
    max_iterations: int = 25

    @property
    def name(self) -> str:
        return self.body if isinstance(self.body, str) else self.body.name


class PassSpec(str):
    """A pass name with constructor arguments, e.g. ``PassSpec("fusion",
    may_duplicate=False)``.  It *is* the name (a ``str``), so a pipeline builder that does
    not know about arguments creates the pass with its defaults; a spec whose arguments
    are ``required`` (the pass would be wrong with its defaults) is left out instead
    while the builder cannot pass them (see :func:`kwargs_supported`)."""

    def __new__(cls, name: str, required: bool = False, **kwargs):
        obj = super().__new__(cls, name)
        obj.kwargs = dict(kwargs)
        obj.required = required
        return obj

    def __reduce__(self):
        return (PassSpec, (str(self), self.required), {"kwargs": self.kwargs})


# The simplification fixpoint: XLA's GPU "simplification" HloPassFix<HloPassPipeline>, in
# the seed's order (shared/seeds/002: GpuCompiler::OptimizeHloModule).
SIMPLIFICATION = Fix(Seq("simplification", [
    "batchnorm_expander",
    "algsimp",
    "simplify-sorts",
    "tuple-simplifier",
    "while-loop-constant-sinking",
    "simplify-while-loops",
    "slice-sinker",
    "dce",
    "reshape-mover",
    "constant_folding",
    "simplify-conditional",
]))

PIPELINES: "dict[str, Seq | Fix]" = {
    # XLA's GPU "optimization" pipeline in the seed's order; the seed's passes we do not
    # have (gpu_hlo_support_checker, element_type_converter,
    # hlo-get-dimension-size-rewriter) are the only ones left out.
    "optimization": Seq("optimization", [
        "zero_sized_hlo_elimination",
        "dynamic-index-splitter",
        "call-inliner",
        "dot_decomposer",
        # XLA's GPU compiler converts batch groups only (its cost model declines the rest);
        # expanding feature groups would make depthwise convolutions dense, 32-64x the flops.
        PassSpec("convolution-group-converter", convert_batch_groups_only=True),
        "stable-sort-expander",
        SIMPLIFICATION,
        SIMPLIFICATION,
        SIMPLIFICATION,
        "zero_sized_hlo_elimination",
        "transpose-folding",
        "cse",
        "dce",
        "while-loop-trip-count-annotator",
    ]),
    "simplification": SIMPLIFICATION,
    # Clean-up only: what a pass test runs after the pass under test.
    "cleanup": Seq("cleanup", ["tuple-simplifier", "dce"]),
}


_gpu_registered = False


def _ensure_gpu_pipelines() -> None:
    """The GPU compiler's pipelines (`gpu` and its stages) live in passes/gpu_pipelines.py;
    they join the table on first use (importing them here at load time would be circular)."""
    global _gpu_registered
    if not _gpu_registered:
        _gpu_registered = True
        from passes.gpu_pipelines import register_gpu_pipelines
        register_gpu_pipelines(PIPELINES)
        from passes.cpu_pipelines import register_cpu_pipelines
        register_cpu_pipelines(PIPELINES)


def pipeline_names() -> list[str]:
    _ensure_gpu_pipelines()
    return sorted(PIPELINES)


def _build(spec):
    from hlo_opt.pipeline import Fixpoint, Pipeline
    if isinstance(spec, str):
        kwargs = getattr(spec, "kwargs", None)
        if kwargs:  # a pass name with constructor arguments (PassSpec)
            from passes.registry import create_pass
            return create_pass(str(spec), **kwargs)
        return spec  # resolved (and checked) by Pipeline.add through the registry
    if isinstance(spec, Seq):
        return Pipeline(spec.name, [_build(item) for item in spec.items])
    if isinstance(spec, Fix):
        return Fixpoint(_build(spec.body), max_iterations=spec.max_iterations)
    raise TypeError(f"bad pipeline spec item: {spec!r}")


def build_pipeline(name: str):
    """A fresh Pipeline (or Fixpoint) with new pass instances for ``name``."""
    _ensure_gpu_pipelines()
    spec = PIPELINES.get(name)
    if spec is None:
        raise PassError(f"INVALID_ARGUMENT: Pipeline {name} not found. Known pipelines: "
                        f"{', '.join(pipeline_names())}")
    return _build(spec)


def spec_pass_names(spec) -> list[str]:
    """Every pass name a spec mentions, in order (with repeats)."""
    if isinstance(spec, str):
        return [spec]
    if isinstance(spec, Fix):
        return spec_pass_names(spec.body)
    out: list[str] = []
    for item in spec.items:
        out += spec_pass_names(item)
    return out

