"""Which instructions the algorithm pickers tune (custom-call targets are XLA's)."""
from __future__ import annotations

GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")
CONV_TARGETS = ("__cudnn$convForward", "__cudnn$convBackwardInput",
                "__cudnn$convBackwardFilter", "__cudnn$convBiasActivationForward")


def default_kind_of(inst) -> str | None:
    if inst.opcode != "custom-call":
        return None
    target = inst.custom_call_target
    if target in GEMM_TARGETS:
        return "gemm"
    if target in CONV_TARGETS:
        return "conv"
    return None
