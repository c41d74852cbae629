"""rng-bit-generator (bit-exact with XLA), rng (uniform / normal) and
rng-get-and-update-state.

rng-bit-generator follows xla/hlo/transforms/expanders/rng_bit_generator_expander.cc and
xla/hlo/builder/lib/prng.cc exactly:

* the state is ``u64[N]``: ``state[0]`` is the key;
* ``rng_three_fry`` (N = 2): counter ``state[1]``; 32-bit outputs come from Threefry-2x32
  (20 rounds) on half as many counters (the shape is split in two along its first even
  dim, else its largest dim, and the two output words interleave along it); 64-bit outputs
  join the two words; 8/16-bit outputs truncate the 32-bit ones; the new state is
  ``[key, counter + number of counters used]``;
* ``rng_philox``: the 128-bit counter is ``state[1:3]`` (N >= 3) or ``[state[1],
  state[0]]`` (N = 2); Philox-4x32 (10 rounds) on ``ceil(n/4)`` counters (``ceil(n/2)``
  for 64-bit outputs) after ``counter + iota``; the words interleave round-robin; the new
  state is ``[key, counter + used]`` (only the low word when N = 2);
* ``rng_default`` is Philox: the XLA interpreter has no RngBitGenerator expander, and the
  CPU and GPU compilers run ``RngBitGeneratorExpander(RNG_PHILOX)``.

rng (``distribution=rng_uniform|rng_normal``) follows RngExpander: Philox bits keyed by
``seed ^ ((op_id * 0x9E3779B97F4A7C15) >> 32)`` with the counter from
rng-get-and-update-state, then prng.cc's uniform (mantissa bits), uniform-int (modulo) and
Box-Muller normal transforms.  The seed is ``ctx.rng_seed`` (default 42) and op_id a hash of
the instruction name, so values are reproducible here but not XLA's (XLA draws a seed per
run).

rng-get-and-update-state: a 128-bit counter per evaluation context, starting at 0x7012395
(llvm_ir::RngGetAndUpdateState), returned as ``u64[2]`` (low, high) and advanced by
``delta``.
"""
from __future__ import annotations

import zlib

import numpy as np

from .heavy_common import as_result, is_float_dtype, unsupported
from .registry import register

_U32 = np.uint32
_U64 = np.uint64
_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1

_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)


# ---- the two block functions ------------------------------------------------------------
def threefry2x32(x0, x1, k0: int, k1: int):
    """Threefry-2x32, 20 rounds (prng.cc ThreeFry2x32) on uint32 arrays."""
    x0 = np.array(x0, dtype=_U32, ndmin=1)
    x1 = np.array(x1, dtype=_U32, ndmin=1)
    ks = [k0 & _M32, k1 & _M32, (0x1BD11BDA ^ k0 ^ k1) & _M32]
    with np.errstate(over="ignore"):
        x0 = x0 + _U32(ks[0])
        x1 = x1 + _U32(ks[1])
        for block in range(5):
            rot = _THREEFRY_ROTATIONS[:4] if block % 2 == 0 else _THREEFRY_ROTATIONS[4:]
            for r in rot:
                x0 = x0 + x1
                x1 = (x1 << _U32(r)) | (x1 >> _U32(32 - r))
                x1 = x0 ^ x1
            x0 = x0 + _U32(ks[(block + 1) % 3])
            x1 = x1 + _U32((ks[(block + 2) % 3] + block + 1) & _M32)
    return x0, x1


_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)


def philox4x32(c0, c1, c2, c3, k0: int, k1: int):
    """Philox-4x32, 10 rounds (prng.cc Philox4x32) on uint32 arrays."""
    c = [np.array(v, dtype=_U32, ndmin=1) for v in (c0, c1, c2, c3)]
    k0, k1 = k0 & _M32, k1 & _M32
    for _ in range(10):
        p0 = c[0].astype(_U64) * _U64(_PHILOX_M[0])
        p1 = c[2].astype(_U64) * _U64(_PHILOX_M[1])
        hi0, lo0 = (p0 >> _U64(32)).astype(_U32), (p0 & _U64(_M32)).astype(_U32)
        hi1, lo1 = (p1 >> _U64(32)).astype(_U32), (p1 & _U64(_M32)).astype(_U32)
        c = [hi1 ^ c[1] ^ _U32(k0), lo1, hi0 ^ c[3] ^ _U32(k1), lo0]
        k0 = (k0 + _PHILOX_W[0]) & _M32
        k1 = (k1 + _PHILOX_W[1]) & _M32
    return tuple(c)


# ---- shapes -------------------------------------------------------------------------------
def _split_halves(dims):
    """prng.cc SplitShapeIntoHalves: (split_dim, half dims) for a non-scalar shape."""
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), -1)
    if split == -1:
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = list(dims)
    half[split] = (dims[split] + 1) // 2
    return split, half


def _combine_halves(a, b, dims):
    """prng.cc CombineShapePair: interleave two half-shaped arrays along the split dim."""
    if not dims:
        return a.reshape(-1)[0].reshape(())
    split, half = _split_halves(dims)
    a = a.reshape(half[:split + 1] + [1] + half[split + 1:])
    b = b.reshape(half[:split + 1] + [1] + half[split + 1:])
    both = np.concatenate([a, b], axis=split + 1)
    full = list(dims)
    full[split] = half[split] * 2
    both = both.reshape(full)
    return both[tuple(slice(0, d) for d in dims)]


def _u64_split(v: np.ndarray):
    v = v.astype(_U64)
    return (v & _U64(_M32)).astype(_U32), (v >> _U64(32)).astype(_U32)


# ---- generators (value bits, new counter) ----------------------------------------------
def threefry_bits(key: int, counter: int, dims, bits: int):
    """(uint array of ``dims`` with ``bits`` bits, new counter)."""
    dims = list(dims)
    if bits == 64:
        n = int(np.prod(dims, dtype=np.int64))
        ctr = _counters(counter, n)
        y0, y1 = threefry2x32(*_u64_split(ctr), key & _M32, key >> 32)
        out = y0.astype(_U64) | (y1.astype(_U64) << _U64(32))
        return out.reshape(dims), (counter + n) & _M64
    half = [1] if not dims else _split_halves(dims)[1]
    n = int(np.prod(half, dtype=np.int64))
    ctr = _counters(counter, n)
    y0, y1 = threefry2x32(*_u64_split(ctr), key & _M32, key >> 32)
    out = _combine_halves(y0, y1, dims)
    return _narrow(out, bits), (counter + n) & _M64


def philox_bits(key: int, counter128: int, dims, bits: int):
    """(uint array of ``dims`` with ``bits`` bits, new 128-bit counter)."""
    dims = list(dims)
    n = int(np.prod(dims, dtype=np.int64))
    words = 2 * n if bits == 64 else n
    nv4 = (words + 3) // 4
    lo = counter128 & _M64
    hi = counter128 >> 64
    iota = np.arange(nv4, dtype=_U64)
    with np.errstate(over="ignore"):
        new_lo = _U64(lo) + iota
    carry = new_lo < _U64(lo)
    new_hi = np.where(carry, _U64((hi + 1) & _M64), _U64(hi))
    c0, c1 = _u64_split(new_lo)
    c2, c3 = _u64_split(new_hi)
    b = philox4x32(c0, c1, c2, c3, key & _M32, key >> 32)
    if bits == 64:
        w0 = b[0].astype(_U64) | (b[1].astype(_U64) << _U64(32))
        w1 = b[2].astype(_U64) | (b[3].astype(_U64) << _U64(32))
        out = np.stack([w0, w1], axis=1).reshape(-1)[:n]
    else:
        out = _narrow(np.stack(b, axis=1).reshape(-1)[:n], bits)
    return out.reshape(dims), (counter128 + nv4) & ((1 << 128) - 1)


def _counters(start: int, n: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        return _U64(start) + np.arange(n, dtype=_U64)


def _narrow(u32: np.ndarray, bits: int) -> np.ndarray:
    if bits == 32:
        return u32
    if bits in (8, 16):
        return u32.astype(np.dtype(f"uint{bits}"))
    raise ValueError(f"{bits}-bit random values")


# ---- rng-bit-generator ------------------------------------------------------------------
def _algorithm(inst) -> str:
    text = inst.attrs.get("algorithm", "rng_default").strip().lower()
    return {"rng_default": "philox", "rng_philox": "philox",
            "rng_three_fry": "three_fry"}.get(text, text)


@register("rng-bit-generator")
def rng_bit_generator(inst, args, ctx):
    state = np.asarray(args[0])
    if state.ndim != 1 or state.dtype != np.uint64:
        raise unsupported(inst, f"state must be u64[N], got {state.dtype}{list(state.shape)}")
    words = [int(v) for v in state.tolist()]
    state_shape, data_shape = inst.shape.tuple_shapes
    dtype = data_shape.dtype
    bits = dtype.itemsize * 8
    if bits not in (8, 16, 32, 64) or dtype == np.bool_ or \
            np.issubdtype(dtype, np.complexfloating):
        raise unsupported(inst, f"random bits of type {data_shape.element_type}")
    algorithm = _algorithm(inst)
    key = words[0]
    if algorithm == "three_fry":
        if len(words) != 2:
            raise unsupported(inst, "rng_three_fry needs a u64[2] state")
        value, counter = threefry_bits(key, words[1], data_shape.dims, bits)
        new_state = [key, counter]
    elif algorithm == "philox":
        if len(words) == 2:
            counter = words[1] | (words[0] << 64)
        elif len(words) == 3:
            counter = words[1] | (words[2] << 64)
        else:
            raise unsupported(inst, "rng_philox needs a u64[2] or u64[3] state")
        value, counter = philox_bits(key, counter, data_shape.dims, bits)
        new_state = [key, counter & _M64] + ([counter >> 64] if len(words) == 3 else [])
    else:
        raise unsupported(inst, f"unknown algorithm {inst.attrs.get('algorithm')}")
    value = np.ascontiguousarray(value).view(dtype) if value.dtype != dtype else value
    return (as_result(np.array(new_state, dtype=_U64), state_shape),
            as_result(value, data_shape))


# ---- rng-get-and-update-state and rng ---------------------------------------------------
_INITIAL_STATE = 0x7012395
_FALLBACK_STATES: dict[int, int] = {}


def get_and_update_state(ctx, delta: int) -> int:
    """The context's 128-bit RNG counter before adding ``delta``."""
    old = getattr(ctx, "rng_state", None)
    if old is None:
        old = _FALLBACK_STATES.get(id(ctx), _INITIAL_STATE)
    new = (old + delta) & ((1 << 128) - 1)
    try:
        ctx.rng_state = new
    except AttributeError:
        _FALLBACK_STATES[id(ctx)] = new
    return old


@register("rng-get-and-update-state")
def rng_get_and_update_state(inst, args, ctx):
    delta = int(inst.attrs.get("delta", "0"))
    old = get_and_update_state(ctx, delta)
    return as_result(np.array([old & _M64, old >> 64], dtype=_U64), inst.shape)


def _uniform_float(bits: np.ndarray, lo, hi, dtype):
    nbits = bits.dtype.itemsize * 8
    mant = np.finfo(dtype).nmant
    vals = (bits >> bits.dtype.type(nbits - mant)).astype(dtype)
    vals = vals * dtype.type(np.ldexp(1.0, -mant))
    return vals * (dtype.type(hi) - dtype.type(lo)) + dtype.type(lo)


def _uniform_int(bits: np.ndarray, lo, hi, dtype):
    udt = bits.dtype
    with np.errstate(over="ignore"):
        span = np.asarray(hi, dtype).view(udt) - np.asarray(lo, dtype).view(udt)
        if span == 0:
            raise ZeroDivisionError
        dist = bits % span
        half = dist >> udt.type(1)
        return (np.asarray(lo, dtype) + half.view(dtype) + (dist - half).view(dtype))


@register("rng")
def rng(inst, args, ctx):
    a, b = (np.asarray(v) for v in args[:2])
    dtype = inst.shape.dtype
    dims = list(inst.shape.dims)
    dist = inst.attrs.get("distribution", "").strip().lower()
    work = dtype
    if is_float_dtype(dtype) and dtype.itemsize < 4:
        work = np.dtype(np.float32)  # RngExpander: small floats are drawn as f32
    if work.itemsize not in (4, 8):
        raise unsupported(inst, f"rng of type {inst.shape.element_type}")
    bits = work.itemsize * 8
    n = int(np.prod(dims, dtype=np.int64))
    seed = int(getattr(ctx, "rng_seed", 42)) & _M64
    op_id = zlib.crc32(inst.name.encode())
    key = seed ^ (((op_id * 0x9E3779B97F4A7C15) & _M64) >> 32)
    counter = get_and_update_state(ctx, n * bits // 32)
    if dist == "rng_uniform":
        raw, _ = philox_bits(key, counter, dims, bits)
        if is_float_dtype(work):
            out = _uniform_float(raw, a.astype(work), b.astype(work), np.dtype(work))
        elif np.issubdtype(work, np.integer):
            try:
                out = _uniform_int(raw, a.astype(work), b.astype(work), np.dtype(work))
            except ZeroDivisionError:
                raise unsupported(inst, "rng_uniform with an empty range") from None
        else:
            raise unsupported(inst, f"rng_uniform of type {inst.shape.element_type}")
    elif dist == "rng_normal":
        if not is_float_dtype(work):
            raise unsupported(inst, "rng_normal needs a floating-point type")
        out = _normal(key, counter, dims, bits, np.dtype(work))
        out = a.astype(work) + b.astype(work) * out
    else:
        raise unsupported(inst, f"unknown distribution {inst.attrs.get('distribution')}")
    return as_result(np.asarray(out).astype(dtype), inst.shape)


def _normal(key, counter, dims, bits, dtype):
    """prng.cc NormalFloatingPointDistribution (Box-Muller on split halves)."""
    if dims:
        split, half = _split_halves(dims)
        concat = half[:split + 1] + [2] + half[split + 1:]
    else:
        split, half, concat = 0, [1], [1, 2]
    raw, _ = philox_bits(key, counter, concat, bits)
    u = _uniform_float(raw, 0.0, 1.0, dtype)
    x0 = np.take(u, 0, axis=split + 1)
    x1 = np.take(u, 1, axis=split + 1)
    u1 = np.maximum(x0, dtype.type(1.0e-7))
    v1 = dtype.type(2.0 * np.pi) * x1
    u2 = np.sqrt(dtype.type(-2.0) * np.log(u1))
    return _combine_halves(np.sin(v1) * u2, np.cos(v1) * u2, dims)
