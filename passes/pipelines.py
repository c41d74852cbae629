"""The named pipelines (``hlo-opt --pipeline NAME``, ``hlo-opt pipelines``): one explicit
table, sorted by name, of plain functions ``f(config) -> Pipeline | Fixpoint`` that build
fresh pass instances from the module config.  Pipeline names follow XLA's GPU compiler
(``optimization``, ``simplification``, ...); the GPU ones live in ``gpu_pipelines.py``,
the CPU ones (``cpu`` and its stages) in ``cpu_pipelines.py``.
An unknown pipeline or pass name is a :class:`PassError`.
"""
from __future__ import annotations

from typing import Callable

from hlo_opt.errors import PassError
from hlo_opt.ir.config import HloModuleConfig
from hlo_opt.pipeline import Fixpoint, Pipeline
from passes import cpu_pipelines as c
from passes import gpu_pipelines as g
from passes.registry import create_pass

__all__ = ["PIPELINES", "build_pipeline", "cleanup", "pipeline_names"]


def cleanup(config: HloModuleConfig) -> Pipeline:
    """Clean-up only: what a pass test runs after the pass under test."""
    return Pipeline("cleanup", [create_pass("tuple-simplifier"), create_pass("dce")])


PIPELINES: dict[str, Callable[[HloModuleConfig], "Pipeline | Fixpoint"]] = {
    "GPU-ir-emit-prepare": g.ir_emit_prepare,
    "HLO passes after layout assignment": c.after_layout_assignment,
    "HLO passes through layout assignment": c.through_layout_assignment,
    "cleanup": cleanup,
    "collective-optimizations": g.collective_optimizations,
    "conv-canonicalization": g.conv_canonicalization,
    "cpu": c.cpu,
    "fusion": g.fusion,
    "gpu": g.gpu,
    "hlo normalization": c.hlo_normalization,
    "horizontal-fusion": g.horizontal_fusion,
    "layout assignment": g.layout_assignment,
    "nvptx post-layout-assignment part 1": g.nvptx_post_layout_part1,
    "nvptx post-layout-assignment part 2": g.nvptx_post_layout_part2,
    "optimization": g.optimization,
    "post-fusion-optimization": g.post_fusion_optimization,
    "post-layout-assignment": g.post_layout_assignment,
    "sharding-removal": c.sharding_removal,
    "simplification": g.simplification,
    "spmd-simplify": g.spmd_simplify,
}


def pipeline_names() -> list[str]:
    return sorted(PIPELINES)


def build_pipeline(name: str, config: HloModuleConfig | None = None) -> "Pipeline | Fixpoint":
    """A fresh Pipeline (or Fixpoint) with new pass instances for ``name``, built for
    ``config`` (default: :class:`HloModuleConfig`'s defaults)."""
    builder = PIPELINES.get(name)
    if builder is None:
        raise PassError(f"INVALID_ARGUMENT: Pipeline {name} not found. Known pipelines: "
                        f"{', '.join(pipeline_names())}")
    return builder(config if config is not None else HloModuleConfig())
