"""Value and type predicates the rules share (XLA's IsAll, IsNonNegative, CastPreservesValues)."""
from __future__ import annotations

import math

import numpy as np

from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.types import (BIT_WIDTH, is_complex, is_float, is_integral, is_signed_int,
                              is_unsigned_int, numpy_dtype)


def et(inst: Instruction) -> str:
    return inst.shape.element_type


def integral(inst: Instruction) -> bool:
    return is_integral(inst.shape.element_type)


def floating(inst: Instruction) -> bool:
    return is_float(inst.shape.element_type)


def is_pred(inst: Instruction) -> bool:
    return inst.shape.element_type == "pred"


def complex_(inst: Instruction) -> bool:
    return is_complex(inst.shape.element_type)


def constant_array(inst: Instruction):
    """The numpy value of a constant, or None (not a constant / elided)."""
    if inst.opcode != "constant" or not inst.shape.is_array():
        return None
    lit = inst.literal
    if lit.elided:
        return None
    return lit.array


def reassociation_ok(ctx, inst) -> bool:
    """Whether ``inst``'s arithmetic may be reordered: integral, or floats allowed to be."""
    t = inst.shape.element_type
    return is_integral(t) or ctx.opts.float_reassociation or ctx.opts.enable_floats_are_real


def has_single_use(inst: Instruction) -> bool:
    """XLA's WithOneUse: one user, which reads ``inst`` as one operand only."""
    return inst.user_count == 1 and sum(o is inst for o in inst.users[0].operands) == 1


def _unwrap_broadcast(inst: Instruction) -> Instruction:
    while inst.opcode == "broadcast":
        inst = inst.operands[0]
    return inst


_UNIFORM: dict[int, tuple] = {}  # id(literal) -> (literal, its single value or None)
_NOT_UNIFORM = object()


def _uniform_value(c: Instruction):
    """The one value every element of constant ``c`` holds (Python int/float/complex/bool),
    or _NOT_UNIFORM; cached per literal (literals are never mutated in place)."""
    lit = c.literal
    hit = _UNIFORM.get(id(lit))
    if hit is not None and hit[0] is lit:
        return hit[1]
    arr = None if lit.elided or not c.shape.is_array() else lit.array
    v = _NOT_UNIFORM
    if arr is not None and arr.size:
        t = c.shape.element_type
        flat = arr.reshape(-1)
        with np.errstate(all="ignore"):
            if t == "pred":
                first = bool(flat[0])
                conv = flat.astype(bool)
            elif is_integral(t):
                conv = flat.astype(np.uint64 if t == "u64" else np.int64)
                first = int(conv[0])
            else:
                # XLA's Literal::IsAll compares bit patterns (memcmp): {0, -0} is not
                # uniform, and neither is a mix of NaN payloads.
                conv = flat.view(np.dtype(f"u{flat.dtype.itemsize}")) if \
                    flat.dtype.itemsize in (1, 2, 4, 8) else flat
                first = complex(flat[0]) if is_complex(t) else float(flat[0])
            if flat.size == 1 or bool(np.all(conv == conv[0])):
                v = first
    if len(_UNIFORM) > 100_000:
        _UNIFORM.clear()
    _UNIFORM[id(lit)] = (lit, v)
    return v


def all_test(value):
    """``test(inst)``: whether ``inst`` is a constant, or broadcasts of one, holding only
    ``value`` (compared as bool for pred, as an integer for integral types: a fraction
    never matches; as is otherwise).  The value's forms are worked out once per value."""
    key = (type(value), value)
    try:
        test = _ALL_TESTS.get(key)
    except TypeError:  # unhashable
        return _make_all_test(value)
    if test is None:
        test = _make_all_test(value)
        if value == value:  # (a nan would never be found again)
            _ALL_TESTS[key] = test
    return test


_ALL_TESTS: dict = {}
_INTEGRAL: dict[str, bool] = {}


def _make_all_test(value):
    as_bool = bool(value)
    zero = isinstance(value, (int, float, complex)) and value == 0
    try:
        as_int = None if isinstance(value, float) and not value.is_integer() else int(value)
        int_ok = True
    except (TypeError, ValueError, OverflowError):
        as_int, int_ok = None, False

    def test(c) -> bool:
        while c.opcode == "broadcast":
            c = c.operands[0]
        if c.opcode != "constant":
            return False
        lit = c.literal
        hit = _UNIFORM.get(id(lit))
        v = hit[1] if hit is not None and hit[0] is lit else _uniform_value(c)
        if v is _NOT_UNIFORM:
            return False
        t = c.shape.element_type
        if t == "pred":
            return v == as_bool
        integral_t = _INTEGRAL.get(t)
        if integral_t is None:
            integral_t = _INTEGRAL[t] = is_integral(t)
        if integral_t:
            if not int_ok:
                return v == int(value)  # (raises as int(value) does)
            return as_int is not None and v == as_int
        if v != value:
            return False
        # Bitwise, as XLA's IsAll: a float zero is +0 only (x - (-0) is not x - 0).
        return not zero or not _negative_zero(v)
    return test


def _negative_zero(v) -> bool:
    if isinstance(v, complex):
        return math.copysign(1.0, v.real) < 0 or math.copysign(1.0, v.imag) < 0
    return math.copysign(1.0, v) < 0


def is_all(inst: Instruction, value) -> bool:
    """Unwraps broadcasts; true when the constant underneath holds only ``value``."""
    return all_test(value)(inst)


def ALL(value, name: str | None = None):
    """The pattern form of :func:`is_all`: any instruction (captured as ``name``) that is a
    constant, or broadcasts of one, holding only ``value``."""
    from hlo_opt.rewrite.rules import X
    return X(name, pred=all_test(value), hint=("broadcast", "constant"))


def scalar_value(inst: Instruction):
    """Python value of an effective-scalar constant (or of broadcast(constant)), else None."""
    c = _unwrap_broadcast(inst)
    arr = constant_array(c)
    if arr is None or arr.size != 1:
        return None
    v = arr.reshape(())[()]
    t = c.shape.element_type
    if t == "pred":
        return bool(v)
    if is_integral(t):
        return int(v)
    if is_complex(t):
        return complex(v)
    return float(v)


def is_fp_power_of_two(inst: Instruction) -> bool:
    """Scalar constant or broadcast of one equal to +/- 2^k (XLA's IsAllFpConstantPowerOf2)."""
    c = inst.operands[0] if inst.opcode == "broadcast" else inst
    if c.opcode != "constant" or c.shape.num_elements() != 1:
        return False
    v = scalar_value(c)
    if not isinstance(v, float) or not math.isfinite(v) or v == 0:
        return False
    m, _ = math.frexp(v)
    return m in (0.5, -0.5)


def is_positive(inst: Instruction) -> bool:
    if any(is_complex(o.shape.element_type) for o in inst.operands):
        return False
    op = inst.opcode
    if op == "power":
        return not is_signed_int(et(inst)) and is_positive(inst.operands[0])
    if op in ("abs", "rsqrt", "sqrt"):
        return is_positive(inst.operands[0])
    if op == "multiply":
        return (not is_signed_int(et(inst)) and inst.operands[0] is inst.operands[1]
                and is_positive(inst.operands[0]))
    return False


def is_nonnegative(inst: Instruction) -> bool:
    """XLA's IsNonNegative (sound: true only when every element is >= 0 or NaN-free)."""
    if any(is_complex(o.shape.element_type) for o in inst.operands):
        return False
    op = inst.opcode
    t = et(inst)
    if op == "multiply":
        return inst.operands[0] is inst.operands[1] and not is_signed_int(t)
    if op == "exponential":
        return True
    if op == "iota":
        if not is_signed_int(t):
            return True
        bits = BIT_WIDTH[t]
        if bits >= 64:
            return True
        return inst.shape.dims[inst.attr("iota_dimension")] <= (1 << (bits - 1))
    if op == "abs":
        if not is_signed_int(t):
            return True
        return is_nonnegative(inst.operands[0])
    if op == "broadcast":
        return is_nonnegative(inst.operands[0])
    if op == "constant":
        arr = constant_array(inst)
        if arr is None or arr.size != 1 or is_complex(t):
            return False
        v = arr.reshape(())[()]
        if t == "pred" or is_integral(t):
            return int(v) >= 0
        f = float(v)
        return not math.isnan(f) and not math.copysign(1.0, f) < 0
    if op == "minimum":
        return is_nonnegative(inst.operands[0]) and is_nonnegative(inst.operands[1])
    if op == "maximum":
        return is_nonnegative(inst.operands[0]) or is_nonnegative(inst.operands[1])
    if op == "power":
        return not is_signed_int(t) and is_nonnegative(inst.operands[0])
    if op == "select":
        return is_nonnegative(inst.operands[1]) and is_nonnegative(inst.operands[2])
    return is_positive(inst)


# ---- type facts ------------------------------------------------------------------------
_NO_INF = ("f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e8m0fnu", "f4e2m1fn",
           "f6e2m3fn", "f6e3m2fn")
_NO_NAN = ("f4e2m1fn", "f6e2m3fn", "f6e3m2fn")
_NO_NEG_ZERO = ("f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e8m0fnu")


def _float_info(t: str):
    import ml_dtypes
    dt = numpy_dtype(t)
    fi = ml_dtypes.finfo(dt) if t not in ("f16", "f32", "f64") else np.finfo(dt)
    return int(fi.nmant), int(fi.minexp), int(fi.maxexp)


def cast_preserves_values(src: str, dst: str) -> bool:
    """XLA's primitive_util::CastPreservesValues."""
    if src == dst or src == "pred":
        return True
    if dst == "pred":
        return False
    if is_complex(dst):
        comp_dst = "f32" if dst == "c64" else "f64"
        comp_src = src if not is_complex(src) else ("f32" if src == "c64" else "f64")
        return cast_preserves_values(comp_src, comp_dst)
    if is_complex(src):
        return False
    if is_float(src) and is_float(dst):
        if (src not in _NO_INF) and dst in _NO_INF:
            return False
        if (src not in _NO_NAN) and dst in _NO_NAN:
            return False
        if (src not in _NO_NEG_ZERO) and dst in _NO_NEG_ZERO:
            return False
        sm, smin, smax = _float_info(src)
        dm, dmin, dmax = _float_info(dst)
        return dm >= sm and dmax >= smax and (smin - sm) >= (dmin - dm)
    if is_float(src) and is_integral(dst):
        return False
    if is_integral(src):
        src_bits = BIT_WIDTH[src] - (1 if is_signed_int(src) else 0)
        if is_integral(dst):
            if is_signed_int(src) and is_unsigned_int(dst):
                return False
            dst_bits = BIT_WIDTH[dst] - (1 if is_signed_int(dst) else 0)
            return dst_bits >= src_bits
        if is_float(dst):
            dm, _, dmax = _float_info(dst)
            return dm + 1 >= src_bits and dmax >= src_bits
    return False


def min_value(t: str):
    """XLA's LiteralUtil::MinValue (-inf for floats with infinity)."""
    if t == "pred":
        return False
    if is_integral(t):
        bits = BIT_WIDTH[t]
        return -(1 << (bits - 1)) if is_signed_int(t) else 0
    if t in _NO_INF:
        import ml_dtypes
        return float(ml_dtypes.finfo(numpy_dtype(t)).min)
    return float("-inf")


def max_value(t: str):
    if t == "pred":
        return True
    if is_integral(t):
        bits = BIT_WIDTH[t]
        return (1 << (bits - 1)) - 1 if is_signed_int(t) else (1 << bits) - 1
    if t in _NO_INF:
        import ml_dtypes
        return float(ml_dtypes.finfo(numpy_dtype(t)).max)
    return float("inf")


def is_identity_perm(perm) -> bool:
    return list(perm) == list(range(len(perm)))


def inverse_perm(perm) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def compose_perm(p1, p2) -> list[int]:
    """XLA's ComposePermutations(p1, p2)[i] = p1[p2[i]]."""
    return [p1[i] for i in p2]


def root_is_binary_of_params(comp, opcodes) -> str | None:
    """The opcode when ``comp`` is ``(p0, p1) -> op(p0, p1)`` (either order) for op in opcodes."""
    r = comp.root
    if r is None or r.opcode not in opcodes or len(r.operands) != 2:
        return None
    if len(comp.parameters) != 2:
        return None
    p0, p1 = comp.parameters
    if (r.operands[0] is p0 and r.operands[1] is p1) or \
            (r.operands[0] is p1 and r.operands[1] is p0):
        return r.opcode
    return None


def same_literal(a: Instruction, b: Instruction) -> bool:
    """Two constants with equal shape and bitwise-equal values."""
    if a is b:
        return True
    if a.opcode != "constant" or b.opcode != "constant":
        return False
    if not a.shape.same_dims_and_type(b.shape):
        return False
    x, y = constant_array(a), constant_array(b)
    if x is None or y is None:
        return False
    return x.tobytes() == y.tobytes()


def is_reduction_identity(init: Instruction, comp) -> bool:
    """``init`` is a constant that is the identity of the binary reducer ``comp``: 0 for
    add/or/xor, 1 for multiply/and(true), the lowest value for max, the highest for min.
    Rewrites that drop or repeat the init value (XLA assumes it is the identity) need this.
    """
    op = root_is_binary_of_params(comp, _IDENTITY_OPS)
    return op is not None and _is_identity_of(op, init)


_IDENTITY_OPS = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")


def is_tuple_reduction_identity(inits, comp) -> bool:
    """The variadic form: ``comp`` returns a tuple whose element i is one of those binary
    ops of parameters i and n+i (its accumulator and its input), and ``inits[i]`` is that
    op's identity: every output is reduced on its own, from an identity."""
    r = comp.root
    n = len(inits)
    if r is None or r.opcode != "tuple" or len(r.operands) != n or \
            len(comp.parameters) != 2 * n:
        return False
    for i, e in enumerate(r.operands):
        if e.opcode not in _IDENTITY_OPS or len(e.operands) != 2:
            return False
        a, b = comp.parameters[i], comp.parameters[n + i]
        if not ((e.operands[0] is a and e.operands[1] is b)
                or (e.operands[0] is b and e.operands[1] is a)):
            return False
        if not _is_identity_of(e.opcode, inits[i]):
            return False
    return True


def _is_identity_of(op: str, init: Instruction) -> bool:
    if init.opcode != "constant" or init.shape.num_elements() != 1:
        return False
    v = scalar_value(init)
    if v is None:
        return False
    t = init.shape.element_type
    if op in ("add", "or", "xor"):
        return v == 0  # (+0 is not quite the identity for -0 inputs: rules using it are inexact)
    if op == "multiply":
        return v == 1
    if op == "and":
        return v == (True if t == "pred" else -1 if is_signed_int(t) else max_value(t))
    if op == "maximum":
        return v == min_value(t)
    if op == "minimum":
        return v == max_value(t)
    return False
