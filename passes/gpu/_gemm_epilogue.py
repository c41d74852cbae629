"""The epilogue half of GemmRewriter (XLA's GemmRewriterVisitor HandleMultiply / HandleAdd
/ HandleMaximum): what is folded into an existing cuBLAS call, bottom-up.

* ``multiply(gemm, broadcast(c))``: alpha *= c (any target, not s32, beta 0).
* ``add(gemm, C)`` (also through a convert of the gemm, a slice that only chops ends, or a
  bitcast): beta = 1 and C is operand 2 (padded with zeros to a padded gemm; aliased with
  the output for legacy cuBLAS or when C may be overwritten).  A bias that is a broadcast
  of a non-scalar constant (<= 8 MiB) is materialised as a constant first.
* cuBLASLt only:
  - ``add(gemm, broadcast(v))`` with ``v`` along the output's most minor physical
    dimensions: epilogue BIAS, ``v`` the last operand;
  - ``maximum(gemm, broadcast(0))``: RELU / BIAS_RELU;
  - the tanh approximation of GELU, ``x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 *
    x^3)))``: GELU / BIAS_GELU, or GELU_AUX / BIAS_GELU_AUX when the pre-activation ``x``
    is also used elsewhere (the call then returns ``(gelu, x)``);
  each also when the gemm's value is read through a slice or a bitcast.
* ``add(bitcast(gemm), bias)`` becomes ``bitcast(add(gemm, bitcast(bias)))`` so the
  matrix bias can fold (XLA keeps the rewrite even when the fold then fails).

Epilogues XLA has that are not formed here, as on CUDA in XLA: SILU / BIAS_SILU (ROCm's
hipBLASLt only); there is no RELU_AUX epilogue in XLA's GemmBackendConfig.
"""
from __future__ import annotations

import math

from hlo_opt.analysis.layout import minor_to_major
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from ._gemm_common import (LT_TARGET, any_order, bcast_const, bcast_const_near,
                           chops_ends_only, gemm_config, is_gemm, optional_bitcast_slice,
                           scalar_value, set_gemm_config, through_slice_or_bitcast)

EPILOGUE_TYPES = frozenset({"f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64"})
MAX_MATERIALIZE_BIAS_BYTES = 8 * 1024 * 1024
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

# (a, b, output) element types cuBLAS / cuBLASLt accept (the non-FP8 rows of XLA's
# TypesAreSupportedByLegacyCublas / TypesAreSupportedByCublasLt tables)
_LEGACY_TYPES = frozenset({
    ("f16", "f16", "f16"), ("f16", "f16", "f32"), ("bf16", "bf16", "bf16"),
    ("bf16", "bf16", "f32"), ("s8", "s8", "s32"), ("s8", "s8", "f32"),
    ("f32", "f32", "f32"), ("f64", "f64", "f64"), ("c64", "c64", "c64"),
    ("c128", "c128", "c128")})
_LT_TYPES = _LEGACY_TYPES | {("s8", "s8", "s8")}


def types_supported(gemm: Instruction, output_type: str) -> bool:
    a, b = (o.shape.element_type for o in gemm.operands[:2])
    table = _LT_TYPES if gemm.custom_call_target == LT_TARGET else _LEGACY_TYPES
    return (a, b, output_type) in table


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


def matches_gelu_cdf(cdf: Instruction, x: Instruction) -> bool:
    """0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x))), any operand order,
    every intermediate with one user (XLA's pattern)."""
    def one(p):
        return lambda i: i.user_count == 1 and p(i)

    def is_x(i):
        return i is x

    x_cubed = one(lambda i: _mul_any(i, is_x, one(lambda j: _mul_any(j, is_x, is_x))))
    inner = one(lambda i: _add_any(i, is_x, one(lambda j: _mul_any(
        j, lambda k: bcast_const_near(k, 0.044715), x_cubed))))
    scaled = one(lambda i: _mul_any(i, lambda k: bcast_const_near(k, _SQRT_2_OVER_PI), inner))
    tanh = one(lambda i: i.opcode == "tanh" and scaled(i.operands[0]))
    one_plus = one(lambda i: _add_any(i, lambda k: bcast_const(k, 1.0), tanh))
    return _mul_any(cdf, lambda k: bcast_const(k, 0.5), one_plus)


def _same_layout(a: Shape, b: Shape) -> bool:
    return minor_to_major(a) == minor_to_major(b)


def _param_aliased(param: Instruction) -> bool:
    module = param.parent.module
    raw = module.header_attrs.get("input_output_alias", "") if module is not None else ""
    return f"({param.parameter_number}," in raw.replace(" ", "")


def _can_overwrite(bias: Instruction) -> bool:
    """Legacy cuBLAS writes its result into the bias: only when nothing else reads it."""
    if bias.user_count > 1:
        return False
    if bias.opcode != "parameter":
        return True
    return bias.parent.is_entry and _param_aliased(bias)


class EpilogueFusion:
    """Mixed into the rewriter, which provides ``comp``, ``_clone_gemm``, ``_add``,
    ``_replace`` and ``changed``."""

    # ---- multiply: alpha and GELU --------------------------------------------------------
    def handle_multiply(self, inst: Instruction) -> None:
        for g, other in any_order(inst):
            if is_gemm(g) and g.user_count == 1 and other.opcode == "broadcast" and \
                    other.user_count == 1 and scalar_value(other.operands[0]) is not None:
                if g.shape.element_type == "s32":
                    return
                cfg = gemm_config(g)
                if cfg.get("beta", 0) == 0:
                    c = complex(scalar_value(other.operands[0]))
                    alpha = complex(cfg.get("alpha_real", 1), cfg.get("alpha_imag", 0)) * c
                    cfg["alpha_real"] = _num(alpha.real)
                    cfg["alpha_imag"] = _num(alpha.imag)
                    set_gemm_config(g, cfg)
                    self._replace(inst, g)
                    return
        for x, cdf in any_order(inst):
            gemm, wrapper = through_slice_or_bitcast(x, (LT_TARGET,))
            if gemm is not None and cdf.user_count == 1 and matches_gelu_cdf(cdf, x):
                self._fuse_gelu(inst, gemm, wrapper)
                return

    def _fuse_gelu(self, multiply: Instruction, g: Instruction, wrapper) -> None:
        if g.shape.element_type not in EPILOGUE_TYPES:
            return
        x = wrapper or g
        # four users of x are inside the GELU; any other needs x as an auxiliary output
        has_aux = x.user_count > 4 or (wrapper is not None and g.user_count > 1)
        cfg = gemm_config(g)
        table = ({"DEFAULT": "GELU_AUX", "BIAS": "BIAS_GELU_AUX"} if has_aux else
                 {"DEFAULT": "GELU", "BIAS": "BIAS_GELU"})
        epilogue = table.get(cfg.get("epilogue", "DEFAULT"))
        if epilogue is None:
            return
        cfg["epilogue"] = epilogue
        shape = Shape.tuple([g.shape, g.shape]) if has_aux else g.shape
        new = self._clone_gemm(g, g.operands, cfg, shape)
        value = new
        if has_aux:
            value = self._add("get-tuple-element", g.shape, [new], attrs={"index": "0"})
            aux = self._add("get-tuple-element", g.shape, [new], attrs={"index": "1"})
            self._replace(g, aux)
        if wrapper is not None:
            value = self._add(wrapper.opcode, wrapper.shape, [value],
                              attrs=dict(wrapper.attrs))
        self._replace(multiply, value)

    # ---- add: vector and matrix bias -----------------------------------------------------
    def handle_add(self, inst: Instruction) -> None:
        for x, b in any_order(inst):
            if b.opcode != "broadcast" or x.user_count != 1:
                continue
            g, slice_, bitcast = optional_bitcast_slice(x, (LT_TARGET,))
            if g is not None and self._fuse_vector_bias(inst, b, g, slice_, bitcast):
                return
        inst = self._sink_bitcast(inst)
        for x, b in any_order(inst):
            if b.opcode == "broadcast":
                continue
            g = x
            if x.opcode == "convert" and x.user_count == 1 and is_gemm(x.operands[0]):
                g = x.operands[0]
            if not is_gemm(g) or g.user_count != 1:
                continue
            cfg = gemm_config(g)
            out_type = b.shape.element_type
            consumers_ok = (inst.shape.element_type == g.shape.element_type
                            or inst.user_count == 0 or inst.is_root
                            or (inst.user_count == 1 and inst.users[0].opcode == "tuple"
                                and inst.users[0].user_count == 0))
            if types_supported(g, out_type) and consumers_ok:
                self._fuse_matrix_bias(inst, b, g, cfg)
                return
            break
        for x, b in any_order(inst):
            if b.opcode == "broadcast" or x.user_count != 1:
                continue
            g, slice_, bitcast = optional_bitcast_slice(x)
            if g is not None and b.shape.element_type not in ("f8e4m3fn", "f8e5m2"):
                self._fuse_matrix_bias(inst, b, g, gemm_config(g), bitcast, slice_)
                return

    def _sink_bitcast(self, inst: Instruction):
        """add(bitcast(gemm), b) -> bitcast(add(gemm, bitcast(b))) when b is a
        one-user broadcast into a cuBLASLt gemm, or any non-broadcast; returns the add
        to go on with (the new inner one after the rewrite)."""
        for x, b in any_order(inst):
            if x.opcode != "bitcast" or x.user_count != 1:
                continue
            g = x.operands[0]
            if not is_gemm(g) or g.user_count != 1:
                continue
            if b.opcode == "broadcast" and not (g.custom_call_target == LT_TARGET
                                                and b.user_count == 1):
                continue
            if not _same_layout(b.shape, inst.shape) or \
                    b.shape.element_type != g.shape.element_type:
                continue
            bb = self._add("bitcast", g.shape.with_element_type(b.shape.element_type), [b])
            new_add = self._add("add", g.shape, [g, bb])
            out = self._add("bitcast", inst.shape, [new_add])
            self._replace(inst, out)
            return new_add
        return inst

    def _fuse_matrix_bias(self, add: Instruction, bias: Instruction, g: Instruction,
                          cfg: dict, bitcast=None, slice_=None) -> bool:
        view = bitcast or slice_ or g
        if bias.shape.dims != view.shape.dims or g.shape.element_type == "s32":
            return False
        if slice_ is not None and (not chops_ends_only(slice_) or
                                   bias.shape.element_type != g.shape.element_type):
            return False  # (a bias of another type could not be padded to the gemm)
        if bitcast is not None and not _same_layout(bias.shape, bitcast.shape):
            return False
        can_overwrite = _can_overwrite(bias)
        lt = is_gemm(g, (LT_TARGET,))
        if cfg.get("beta", 0) != 0 or not (lt or can_overwrite) or g.user_count != 1 or \
                cfg.get("epilogue", "DEFAULT") not in ("DEFAULT", "BIAS"):
            return False
        cfg["beta"] = 1
        c = self._maybe_constant_fold_bias(bias)
        if bitcast is not None:
            target = slice_.shape if slice_ is not None else g.shape
            c = self._add("bitcast", target.with_element_type(c.shape.element_type), [c])
        c = self._pad_to(c, g.shape)
        operands = list(g.operands)
        operands.insert(2, c)
        new = self._clone_gemm(g, operands, cfg,
                               g.shape.with_element_type(bias.shape.element_type))
        if not lt or can_overwrite:
            new.attrs["output_to_operand_aliasing"] = "{{}: (2, {})}"
        out = new
        for wrapper in (slice_, bitcast):
            if wrapper is not None:
                out = self._add(wrapper.opcode,
                                wrapper.shape.with_element_type(bias.shape.element_type),
                                [out], attrs=dict(wrapper.attrs))
        self._replace(add, out)
        return True

    def _fuse_vector_bias(self, add: Instruction, broadcast: Instruction, g: Instruction,
                          slice_=None, bitcast=None) -> bool:
        if g.shape.element_type not in EPILOGUE_TYPES:
            return False
        bias = broadcast.operands[0]
        cfg = gemm_config(g)
        dnums = cfg["dot_dimension_numbers"]
        num_col_dims = g.operands[1].shape.rank - len(dnums["rhs_batch_dimensions"]) - \
            len(dnums["rhs_contracting_dimensions"])
        if g.user_count != 1 or cfg.get("epilogue", "DEFAULT") != "DEFAULT" or \
                bias.shape.rank != num_col_dims:
            return False
        if slice_ is not None and not chops_ends_only(slice_):
            return False
        bdims = list(broadcast.dimensions)
        ref_m2m = minor_to_major((bitcast or g).shape)
        b_m2m = minor_to_major(bias.shape)
        g_m2m = minor_to_major(g.shape)
        for i in range(num_col_dims):
            dim = ref_m2m[i]
            if dim not in bdims or b_m2m[i] != bdims.index(dim):
                return False
            # the vector must cover the gemm's minor dims (a padded gemm: a prefix of them)
            size, gemm_size = bias.shape.dims[b_m2m[i]], g.shape.dims[g_m2m[i]]
            if size > gemm_size or (size < gemm_size and slice_ is None):
                return False
        cfg["epilogue"] = "BIAS"
        out = self._clone_gemm(g, list(g.operands) + [bias], cfg)
        for wrapper in (slice_, bitcast):
            if wrapper is not None:
                out = self._add(wrapper.opcode, wrapper.shape, [out],
                                attrs=dict(wrapper.attrs))
        self._replace(add, out)
        return True

    def _pad_to(self, x: Instruction, target: Shape) -> Instruction:
        """PadOperandToTargetShape: zero high padding up to ``target``'s dims."""
        if x.shape.dims == target.dims or x.shape.element_type != target.element_type:
            return x
        zero = self._add("constant", Shape.array(x.shape.element_type, ()), [],
                         payload="0" if x.shape.element_type != "pred" else "false")
        padding = "x".join(f"0_{t - d}" for d, t in zip(x.shape.dims, target.dims))
        return self._add("pad", x.shape.with_dims(target.dims, x.shape.layout), [x, zero],
                         attrs={"padding": padding})

    def _maybe_constant_fold_bias(self, bias: Instruction) -> Instruction:
        """MaybeConstantFoldBias: broadcast(non-scalar constant), possibly under one
        reshape / transpose / bitcast, becomes a constant (at most 8 MiB)."""
        x = bias
        if x.opcode in ("reshape", "transpose", "bitcast"):
            x = x.operands[0]
        if x.opcode != "broadcast" or bias.shape.byte_size() > MAX_MATERIALIZE_BIAS_BYTES:
            return bias
        c = x.operands[0]
        if c.opcode != "constant" or c.shape.num_elements() == 1 or c.literal.elided:
            return bias
        from ..constant_folding import evaluate, literal_of
        value = evaluate(bias)
        literal = literal_of(value, bias.shape) if value is not None else None
        if literal is None:
            return bias
        new = self._add("constant", bias.shape, [])
        new.set_literal(literal)
        return new

    # ---- maximum: ReLU -------------------------------------------------------------------
    def handle_maximum(self, inst: Instruction) -> None:
        for x, z in any_order(inst):
            g, wrapper = through_slice_or_bitcast(x, (LT_TARGET,))
            if g is None or x.user_count != 1 or not bcast_const(z, 0):
                continue
            if g.shape.element_type not in EPILOGUE_TYPES or g.user_count != 1:
                return
            cfg = gemm_config(g)
            epilogue = {"DEFAULT": "RELU", "BIAS": "BIAS_RELU"}.get(
                cfg.get("epilogue", "DEFAULT"))
            if epilogue is None:
                return
            cfg["epilogue"] = epilogue
            out = self._clone_gemm(g, g.operands, cfg)
            if wrapper is not None:
                out = self._add(wrapper.opcode, wrapper.shape, [out], attrs=dict(wrapper.attrs))
            self._replace(inst, out)
            return


def _num(x: float):
    return int(x) if float(x).is_integer() else x
