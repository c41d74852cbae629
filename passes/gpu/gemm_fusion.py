"""``triton-gemm-rewriter``: XLA's GemmFusion (the name its ``name()`` returns), run
before ``cublas-gemm-rewriter`` when ``--xla_gpu_enable_triton_gemm`` (the default) is on
and the GPU is Ampere or newer.

Every ``dot`` the Triton GEMM emitter can take (``_triton_gemm.plan_dot_fusion``) and
that is worth it becomes a ``kCustom`` fusion named ``gemm_fusion_<dot>`` calling
``gemm_fusion_<dot>_computation``, with backend_config
``{"fusion_backend_config":{"kind":"__triton_gemm"}}``: the dot (the hero), the producers
fused into its operands (converts, transposes, broadcasts, elementwise ops, copied when
they have other users, as XLA does), and the chain of users fused after it (scale,
convert, negate, bitcast ...).  Not fused, as XLA:

* dots smaller than ``--xla_gpu_gemm_rewrite_size_threshold`` that the classical
  emitters can compute (they stay dots and fuse as loops);
* "pure matmuls" (nothing around the dot but bitcasts and reshapes): cuBLAS does them,
  unless cuBLAS would need padding that ``cublas-pad-for-gemms`` left out because this
  pass was expected to take the dot.

The tile configuration is chosen later (``gemm-algorithm-picker``: XLA's default at
autotune level 0, a measured choice above it).
"""
from __future__ import annotations

import json

from hlo_opt.codegen.gemm_fusion import TRITON_GEMM_KIND
from hlo_opt.ir.computation import Computation
from hlo_opt.rewrite.fusion import clone_into
from hlo_opt.rewrite.graph import add_computation, replace_and_remove_dead

from ._computations import nonfusion_computations
from ._triton_gemm import plan_dot_fusion
from .cublas_pad_for_gemms import PADDING_REQUIREMENTS
from .gemm_rewriter import matmul_too_small, supported_by_classical_emitters

def cublas_requires_padding(dot, device) -> bool:
    """CublasRequiresPadding: a padding requirement of the GPU for the dot's type that
    one of the operands' (or the result's) two minor dimensions misses."""
    for min_cc, datatype, multiple in PADDING_REQUIREMENTS:
        if device.compute_capability < min_cc or \
                dot.operands[0].shape.element_type != datatype:
            continue
        for s in (dot.operands[0].shape, dot.operands[1].shape, dot.shape):
            if any(d % multiple for d in s.dims[-2:]):
                return True
    return False


def _build(dot, plan) -> None:
    comp = dot.parent
    module = comp.module
    name = f"gemm_fusion_{dot.name}"
    fc = Computation(f"{name}_computation")
    fc.execution_thread = comp.execution_thread
    add_computation(module, fc)
    mapped: dict = {}
    operands: list = []

    def inside(x):
        hit = mapped.get(x)
        if hit is not None:
            return hit
        if x in plan.fused:
            new = clone_into(fc, x, [inside(o) for o in x.operands])
        else:
            n = len(operands)
            new = fc.add("parameter", x.shape, name=f"parameter_{n}", payload=str(n))
            operands.append(x)
        mapped[x] = new
        return new

    root = clone_into(fc, dot, [inside(o) for o in dot.operands])
    mapped[dot] = root
    for user in plan.users:
        root = clone_into(fc, user, [inside(o) for o in user.operands])
        mapped[user] = root
    fc.root = root
    out = plan.output
    attrs = {"kind": "kCustom", "calls": ""}
    if "metadata" in dot.attrs:
        attrs["metadata"] = dot.attrs["metadata"]
    fusion = comp.add("fusion", out.shape, operands, name=name, attrs=attrs, called=[fc],
                      called_attr="calls")
    fusion.attrs["backend_config"] = json.dumps(
        {"operation_queue_id": "0", "wait_on_operation_queues": [],
         "fusion_backend_config": {"kind": TRITON_GEMM_KIND},
         "force_earliest_schedule": False}, separators=(",", ":"))
    replace_and_remove_dead(comp, out, fusion)


class GemmFusion:
    name = "triton-gemm-rewriter"

    def run(self, module) -> bool:
        options = module.config.debug_options
        device = module.config.device
        if not device.is_at_least_ampere:
            return False
        threshold = options.xla_gpu_gemm_rewrite_size_threshold
        any_gemm = options.xla_gpu_triton_gemm_any
        changed = False
        for comp in nonfusion_computations(module):
            for dot in comp.post_order():
                if dot.opcode != "dot" or dot.parent is not comp:
                    continue
                if matmul_too_small(dot, threshold) and supported_by_classical_emitters(dot):
                    continue
                plan = plan_dot_fusion(dot, device, any_gemm)
                if plan is None:
                    continue
                if not plan.want and not cublas_requires_padding(dot, device):
                    continue
                _build(dot, plan)
                changed = True
        return changed
