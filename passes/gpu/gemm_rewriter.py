"""``cublas-gemm-rewriter``: XLA's GemmRewriter (+ GemmWorkspaceRewriter).

* A matrix (or matrix-vector) ``dot`` of a type cuBLAS supports becomes
  ``custom-call(lhs, rhs), custom_call_target="__cublas$gemm"`` (``__cublas$lt$matmul``
  with ``--xla_gpu_enable_cublaslt``) whose ``backend_config`` holds XLA's
  ``gemm_backend_config`` JSON (alpha, beta, dot dimension numbers, precision, epilogue,
  strides).  Dots smaller than ``--xla_gpu_gemm_rewrite_size_threshold`` stay dots.
* Then, bottom-up as XLA's visitor does, the instructions around a call fold into it:
  alpha, matrix bias (beta), and with cuBLASLt the epilogues BIAS, RELU, BIAS_RELU, GELU,
  BIAS_GELU, GELU_AUX and BIAS_GELU_AUX (see ``_gemm_epilogue.py``).
* Finally every cuBLAS call gets its workspace: the result becomes the tuple
  ``(out, [aux,] s8[bytes])`` (32 MiB on Hopper, 4 MiB before; legacy calls at most the
  size of their operands) and users read ``get-tuple-element``.

The interpreter runs these custom-calls with the semantics of the instructions they
replaced (``hlo_opt/backends/interpreter/ops_gemm.py``).
"""
from __future__ import annotations

import json
import math

from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from ._gemm_common import (AUX_EPILOGUES, GEMM_TARGET, LT_TARGET, gemm_config,  # noqa: F401
                           gemm_name, is_batched, is_gemm, read_config, set_gemm_config,
                           write_config)
from ._gemm_epilogue import EpilogueFusion
from hlo_opt.rewrite.graph import fusible_computations, remove_dead_operands

DEFAULT_WORKSPACE = 4 * 1024 * 1024
HOPPER_WORKSPACE = 32 * 1024 * 1024

_MATMUL_TYPES = frozenset({"f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64", "c64", "c128"})


def _precision(inst: Instruction) -> dict:
    raw = inst.attrs.get("operand_precision")
    prec = ["DEFAULT", "DEFAULT"]
    if raw:
        prec = [p.strip().upper() for p in raw.strip("{}").split(",")]
    out = {"operand_precision": prec, "algorithm": "ALG_UNSET"}
    if "algorithm" in inst.attrs:
        out["algorithm"] = inst.attrs["algorithm"].strip().upper()
    return out


# ---- which dots ---------------------------------------------------------------------------

def _dims(inst: Instruction):
    return inst.dot_dimension_numbers.lists()


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


class _Rewriter(EpilogueFusion):
    def __init__(self, module, comp):
        self.options = module.config.debug_options
        self.device = module.config.device
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
                             name=gemm_name(target, bool(lb)), attrs=attrs)
        write_config(call, {"operation_queue_id": "0", "wait_on_operation_queues": [],
                            "gemm_backend_config": gemm, "force_earliest_schedule": False})
        self._replace(dot, call)

    def _target(self, dot: Instruction) -> str:
        if not self.options.xla_gpu_enable_cublaslt:
            return GEMM_TARGET
        if "s8" in (dot.operands[0].shape.element_type, dot.operands[1].shape.element_type):
            return GEMM_TARGET
        return LT_TARGET

    # -- helpers --
    def _add(self, opcode: str, shape: Shape, operands, attrs=None, payload: str = ""
             ) -> Instruction:
        return self.comp.add(opcode, shape, list(operands), name=opcode,
                             attrs=dict(attrs) if attrs else None, payload=payload)

    def _clone_gemm(self, g: Instruction, operands, cfg: dict,
                    shape: Shape | None = None) -> Instruction:
        attrs = {k: v for k, v in g.attrs.items() if k != "output_to_operand_aliasing"}
        new = self.comp.add("custom-call", shape or g.shape, list(operands),
                            name=gemm_name(g.custom_call_target, is_batched(cfg)), attrs=attrs)
        set_gemm_config(new, cfg)
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

    # -- workspace (GemmWorkspaceRewriter) --
    def add_workspace(self, g: Instruction) -> None:
        """(out) -> (out, s8[workspace]); a cuBLASLt call with an auxiliary output:
        (out, aux) -> (out, aux, s8[workspace])."""
        if g.shape.is_tuple():
            has_aux = gemm_config(g).get("epilogue", "DEFAULT") in AUX_EPILOGUES
            if g.custom_call_target != LT_TARGET or \
                    len(g.shape.tuple_shapes) != 1 + has_aux or \
                    any(u.opcode != "get-tuple-element" for u in g.users) or g.is_root:
                return
        workspace = HOPPER_WORKSPACE if self.device.is_at_least_hopper else DEFAULT_WORKSPACE
        if g.custom_call_target == GEMM_TARGET:
            workspace = min(workspace, sum(o.shape.byte_size() for o in g.operands))
        outputs = list(g.shape.tuple_shapes) if g.shape.is_tuple() else [g.shape]
        out_shape = Shape.tuple(outputs + [Shape.array("s8", (workspace,))])
        attrs = dict(g.attrs)
        if "output_to_operand_aliasing" in attrs:
            attrs["output_to_operand_aliasing"] = "{{0}: (2, {})}"
        new = self.comp.add("custom-call", out_shape, list(g.operands), name=g.name,
                            attrs=attrs)
        if not g.shape.is_tuple():
            self._replace(g, self._add("get-tuple-element", g.shape, [new],
                                       attrs={"index": "0"}))
            return
        self._replace(g, new)


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
