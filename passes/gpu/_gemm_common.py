"""What the cuBLAS passes share: the custom-call targets, XLA's ``gemm_backend_config``
(read / written as JSON in ``backend_config``), the names XLA gives the calls, and the
graph matchers of the epilogue patterns (optional slice / bitcast / convert around a
gemm, broadcast constants)."""
from __future__ import annotations

import json

from hlo_opt.errors import PassError
from hlo_opt.ir.attributes import parse_string
from hlo_opt.ir.instruction import Instruction

GEMM_TARGET = "__cublas$gemm"
LT_TARGET = "__cublas$lt$matmul"
GEMM_TARGETS = (GEMM_TARGET, LT_TARGET)

# cuBLASLt epilogues with an auxiliary output (the pre-activation) as tuple element 1
AUX_EPILOGUES = frozenset({"GELU_AUX", "BIAS_GELU_AUX"})


def read_config(inst: Instruction) -> dict:
    """The backend_config JSON object ({} when absent); a user's config that is not one
    is a PassError naming the instruction, not a JSONDecodeError."""
    raw = inst.attrs.get("backend_config", "").strip()
    try:
        if raw.startswith('"'):
            raw = parse_string(raw)
        config = json.loads(raw) if raw else {}
    except (ValueError, RecursionError) as e:
        raise PassError(f"%{inst.name}: backend_config is not JSON ({str(e)[:80]})") \
            from None
    if not isinstance(config, dict):
        raise PassError(f"%{inst.name}: backend_config is not a JSON object")
    return config


def write_config(inst: Instruction, config: dict) -> None:
    inst.attrs["backend_config"] = json.dumps(config, separators=(",", ":"))


def gemm_config(inst: Instruction) -> dict:
    return read_config(inst).get("gemm_backend_config", {})


def set_gemm_config(inst: Instruction, gemm: dict) -> None:
    config = read_config(inst)
    config["gemm_backend_config"] = gemm
    write_config(inst, config)


def is_gemm(inst: Instruction, targets=GEMM_TARGETS) -> bool:
    return inst.opcode == "custom-call" and inst.custom_call_target in targets


def gemm_name(target: str, batch: bool) -> str:
    """SetName: ``cublas-lt-matmul``, ``cublas-batch-gemm`` or ``cublas-gemm``."""
    if target == LT_TARGET:
        return "cublas-lt-matmul"
    return "cublas-batch-gemm" if batch else "cublas-gemm"


def is_batched(cfg: dict) -> bool:
    d = cfg.get("dot_dimension_numbers", {})
    return bool(d.get("lhs_batch_dimensions") or d.get("rhs_batch_dimensions"))


# ---- matchers ----------------------------------------------------------------------------

def any_order(inst: Instruction):
    """(a, b) and, if different, (b, a) for a binary instruction (XLA's *AnyOrder)."""
    a, b = inst.operands[0], inst.operands[1]
    yield a, b
    if a is not b:
        yield b, a


def scalar_value(inst: Instruction):
    """The value of a rank-0, non-elided constant, else None."""
    if inst.opcode != "constant" or inst.shape.rank != 0 or inst.literal.elided:
        return None
    return inst.literal.array.reshape(()).item()


def is_constant_scalar(inst: Instruction, value=None) -> bool:
    v = scalar_value(inst)
    return v is not None and (value is None or v == value)


def bcast_const(inst: Instruction, value=None) -> bool:
    """m::Broadcast(m::ConstantScalar(value))."""
    return inst.opcode == "broadcast" and is_constant_scalar(inst.operands[0], value)


_EPSILON = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 2.0 ** -23, "f64": 2.0 ** -52}


def bcast_const_near(inst: Instruction, expected: float) -> bool:
    """BcastConstScalarNear: within 128 epsilons (relative) of ``expected``."""
    if inst.opcode != "broadcast":
        return False
    v = scalar_value(inst.operands[0])
    eps = _EPSILON.get(inst.operands[0].shape.element_type)
    if v is None or eps is None:
        return False
    v = float(v.real if isinstance(v, complex) else v)
    return abs(v - expected) < abs(v + expected) * 128 * eps


def through_slice_or_bitcast(x: Instruction, targets=GEMM_TARGETS, slice_ok=True,
                             bitcast_ok=True):
    """(gemm, wrapper) when ``x`` is a gemm (wrapper None) or a slice / bitcast of one."""
    if is_gemm(x, targets):
        return x, None
    if ((x.opcode == "slice" and slice_ok) or (x.opcode == "bitcast" and bitcast_ok)) \
            and is_gemm(x.operands[0], targets):
        return x.operands[0], x
    return None, None


def optional_bitcast_slice(x: Instruction, targets=GEMM_TARGETS):
    """OptionalBitcast(OptionalSlice(gemm.WithOneUser()).WithOneUser()): (gemm, slice,
    bitcast) or (None, None, None)."""
    bitcast = slice_ = None
    if x.opcode == "bitcast":
        bitcast, x = x, x.operands[0]
        if x.user_count != 1:
            return None, None, None
    if x.opcode == "slice":
        slice_, x = x, x.operands[0]
    if not is_gemm(x, targets) or x.user_count != 1:
        return None, None, None
    return x, slice_, bitcast


def chops_ends_only(slice_: Instruction) -> bool:
    """A slice with zero starts and unit strides (it only drops the ends of dims)."""
    spec = slice_.attr("slice")
    return all(start == 0 and stride == 1 for start, _, stride in spec.dims)
