"""Helpers for the triage tests."""
from __future__ import annotations

import dataclasses

from hlo_opt.flags import DebugOptions
from hlo_opt.passes_api import PipelineFactory
from hlo_opt.text.parser import parse_hlo
from hlo_opt.triage.invocations import InvocationLog, optimize_with

from ..conftest import SAMPLES


def sample_text(name: str) -> str:
    return (SAMPLES / name).read_text()


def gpu_options(priority_fusion: bool = True, gemm_epilogues: bool = True) -> DebugOptions:
    """``gemm_epilogues=False`` keeps elementwise neighbours out of the gemms (no cuBLASLt
    epilogues, no Triton gemm fusions): with XLA's defaults matmul_bias_gelu is one custom
    call with a BIAS_GELU epilogue, and mlp_train_step's gemm fusions leave fusion_merger
    nothing to merge, so the fusion passes would have nothing to act on."""
    return dataclasses.replace(DebugOptions(), xla_gpu_enable_priority_fusion=priority_fusion,
                               xla_gpu_enable_cublaslt=gemm_epilogues,
                               xla_gpu_enable_triton_gemm=gemm_epilogues)


def before_first_change(text: str, pass_name: str, options: DebugOptions,
                        pipeline: str = "gpu"):
    """(module text just before the first invocation of ``pass_name`` that changed the
    module in ``pipeline``, that invocation's pass object)."""
    log = InvocationLog(snapshots=True)
    module = parse_hlo(text, "<sample>")
    optimize_with(PipelineFactory(pipeline=pipeline), module, options, log)
    before = text
    for inv, changed in zip(log.invocations, log.changed):
        if inv.pass_name == pass_name and changed:
            return before, inv.pass_obj
        if changed:
            before = log.snapshots[inv.index]
    raise AssertionError(f"{pass_name} never changed the module")
