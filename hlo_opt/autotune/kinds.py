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


def compared_outputs(inst, kind: str | None) -> list[int]:
    """Which outputs are checked against the reference: a gemm's result only (XLA compares
    ``OutputBuffer()``: not the auxiliary output, not the workspace), a convolution's
    results without the trailing scratch buffer, every output of anything else."""
    n = len(inst.shape.tuple_shapes) if inst.shape.is_tuple() else 1
    if kind == "gemm":
        return [0]
    if kind == "conv" and inst.shape.is_tuple() and n > 1:
        return list(range(n - 1))
    return list(range(n))
