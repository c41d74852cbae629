"""What a backend computes natively in a low-precision float type: XLA's FloatSupport
(xla/service/float_support.cc) and GpuFloatSupport (xla/service/gpu/gpu_float_support.cc),
the tables FloatNormalization consults.

``FloatSupport(low, high)``: the generic answers (control flow, tuples and custom-calls
take anything; a convert takes the low type on its input side / output side only;
count-leading-zeros and the right shifts must stay in the low type, since widening them
changes their results; associative scans).  ``GpuFloatSupport`` adds what the GPU
backend emits natively, per compute capability:

=====================================  ===================================================
always (any CUDA GPU)                  all-reduce(-start/-done), reduce-scatter,
                                       scaled-dot, ragged-dot, data movement
                                       (all-gather, all-to-all, broadcast,
                                       collective-permute, concatenate, copy, constant,
                                       dynamic-slice, dynamic-update-slice, gather, pad,
                                       ragged-all-to-all, reshape, reverse, scatter,
                                       select, select-and-scatter, slice, transpose),
                                       bitcast, bitcast-convert, convert, compare,
                                       reduce-precision, xor
dot                                    when the low type is bf16
exponential, log                       bf16 on CUDA
abs, maximum, minimum, negate          bf16 on Ampere (sm_80) and newer
add, multiply, subtract                bf16 on Hopper (sm_90) and newer
reduce, sort                           when every instruction of the called computation
                                       (parameters aside) is supported
everything else                        no: computed in the high type
=====================================  ===================================================

Mixed precision (``SupportsMixedPrecisions``): control flow, converts, tuples and
custom-calls, plus ``dot(f16, f16) -> f32`` / ``dot(bf16, bf16) -> f32`` and scaled-dot.
"""
from __future__ import annotations

from hlo_opt.analysis.device import DeviceInfo

_GENERIC_ANY = frozenset({"call", "conditional", "custom-call", "domain", "get-tuple-element",
                          "tuple", "while", "opt-barrier"})
_MUST_STAY_LOW = frozenset({"count-leading-zeros", "shift-right-logical",
                            "shift-right-arithmetic"})
_GENERIC_MIXED = frozenset({"call", "conditional", "convert", "custom-call",
                            "get-tuple-element", "tuple", "while", "opt-barrier"})

_ALWAYS = frozenset({
    "all-reduce", "all-reduce-start", "all-reduce-done", "reduce-scatter", "scaled-dot",
    "ragged-dot",
    "all-gather", "all-to-all", "broadcast", "collective-permute", "concatenate", "copy",
    "constant", "dynamic-slice", "dynamic-update-slice", "gather", "pad",
    "ragged-all-to-all", "reshape", "reverse", "scatter", "select", "select-and-scatter",
    "slice", "transpose", "bitcast", "bitcast-convert", "convert", "compare",
    "reduce-precision", "xor"})
_CUDA_BF16 = frozenset({"exponential", "log"})
_AMPERE_BF16 = frozenset({"abs", "maximum", "minimum", "negate"})
_HOPPER_BF16 = frozenset({"add", "multiply", "subtract"})

# EffectiveOperandPrecisionIsOutputPrecision: the operand's precision is the output's.
_OUTPUT_PRECISION = frozenset({
    "abs", "all-gather", "all-to-all", "broadcast", "clamp", "collective-broadcast",
    "collective-permute", "concatenate", "convert", "copy", "domain", "get-tuple-element",
    "maximum", "minimum", "pad", "ragged-all-to-all", "reshape", "reverse", "slice", "sort",
    "transpose", "tuple", "opt-barrier"})


def _associative_scan(hlo) -> bool:
    return hlo.opcode == "scan" and hlo.attrs.get("is_associative", "").strip().upper() in (
        "TRUE", "TRI_STATE_TRUE")


class FloatSupport:
    """The generic table (a backend that computes nothing natively in ``low``)."""

    def __init__(self, low: str = "bf16", high: str = "f32"):
        self.low = low
        self.high = high

    def supports_low_precision_operand(self, hlo, operand_index: int) -> bool:
        op = hlo.opcode
        if op in _GENERIC_ANY or op in _MUST_STAY_LOW:
            return True
        if op == "convert":
            return hlo.operands[0].shape.element_type == self.low
        return _associative_scan(hlo)

    def supports_low_precision_output(self, hlo) -> bool:
        op = hlo.opcode
        if op in _GENERIC_ANY or op in _MUST_STAY_LOW:
            return True
        if op == "convert":
            return hlo.shape.element_type == self.low
        return _associative_scan(hlo)

    def supports_mixed_precisions(self, hlo) -> bool:
        return hlo.opcode in _GENERIC_MIXED or _associative_scan(hlo)

    @staticmethod
    def effective_operand_precision_is_output_precision(hlo, operand_index: int) -> bool:
        op = hlo.opcode
        if op in _OUTPUT_PRECISION:
            return True
        if op == "bitcast":
            return hlo.shape.element_type == hlo.operands[0].shape.element_type
        if op in ("dynamic-slice", "gather"):
            return operand_index == 0
        if op == "dynamic-update-slice":
            return operand_index in (0, 1)
        if op == "select":
            return operand_index in (1, 2)
        if op in ("reduce", "reduce-window"):
            for inst in hlo.called[0].instructions:
                if inst.opcode == "parameter":
                    continue
                for i in range(len(inst.operands)):
                    if not FloatSupport.effective_operand_precision_is_output_precision(
                            inst, i):
                        return False
            return True
        return False

    def effective_operand_precision_is_low_precision(self, hlo, operand_index: int) -> bool:
        return False

    def should_skip_instruction(self, hlo) -> bool:
        return False

    def should_skip_computations_of(self, hlo) -> bool:
        return False


class GpuFloatSupport(FloatSupport):
    """GpuFloatSupport for a CUDA GPU of ``device``'s compute capability."""

    def __init__(self, device: DeviceInfo, low: str = "bf16", high: str = "f32"):
        super().__init__(low, high)
        self.device = device

    def supports_low_precision_operand(self, hlo, operand_index: int) -> bool:
        return super().supports_low_precision_operand(hlo, operand_index) or \
            self.is_supported(hlo)

    def supports_low_precision_output(self, hlo) -> bool:
        return super().supports_low_precision_output(hlo) or self.is_supported(hlo)

    def supports_mixed_precisions(self, hlo) -> bool:
        if super().supports_mixed_precisions(hlo) or hlo.opcode == "scaled-dot":
            return True
        if hlo.opcode == "dot":
            types = (hlo.operands[0].shape.element_type, hlo.operands[1].shape.element_type,
                     hlo.shape.element_type)
            return types in (("f16", "f16", "f32"), ("bf16", "bf16", "f32"))
        return False

    def is_supported(self, hlo) -> bool:
        op = hlo.opcode
        bf16 = self.low == "bf16"
        if op in _ALWAYS:
            return True
        if op == "dot":
            return bf16
        if op in _CUDA_BF16:
            return bf16
        if op in _AMPERE_BF16:
            return bf16 and self.device.is_at_least_ampere
        if op in _HOPPER_BF16:
            return bf16 and self.device.is_at_least_hopper
        if op in ("reduce", "sort"):
            return all(i.opcode == "parameter" or self.is_supported(i)
                       for i in hlo.called[0].instructions)
        return False


__all__ = ["FloatSupport", "GpuFloatSupport"]
