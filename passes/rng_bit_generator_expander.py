"""RngBitGeneratorExpander (``rng-bit-generator-expander``), as
``xla/hlo/transforms/expanders/rng_bit_generator_expander.cc`` with the generators of
``xla/hlo/builder/lib/prng.cc``.

Each ``rng-bit-generator`` becomes a ``call`` of a generator computation (one per data
shape, state shape and algorithm, shared by every call site of the run)::

    state = u64[N] parameter(0)
    key   = reshape(slice(state, [0:1]))
    three_fry (N = 2): counters state[1] + row-major position over half the shape
                       (split along the first even dim, else the largest), Threefry-2x32
                       with 20 rounds, the two output words interleaved along the split
                       dim; 64-bit results join the words; narrower results truncate
    philox:   the 128-bit counter is state[1:3] (N = 3) or reverse(state) (N = 2), plus
              0..ceil(n/4)-1 (ceil(n/2) for 64-bit results), Philox-4x32 with 10
              rounds, the four words interleaved round-robin
    ROOT (concat(key, new counter), bits)

``rng_default`` uses ``default_algorithm`` (Philox, as XLA:CPU and XLA:GPU pass).  The
result is bit-exact with the interpreter's ``rng-bit-generator``.  XLA's generators
return unsigned bits; for a signed or floating data type this expansion adds a
``bitcast-convert`` so the call keeps the instruction's type.  State shapes the algorithm
cannot take (three_fry: ``u64[2]``; philox: ``u64[2]`` or ``u64[3]``) and data types other
than 8/16/32/64-bit ints and floats are left alone.  Fusion computations are not visited.
"""
from __future__ import annotations

import math

from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import BIT_WIDTH, is_complex

from hlo_opt.rewrite.builder import Builder
from ._expander_util import new_computation, non_fusion_computations, replace_instruction

_ALGORITHMS = {"rng_default": None, "rng_three_fry": "three_fry", "rng_philox": "philox"}
_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)


class _Ops:
    """XlaBuilder-style arithmetic on a Builder: scalars broadcast to the other operand."""

    def __init__(self, b: Builder):
        self.b = b

    def const(self, value: int, et: str):
        return self.b.scalar(value, et)

    def bin(self, op: str, x, y):
        if x.shape.dims != y.shape.dims:
            if x.shape.rank == 0:
                x = self.b.broadcast(x, y.shape.dims, [])
            elif y.shape.rank == 0:
                y = self.b.broadcast(y, x.shape.dims, [])
        return self.b.binary(op, x, y)

    def add(self, x, y):
        return self.bin("add", x, y)

    def xor(self, x, y):
        return self.bin("xor", x, y)

    def convert(self, x, et: str):
        return self.b.convert(x, et)

    def shr(self, x, n: int):
        return self.bin("shift-right-logical", x, self.const(n, x.shape.element_type))

    def shl(self, x, n: int):
        return self.bin("shift-left", x, self.const(n, x.shape.element_type))

    def u64_to_u32s(self, x):
        return self.convert(x, "u32"), self.convert(self.shr(x, 32), "u32")

    def u32s_to_u64(self, lo, hi):
        return self.bin("or", self.convert(lo, "u64"), self.shl(self.convert(hi, "u64"), 32))

    def slice1(self, x, start: int, limit: int):
        return self.b.slice(x, [start], [limit])

    def reshape(self, x, dims):
        return self.b.reshape(x, dims)


# ---- Threefry ---------------------------------------------------------------------------
def _threefry2x32(o: _Ops, x0, x1, k0, k1):
    ks = [k0, k1, o.xor(o.xor(o.const(0x1BD11BDA, "u32"), k0), k1)]
    x0, x1 = o.add(x0, ks[0]), o.add(x1, ks[1])
    for block in range(5):
        for r in (_ROTATIONS[:4] if block % 2 == 0 else _ROTATIONS[4:]):
            x0 = o.add(x0, x1)
            rot = o.bin("or", o.shl(x1, r), o.shr(x1, 32 - r))
            x1 = o.xor(x0, rot)
        x0 = o.add(x0, ks[(block + 1) % 3])
        x1 = o.add(o.add(x1, ks[(block + 2) % 3]), o.const(block + 1, "u32"))
    return x0, x1


def _split_halves(dims):
    """SplitShapeIntoHalves: (half dims, split dim, concat dim)."""
    if not dims:
        return [1], 0, 0
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), -1)
    if split == -1:
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = list(dims[:split]) + [(dims[split] + 1) // 2, 1] + list(dims[split + 1:])
    return half, split, split + 1


def _combine_halves(o: _Ops, a, c, dims):
    """CombineShapePair."""
    if not dims:
        return o.reshape(a, ())
    _, split, concat_dim = _split_halves(dims)
    joined = o.b.concatenate([a, c], concat_dim)
    even = list(dims)
    even[split] = (dims[split] + 1) // 2 * 2
    out = o.reshape(joined, even)
    if even[split] != dims[split]:
        out = o.b.slice(out, [0] * len(dims), list(dims))
    return out


def _threefry_inputs(o: _Ops, initial, dims):
    """GetThreeFryInputsAndUpdatedState: counters state + row-major position."""
    counters = o.b.broadcast(o.reshape(initial, ()), dims, [])
    trailing = 1
    for i in range(len(dims) - 1, -1, -1):
        if dims[i] < 2:
            continue
        iota = o.b.iota("u64", dims, i)
        counters = o.add(counters, o.bin("multiply", iota, o.const(trailing, "u64")))
        trailing *= dims[i]
    new_state = o.add(initial, o.const(math.prod(dims), "u64"))
    return o.u64_to_u32s(counters), new_state


def _threefry_bits(o: _Ops, key, initial, dims, bits: int):
    k0, k1 = o.u64_to_u32s(key)
    if bits == 64:
        (x0, x1), new_state = _threefry_inputs(o, initial, list(dims))
        y0, y1 = _threefry2x32(o, x0, x1, k0, k1)
        return o.u32s_to_u64(y0, y1), new_state
    half, _, _ = _split_halves(list(dims))
    (x0, x1), new_state = _threefry_inputs(o, initial, half)
    y0, y1 = _threefry2x32(o, x0, x1, k0, k1)
    value = _combine_halves(o, y0, y1, list(dims))
    if bits < 32:
        value = o.convert(value, f"u{bits}")
    return value, new_state


# ---- Philox -----------------------------------------------------------------------------
def _philox4x32(o: _Ops, x, k0, k1):
    def mul_hi_lo(v, m):
        product = o.bin("multiply", o.convert(v, "u64"), o.const(m, "u64"))
        return o.convert(o.shr(product, 32), "u32"), o.convert(product, "u32")

    for rnd in range(10):
        if rnd:
            k0 = o.add(k0, o.const(_PHILOX_W[0], "u32"))
            k1 = o.add(k1, o.const(_PHILOX_W[1], "u32"))
        hi0, lo0 = mul_hi_lo(x[0], _PHILOX_M[0])
        hi1, lo1 = mul_hi_lo(x[2], _PHILOX_M[1])
        x = [o.xor(o.xor(hi1, x[1]), k0), lo1, o.xor(o.xor(hi0, x[3]), k1), lo0]
    return x


def _u128_add(o: _Ops, low, high, delta, n: int | None):
    """Uint128AddUint64 (``n``: the vector length ``delta`` has, None for a scalar)."""
    new_low = o.add(low, delta)
    carry = o.b.compare(new_low, o.b.broadcast(low, new_low.shape.dims, [])
                        if n is not None else low, "LT")
    high_plus = o.add(high, o.const(1, "u64"))
    if n is not None:
        high_plus = o.b.broadcast(high_plus, [n], [])
        high = o.b.broadcast(high, [n], [])
    return new_low, o.b.select(carry, high_plus, high)


def _philox_bits(o: _Ops, key, initial, dims, bits: int):
    n = math.prod(dims)
    words = 2 * n if bits == 64 else n
    k0, k1 = o.u64_to_u32s(key)
    low = o.reshape(o.slice1(initial, 0, 1), ())
    high = o.reshape(o.slice1(initial, 1, 2), ())
    s = [*o.u64_to_u32s(low), *o.u64_to_u32s(high)]
    low, high = o.u32s_to_u64(s[0], s[1]), o.u32s_to_u64(s[2], s[3])
    nv4 = (words + 3) // 4
    iota = o.b.iota("u64", [nv4], 0)
    c_low, c_high = _u128_add(o, low, high, iota, nv4)
    counters = [*o.u64_to_u32s(c_low), *o.u64_to_u32s(c_high)]
    n_low, n_high = _u128_add(o, low, high, o.const(nv4, "u64"), None)
    new_state = o.b.concatenate([o.reshape(n_low, [1]), o.reshape(n_high, [1])], 0)
    out = _philox4x32(o, counters, k0, k1)
    if bits == 64:
        parts = [o.u32s_to_u64(out[0], out[1]), o.u32s_to_u64(out[2], out[3])]
    else:
        parts = out
    cols = [o.reshape(p, [nv4, 1]) for p in parts]
    flat = o.reshape(o.b.concatenate(cols, 1), [nv4 * len(parts)])
    value = o.reshape(o.b.slice(flat, [0], [n]), list(dims))
    if bits < 32:
        value = o.convert(value, f"u{bits}")
    return value, new_state


# ---- the generator computation ------------------------------------------------------------
def generator_computation(module, data_shape: Shape, state_shape: Shape, algorithm: str):
    """The ``rng`` computation: state -> (new state, bits of ``data_shape``)."""
    comp, (state,) = new_computation("rng", [(state_shape.without_layout(), "state")])
    o = _Ops(Builder(comp))
    key = o.reshape(o.slice1(state, 0, 1), ())
    bits = BIT_WIDTH[data_shape.element_type]
    dims = list(data_shape.dims)
    if algorithm == "three_fry":
        value, new_state = _threefry_bits(o, key, o.slice1(state, 1, 2), dims, bits)
    else:
        words = state_shape.dims[0]
        initial = o.slice1(state, 1, 3) if words >= 3 else o.b.reverse(state, [0])
        value, new_state = _philox_bits(o, key, initial, dims, bits)
        if words < 3:
            new_state = o.slice1(new_state, 0, 1)
    if value.shape.element_type != data_shape.element_type:
        value = o.b.unary("bitcast-convert", value, data_shape.element_type)
    final_state = o.b.concatenate([o.reshape(key, [1]), new_state], 0)
    comp.root = o.b.tuple([final_state, value])
    module.add_computation(comp)
    return comp


def _expandable(inst, algorithm: str) -> bool:
    state = inst.operands[0].shape
    if not inst.shape.is_tuple() or len(inst.shape.tuple_shapes) != 2:
        return False
    data = inst.shape.tuple_shapes[1]
    if not data.is_array() or state.element_type != "u64" or state.rank != 1:
        return False
    et = data.element_type
    if et == "pred" or is_complex(et) or BIT_WIDTH.get(et) not in (8, 16, 32, 64):
        return False
    if algorithm == "three_fry":
        return state.dims[0] == 2
    return state.dims[0] in (2, 3)


class RngBitGeneratorExpander:
    name = "rng-bit-generator-expander"

    def __init__(self, default_algorithm: str = "philox"):
        if default_algorithm not in ("philox", "three_fry"):
            raise ValueError(f"default_algorithm must be philox or three_fry, "
                             f"got {default_algorithm!r}")
        self.default_algorithm = default_algorithm

    def algorithm(self, inst) -> str | None:
        text = inst.attrs.get("algorithm", "rng_default").strip().lower()
        if text not in _ALGORITHMS:
            return None
        return _ALGORITHMS[text] or self.default_algorithm

    def run(self, module) -> bool:
        changed = False
        cache: dict = {}
        for comp in non_fusion_computations(module):
            for inst in [i for i in comp.post_order() if i.opcode == "rng-bit-generator"]:
                algorithm = self.algorithm(inst)
                if algorithm is None or not _expandable(inst, algorithm):
                    continue
                state_shape = inst.operands[0].shape
                data_shape = inst.shape.tuple_shapes[1]
                key = (data_shape.to_text(False), state_shape.to_text(False), algorithm)
                gen = cache.get(key)
                if gen is None:
                    gen = cache[key] = generator_computation(module, data_shape,
                                                             state_shape, algorithm)
                call = Builder(comp)._add("call", inst.shape, [inst.operands[0]],
                                          attrs={"to_apply": ""}, called=[gen],
                                          called_attr="to_apply")
                replace_instruction(comp, inst, call)
                changed = True
        return changed
