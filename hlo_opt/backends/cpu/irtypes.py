"""LLVM types of XLA element types: storage in memory, and value in registers.

Registers hold pred as i1, integers as iN (signedness lives in the op), f16 and bf16 as
f32 values already rounded to the narrow type (XLA:CPU computes them in f32 and rounds
after each op), f32/f64 as float/double, c64/c128 as ``{float, float}`` /
``{double, double}`` (real, imaginary: numpy's and XLA's memory layout too).  Sub-byte
integers (s2/s4/u2/u4) are one byte per element in memory, the value in the low bits
(ml_dtypes' layout, which the runtime's numpy views and the interpreter share; not XLA's
packed nibbles) and ``i2``/``i4`` in registers, so arithmetic wraps at their width.
"""
from __future__ import annotations

from llvmlite import ir

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F32, F64, F16 = ir.FloatType(), ir.DoubleType(), ir.HalfType()
I8P = I8.as_pointer()
I8PP = I8P.as_pointer()

C64 = ir.LiteralStructType([F32, F32])
C128 = ir.LiteralStructType([F64, F64])
NATIVE = frozenset({"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                    "f16", "bf16", "f32", "f64", "c64", "c128", "s2", "s4", "u2", "u4"})
SUB_BYTE = frozenset({"s2", "s4", "u2", "u4"})
COMPLEX = {"c64": C64, "c128": C128}
# the real type of a complex type's parts
PART = {"c64": "f32", "c128": "f64"}
_INT_BITS = {"s2": 2, "s4": 4, "u2": 2, "u4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
             "u8": 8, "u16": 16, "u32": 32, "u64": 64}


def kind(et: str) -> str:
    if et == "pred":
        return "p"
    if et in ("f16", "bf16", "f32", "f64"):
        return "f"
    if et in COMPLEX:
        return "c"
    if et[0] == "s":
        return "s"
    return "u"


def bits(et: str) -> int:
    return {"pred": 1, "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64,
            "c128": 128}.get(et) or _INT_BITS[et]


def storage(et: str):
    if et == "pred" or et in SUB_BYTE:
        return I8
    if et in ("f16", "bf16"):
        return I16
    if et == "f32":
        return F32
    if et == "f64":
        return F64
    if et in COMPLEX:
        return COMPLEX[et]
    return ir.IntType(_INT_BITS[et])


def reg(et: str):
    if et == "pred":
        return I1
    if et in ("f16", "bf16", "f32"):
        return F32
    if et == "f64":
        return F64
    if et in COMPLEX:
        return COMPLEX[et]
    return ir.IntType(_INT_BITS[et])


def bf16_bits(b: ir.IRBuilder, x):
    """f32 register -> bf16 bits (i16), round to nearest even, NaN kept quiet."""
    i = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(i, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.add(i, b.add(ir.Constant(I32, 0x7FFF), lsb))
    is_nan = b.fcmp_unordered("uno", x, x)
    quiet = b.or_(i, ir.Constant(I32, 0x00400000))
    r = b.select(is_nan, quiet, rounded)
    return b.trunc(b.lshr(r, ir.Constant(I32, 16)), I16)


def bf16_value(b: ir.IRBuilder, bits16):
    return b.bitcast(b.shl(b.zext(bits16, I32), ir.Constant(I32, 16)), F32)


def to_storage(b: ir.IRBuilder, v, et: str):
    if et == "pred" or et in SUB_BYTE:
        return b.zext(v, I8)
    if et == "bf16":
        return bf16_bits(b, v)
    if et == "f16":
        return b.bitcast(b.fptrunc(v, F16), I16)
    return v


def from_storage(b: ir.IRBuilder, v, et: str):
    if et == "pred":
        return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    if et in SUB_BYTE:
        return b.trunc(v, ir.IntType(_INT_BITS[et]))
    if et == "bf16":
        return bf16_value(b, v)
    if et == "f16":
        return b.fpext(b.bitcast(v, F16), F32)
    return v


def round_narrow(b: ir.IRBuilder, v, et: str):
    """Round an f32 register to f16/bf16 precision (identity for other types)."""
    if et in ("bf16", "f16"):
        return from_storage(b, to_storage(b, v, et), et)
    return v


def const(value, et: str):
    t = reg(et)
    if et == "pred":
        return ir.Constant(I1, int(bool(value)))
    if kind(et) == "f":
        return ir.Constant(t, float(value))
    if et in COMPLEX:
        v = complex(value)
        part = reg(PART[et])
        return ir.Constant(t, [ir.Constant(part, v.real), ir.Constant(part, v.imag)])
    v = int(value)
    n = bits(et)
    return ir.Constant(t, v & ((1 << n) - 1))
