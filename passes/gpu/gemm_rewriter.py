"""``cublas-gemm-rewriter``: XLA's GemmRewriter (+ GemmWorkspaceRewriter).

* A matrix (or matrix-vector) ``dot`` of a type cuBLAS supports becomes
  ``custom-call(lhs, rhs), custom_call_target="__cublas$gemm"`` (``__cublas$lt$matmul``
  with ``--xla_gpu_enable_cublaslt``) whose ``backend_config`` holds XLA's
  ``gemm_backend_config`` JSON (alpha, beta, dot dimension numbers, precision, epilogue,
  strides).  Dots smaller than ``--xla_gpu_gemm_rewrite_size_threshold`` stay dots.
* Folded into the call, bottom-up as XLA's visitor does: ``multiply(gemm,
  broadcast(c))`` -> alpha; ``add(gemm, C)`` with C not a broadcast and overwritable
  -> beta = 1 and C as third operand (aliased with the output for legacy cuBLAS).
  With cuBLASLt also the epilogues: ``add(gemm, broadcast(bias))`` -> BIAS,
  ``maximum(gemm, 0)`` -> RELU / BIAS_RELU, the tanh approximation of GELU -> GELU /
  BIAS_GELU (the ``_AUX`` forms, which keep the pre-activation as a second output, are
  not formed: the interpreter cannot run them).
* Finally every cuBLAS call gets its workspace: the result becomes the tuple
  ``(out, s8[bytes])`` (32 MiB on Hopper, 4 MiB before; legacy calls at most the size of
  their operands) and users read ``get-tuple-element(..., index=0)``.

The interpreter runs these custom-calls with the semantics of the instructions they
replaced (``hlo_opt/backends/interpreter/ops_custom_call.py``).
"""
from __future__ import annotations

import json
import math

from hlo_opt.analysis.layout import minor_to_major
from hlo_opt.ir.attributes import parse_string
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from ..registry import register
from ._graph import add_gte, fusible_computations, remove_dead_operands
from ._options import device_for, options_for

GEMM_TARGET = "__cublas$gemm"
LT_TARGET = "__cublas$lt$matmul"
DEFAULT_WORKSPACE = 4 * 1024 * 1024
HOPPER_WORKSPACE = 32 * 1024 * 1024

_MATMUL_TYPES = frozenset({"f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64", "c64", "c128"})
_EPILOGUE_TYPES = frozenset({"f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64"})
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# ---- backend config ----------------------------------------------------------------------

def read_config(inst: Instruction) -> dict:
    raw = inst.attrs.get("backend_config", "").strip()
    if raw.startswith('"'):
        raw = parse_string(raw)
    return json.loads(raw) if raw else {}


def write_config(inst: Instruction, config: dict) -> None:
    inst.attrs["backend_config"] = json.dumps(config, separators=(",", ":"))


def gemm_config(inst: Instruction) -> dict:
    return read_config(inst).get("gemm_backend_config", {})


def _set_gemm_config(inst: Instruction, gemm: dict) -> None:
    config = read_config(inst)
    config["gemm_backend_config"] = gemm
    write_config(inst, config)


def _precision(inst: Instruction) -> dict:
    raw = inst.attrs.get("operand_precision")
    prec = ["DEFAULT", "DEFAULT"]
    if raw:
        prec = [p.strip().upper() for p in raw.strip("{}").split(",")]
    out = {"operand_precision": prec, "algorithm": "ALG_UNSET"}
    if "algorithm" in inst.attrs:
        out["algorithm"] = inst.attrs["algorithm"].strip().upper()
    return out


def is_gemm(inst: Instruction, targets=(GEMM_TARGET, LT_TARGET)) -> bool:
    return inst.opcode == "custom-call" and inst.custom_call_target in targets


# ---- which dots ---------------------------------------------------------------------------

def _dims(inst: Instruction):
    return (list(inst.attr("lhs_batch_dims", ())), list(inst.attr("lhs_contracting_dims", ())),
            list(inst.attr("rhs_batch_dims", ())), list(inst.attr("rhs_contracting_dims", ())))


def is_matrix_multiplication(dot: Instruction) -> bool:
    lb, lc, rb, rc = _dims(dot)
    lhs, rhs = dot.operands[0].shape, dot.operands[1].shape
    out_t = dot.shape.element_type
    allowed = out_t in _MATMUL_TYPES or (out_t == "s32" and lhs.element_type == "s8"
                                         and rhs.element_type == "s8")
    b = len(lb)
    return (allowed and lhs.rank == b + 2 and rhs.rank == b + 2 and dot.shape.rank == b + 2
            and lhs.num_elements() > 0 and rhs.num_elements() > 0
            and len(lc) == 1 and len(rc) == 1)


def is_matrix_vector_multiplication(dot: Instruction) -> bool:
    lb, lc, rb, rc = _dims(dot)
    lhs, rhs = dot.operands[0].shape, dot.operands[1].shape
    b = len(lb)
    out_t = dot.shape.element_type
    allowed = out_t in _MATMUL_TYPES or (out_t == "s32" and lhs.element_type == "s8"
                                         and rhs.element_type == "s8")
    return (allowed and dot.shape.rank == b + 1 and len(lc) == 1 and len(rc) == 1
            and ((lhs.rank == b + 2 and rhs.rank == b + 1) or
                 (lhs.rank == b + 1 and rhs.rank == b + 2))
            and lhs.num_elements() > 0 and rhs.num_elements() > 0)


def matmul_too_small(dot: Instruction, threshold: int) -> bool:
    """IsMatrixMultiplicationTooSmallForRewriting: the unbatched operand matrices hold
    fewer than ``threshold`` elements in total."""
    lb, lc, rb, rc = _dims(dot)
    lhs, rhs = dot.operands[0].shape, dot.operands[1].shape
    k = math.prod(lhs.dims[d] for d in lc)
    lhs_nc = math.prod(lhs.dims[d] for d in range(lhs.rank) if d not in lb and d not in lc)
    rhs_nc = math.prod(rhs.dims[d] for d in range(rhs.rank) if d not in rb and d not in rc)
    return lhs_nc * k + rhs_nc * k < threshold


def supported_by_classical_emitters(dot: Instruction) -> bool:
    return not (dot.operands[0].shape.element_type == "s8" and dot.shape.element_type == "s32")


# ---- the rewrite ----------------------------------------------------------------------------

def _strides(lhs: Shape, rhs: Shape, nbatch: int) -> tuple[int, int]:
    def stride(s):
        if s.rank == nbatch + 1:
            return s.dims[nbatch]
        return s.dims[nbatch] * s.dims[nbatch + 1]
    return stride(lhs), stride(rhs)


def _frontend_flag(inst: Instruction, key: str) -> bool:
    raw = inst.attrs.get("frontend_attributes", "")
    return f'{key}="true"' in raw.replace(" ", "")


def _gemm_name(target: str, batch: bool) -> str:
    if target == LT_TARGET:
        return "cublas-lt-matmul"
    return "cublas-batch-gemm" if batch else "cublas-gemm"


class _Rewriter:
    def __init__(self, module, comp):
        self.options = options_for(module)
        self.device = device_for(module)
        self.comp = comp
        self.changed = False

    # -- dot --
    def handle_dot(self, dot: Instruction) -> None:
        if not (is_matrix_multiplication(dot) or is_matrix_vector_multiplication(dot)):
            return
        if "sparsity" in dot.attrs:
            return
        if matmul_too_small(dot, self.options.xla_gpu_gemm_rewrite_size_threshold) and \
                supported_by_classical_emitters(dot):
            return
        lb, lc, rb, rc = _dims(dot)
        lhs, rhs = dot.operands
        lhs_stride, rhs_stride = _strides(lhs.shape, rhs.shape, len(lb))
        gemm = {
            "alpha_real": 1, "beta": 0,
            "dot_dimension_numbers": {
                "lhs_contracting_dimensions": [str(d) for d in lc],
                "rhs_contracting_dimensions": [str(d) for d in rc],
                "lhs_batch_dimensions": [str(d) for d in lb],
                "rhs_batch_dimensions": [str(d) for d in rb]},
            "alpha_imag": 0,
            "precision_config": _precision(dot),
            "epilogue": "DEFAULT",
            "lhs_stride": str(lhs_stride), "rhs_stride": str(rhs_stride),
            "grad_x": _frontend_flag(dot, "grad_x"), "grad_y": _frontend_flag(dot, "grad_y"),
            "damax_output": False}
        target = self._target(dot)
        attrs = {"custom_call_target": json.dumps(target)}
        if "metadata" in dot.attrs:
            attrs["metadata"] = dot.attrs["metadata"]
        call = self.comp.add("custom-call", dot.shape, [lhs, rhs],
                             name=_gemm_name(target, bool(lb)), attrs=attrs)
        write_config(call, {"operation_queue_id": "0", "wait_on_operation_queues": [],
                            "gemm_backend_config": gemm, "force_earliest_schedule": False})
        self._replace(dot, call)

    def _target(self, dot: Instruction) -> str:
        if not self.options.xla_gpu_enable_cublaslt:
            return GEMM_TARGET
        if "s8" in (dot.operands[0].shape.element_type, dot.operands[1].shape.element_type):
            return GEMM_TARGET
        return LT_TARGET

    # -- multiply: alpha and GELU --
    def handle_multiply(self, inst: Instruction) -> None:
        for g, other in _any_order(inst):
            if is_gemm(g) and g.user_count == 1 and other.opcode == "broadcast" and \
                    other.user_count == 1 and _is_constant_scalar(other.operands[0]):
                if g.shape.element_type == "s32":
                    return
                cfg = gemm_config(g)
                if cfg.get("beta", 0) == 0 and g.user_count == 1:
                    c = other.operands[0].literal.array.reshape(()).item()
                    alpha = complex(cfg.get("alpha_real", 1), cfg.get("alpha_imag", 0)) * complex(c)
                    cfg["alpha_real"] = _num(alpha.real)
                    cfg["alpha_imag"] = _num(alpha.imag)
                    _set_gemm_config(g, cfg)
                    self._replace(inst, g)
                    return
        for g, cdf in _any_order(inst):
            if is_gemm(g, (LT_TARGET,)) and cdf.user_count == 1 and _matches_gelu_cdf(cdf, g):
                self._fuse_gelu(inst, g)
                return

    def _fuse_gelu(self, multiply: Instruction, g: Instruction) -> None:
        if g.shape.element_type not in _EPILOGUE_TYPES:
            return
        if g.user_count > 4:
            return  # GELU_AUX: the pre-activation is needed elsewhere (not formed here)
        cfg = gemm_config(g)
        epilogue = {"DEFAULT": "GELU", "BIAS": "BIAS_GELU"}.get(cfg.get("epilogue", "DEFAULT"))
        if epilogue is None:
            return
        cfg["epilogue"] = epilogue
        new = self._clone_gemm(g, g.operands, cfg)
        self._replace(multiply, new)

    # -- add: matrix and vector bias --
    def handle_add(self, inst: Instruction) -> None:
        for g, b in _any_order(inst):
            if is_gemm(g, (LT_TARGET,)) and g.user_count == 1 and b.opcode == "broadcast":
                if self._fuse_vector_bias(inst, b, g):
                    return
        for g, b in _any_order(inst):
            gemm = g
            if g.opcode == "convert" and g.user_count == 1 and is_gemm(g.operands[0]):
                gemm = g.operands[0]
            if is_gemm(gemm) and gemm.user_count == 1 and b.opcode != "broadcast":
                mixed_ok = (inst.shape.element_type == gemm.shape.element_type
                            or inst.user_count == 0 or inst.is_root)
                if mixed_ok and self._fuse_matrix_bias(inst, b, gemm):
                    return

    def _fuse_matrix_bias(self, add: Instruction, bias: Instruction, g: Instruction) -> bool:
        if bias.shape.dims != g.shape.dims:
            return False
        if g.shape.element_type == "s32":
            return False
        can_overwrite = bias.user_count <= 1 and (
            bias.opcode != "parameter" or (bias.parent.is_entry and _param_aliased(bias)))
        lt = is_gemm(g, (LT_TARGET,))
        cfg = gemm_config(g)
        if cfg.get("beta", 0) != 0 or not (lt or can_overwrite) or g.user_count != 1 or \
                cfg.get("epilogue", "DEFAULT") not in ("DEFAULT", "BIAS"):
            return False
        cfg["beta"] = 1
        operands = list(g.operands)
        operands.insert(2, bias)
        new = self._clone_gemm(g, operands, cfg,
                               g.shape.with_element_type(bias.shape.element_type))
        if not lt or can_overwrite:
            new.attrs["output_to_operand_aliasing"] = "{{}: (2, {})}"
        self._replace(add, new)
        return True

    def _fuse_vector_bias(self, add: Instruction, broadcast: Instruction, g: Instruction) -> bool:
        if g.shape.element_type not in _EPILOGUE_TYPES:
            return False
        bias = broadcast.operands[0]
        cfg = gemm_config(g)
        dnums = cfg["dot_dimension_numbers"]
        num_col_dims = g.operands[1].shape.rank - len(dnums["rhs_batch_dimensions"]) - \
            len(dnums["rhs_contracting_dimensions"])
        if g.user_count != 1 or cfg.get("epilogue", "DEFAULT") != "DEFAULT" or \
                bias.shape.rank != num_col_dims:
            return False
        bdims = list(broadcast.dimensions)
        g_m2m = minor_to_major(g.shape)
        b_m2m = minor_to_major(bias.shape)
        for i in range(num_col_dims):
            dim = g_m2m[i]
            if dim not in bdims or b_m2m[i] != bdims.index(dim):
                return False
        cfg["epilogue"] = "BIAS"
        new = self._clone_gemm(g, list(g.operands) + [bias], cfg)
        self._replace(add, new)
        return True

    # -- maximum: ReLU --
    def handle_maximum(self, inst: Instruction) -> None:
        for g, z in _any_order(inst):
            if is_gemm(g, (LT_TARGET,)) and z.opcode == "broadcast" and \
                    _is_constant_scalar(z.operands[0], 0):
                if g.shape.element_type not in _EPILOGUE_TYPES or g.user_count != 1:
                    return
                cfg = gemm_config(g)
                epilogue = {"DEFAULT": "RELU", "BIAS": "BIAS_RELU"}.get(
                    cfg.get("epilogue", "DEFAULT"))
                if epilogue is None:
                    return
                cfg["epilogue"] = epilogue
                self._replace(inst, self._clone_gemm(g, g.operands, cfg))
                return

    # -- helpers --
    def _clone_gemm(self, g: Instruction, operands, cfg: dict,
                    shape: Shape | None = None) -> Instruction:
        attrs = {k: v for k, v in g.attrs.items() if k != "output_to_operand_aliasing"}
        batch = bool(cfg["dot_dimension_numbers"]["lhs_batch_dimensions"])
        new = self.comp.add("custom-call", shape or g.shape, list(operands),
                            name=_gemm_name(g.custom_call_target, batch), attrs=attrs)
        _set_gemm_config(new, cfg)
        return new

    def _replace(self, old: Instruction, new: Instruction) -> None:
        was_root = old.is_root
        operands = list(old.operands)
        old.replace_all_uses_with(new)
        if was_root:
            self.comp.root = new
        remove_dead_operands(self.comp, [old])
        remove_dead_operands(self.comp, operands)
        self.changed = True

    # -- workspace --
    def add_workspace(self, g: Instruction) -> None:
        if g.shape.is_tuple():
            return
        workspace = HOPPER_WORKSPACE if self.device.is_at_least_hopper else DEFAULT_WORKSPACE
        if g.custom_call_target == GEMM_TARGET:
            workspace = min(workspace, sum(o.shape.byte_size() for o in g.operands))
        out_shape = Shape.tuple([g.shape, Shape.array("s8", (workspace,))])
        attrs = dict(g.attrs)
        if "output_to_operand_aliasing" in attrs:
            attrs["output_to_operand_aliasing"] = "{{0}: (2, {})}"
        new = self.comp.add("custom-call", out_shape, list(g.operands), name=g.name,
                            attrs=attrs)
        gte = add_gte(self.comp, new, 0)
        self._replace(g, gte)


def _num(x: float):
    return int(x) if float(x).is_integer() else x


def _any_order(inst: Instruction):
    a, b = inst.operands[0], inst.operands[1]
    yield a, b
    if a is not b:
        yield b, a


def _is_constant_scalar(inst: Instruction, value=None) -> bool:
    if inst.opcode != "constant" or inst.shape.rank != 0 or inst.literal.elided:
        return False
    return value is None or inst.literal.array.reshape(()).item() == value


def _bcast_const_near(inst: Instruction, expected: float) -> bool:
    if inst.opcode != "broadcast" or not _is_constant_scalar(inst.operands[0]):
        return False
    actual = float(inst.operands[0].literal.array.reshape(()).item().real
                   if isinstance(inst.operands[0].literal.array.reshape(()).item(), complex)
                   else inst.operands[0].literal.array.reshape(()).item())
    eps = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 2.0 ** -23, "f64": 2.0 ** -52}.get(
        inst.shape.element_type)
    if eps is None:
        return False
    return abs(actual - expected) < abs(actual + expected) * 128 * eps


def _bcast_const(inst: Instruction, value: float) -> bool:
    return inst.opcode == "broadcast" and _is_constant_scalar(inst.operands[0], value)


def _mul_any(inst, pa, pb) -> bool:
    if inst.opcode != "multiply":
        return False
    a, b = inst.operands
    return (pa(a) and pb(b)) or (pa(b) and pb(a))


def _add_any(inst, pa, pb) -> bool:
    if inst.opcode != "add":
        return False
    a, b = inst.operands
    return (pa(a) and pb(b)) or (pa(b) and pb(a))


def _matches_gelu_cdf(cdf: Instruction, x: Instruction) -> bool:
    """0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x))), any operand order,
    every intermediate with one user (XLA's pattern)."""
    def one(p):
        return lambda i: i.user_count == 1 and p(i)

    def is_x(i):
        return i is x

    x_cubed = one(lambda i: _mul_any(i, is_x, one(lambda j: _mul_any(j, is_x, is_x))))
    inner = one(lambda i: _add_any(i, is_x, one(lambda j: _mul_any(
        j, lambda k: _bcast_const_near(k, 0.044715), x_cubed))))
    scaled = one(lambda i: _mul_any(i, lambda k: _bcast_const_near(k, _SQRT_2_OVER_PI), inner))
    tanh = one(lambda i: i.opcode == "tanh" and scaled(i.operands[0]))
    one_plus = one(lambda i: _add_any(i, lambda k: _bcast_const(k, 1.0), tanh))
    return _mul_any(cdf, lambda k: _bcast_const(k, 0.5), one_plus)


def _param_aliased(param: Instruction) -> bool:
    module = param.parent.module
    raw = module.header_attrs.get("input_output_alias", "") if module is not None else ""
    return f"({param.parameter_number}," in raw.replace(" ", "")


@register
class GemmRewriter:
    name = "cublas-gemm-rewriter"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            rw = _Rewriter(module, comp)
            for inst in comp.post_order():
                if inst.parent is not comp:
                    continue
                handler = getattr(rw, f"handle_{inst.opcode}", None)
                if handler is not None:
                    handler(inst)
            for inst in comp.post_order():
                if inst.parent is comp and is_gemm(inst):
                    rw.add_workspace(inst)
            changed |= rw.changed
        return changed
