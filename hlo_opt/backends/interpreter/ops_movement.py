"""Data movement: broadcast, reshape, transpose, slice, dynamic-slice,
dynamic-update-slice, pad, concatenate, reverse, iota, bitcast, copy and dimension sizes.

Results may be read-only numpy views (``np.broadcast_to``, transposes, slices): handlers
never write into their operands, so sharing is safe and saves the copies.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from .registry import register_fast
from .values import scalar_int


@register_fast("broadcast")
def _make_broadcast(inst):
    dims = tuple(inst.dimensions)
    out = inst.shape.dims
    rank = len(out)
    operand_rank = inst.operands[0].shape.rank
    if len(dims) != operand_rank:
        raise UnsupportedError(f"broadcast dimensions {list(dims)} do not match the operand "
                               f"rank {operand_rank}")
    if not dims:
        return lambda x: np.broadcast_to(x, out)
    perm = sorted(range(len(dims)), key=lambda k: dims[k])
    needs_perm = perm != list(range(len(dims)))
    sorted_dims = sorted(dims)

    def bcast(x):
        if needs_perm:
            x = np.transpose(x, perm)
        shape = [1] * rank
        for k, d in enumerate(sorted_dims):
            shape[d] = x.shape[k]
        return np.broadcast_to(np.reshape(x, shape), out)
    return bcast


@register_fast("reshape")
def _make_reshape(inst):
    out = inst.shape.dims
    return lambda x: np.reshape(x, out)


@register_fast("dynamic-reshape")
def _make_dynamic_reshape(inst):
    out = inst.shape.dims

    def dyn(x, *sizes):
        got = tuple(scalar_int(s) for s in sizes)
        if got != out:
            raise UnsupportedError(f"dynamic-reshape to sizes {list(got)} smaller than the "
                                   f"bounds {list(out)}: dynamic sizes are not supported")
        return np.reshape(x, out)
    return dyn


@register_fast("transpose")
def _make_transpose(inst):
    perm = tuple(inst.dimensions)
    return lambda x: np.transpose(x, perm)


@register_fast("copy", "opt-barrier", "domain")
def _make_identity(inst):
    return lambda x: x


@register_fast("slice")
def _make_slice(inst):
    spec = inst.attr("slice")
    index = tuple(slice(a, b, s) for a, b, s in spec.dims)
    return lambda x: x[index]


def _clamped_starts(starts, operand_dims, sizes):
    out = []
    for s, dim, size in zip(starts, operand_dims, sizes):
        v = scalar_int(s)
        out.append(min(max(v, 0), dim - size))
    return out


@register_fast("dynamic-slice")
def _make_dynamic_slice(inst):
    sizes = tuple(inst.attr("dynamic_slice_sizes"))
    operand_dims = inst.operands[0].shape.dims
    scalar_indices = len(inst.operands) == 1 + len(operand_dims)

    def dslice(x, *starts):
        if not scalar_indices:  # old form: one rank-1 index vector
            starts = list(np.asarray(starts[0]).reshape(-1))
        begin = _clamped_starts(starts, operand_dims, sizes)
        return x[tuple(slice(b, b + n) for b, n in zip(begin, sizes))]
    return dslice


@register_fast("dynamic-update-slice")
def _make_dynamic_update_slice(inst):
    operand_dims = inst.operands[0].shape.dims
    update_dims = inst.operands[1].shape.dims
    scalar_indices = len(inst.operands) == 2 + len(operand_dims)

    def dus(x, update, *starts):
        if not scalar_indices:
            starts = list(np.asarray(starts[0]).reshape(-1))
        begin = _clamped_starts(starts, operand_dims, update_dims)
        out = np.array(x, copy=True)
        out[tuple(slice(b, b + n) for b, n in zip(begin, update_dims))] = update
        return out
    return dus


@register_fast("pad")
def _make_pad(inst):
    config = inst.attr("padding").dims
    in_dims = inst.operands[0].shape.dims
    out_dims = inst.shape.dims
    if len(config) != len(in_dims):
        raise UnsupportedError(f"pad config has {len(config)} dimensions, operand rank is "
                               f"{len(in_dims)}")
    # Pad with max(lo, 0) / max(hi, 0) and interior, then crop the negative edges.
    full, place, crop = [], [], []
    for (lo, hi, interior), n in zip(config, in_dims):
        core = n + max(n - 1, 0) * interior
        size = max(lo, 0) + core + max(hi, 0)
        full.append(size)
        place.append(slice(max(lo, 0), max(lo, 0) + core, interior + 1))
        crop.append(slice(-min(lo, 0), size + min(hi, 0)))
    place_t, crop_t = tuple(place), tuple(crop)
    trivial = all(lo >= 0 and hi >= 0 for lo, hi, _ in config)

    def pad(x, value):
        out = np.full(full, value, dtype=inst.shape.dtype)
        if x.size:
            out[place_t] = x
        if not trivial:
            out = out[crop_t]
        if out.shape != out_dims:
            raise UnsupportedError(f"pad produced {list(out.shape)}, expected {list(out_dims)}")
        return out
    return pad


@register_fast("concatenate")
def _make_concatenate(inst):
    dims = inst.dimensions
    if len(dims) != 1:
        raise UnsupportedError(f"concatenate needs one dimension, got {list(dims)}")
    axis = dims[0]
    return lambda *xs: np.concatenate(xs, axis=axis)


@register_fast("reverse")
def _make_reverse(inst):
    axes = tuple(inst.dimensions)
    if not axes:
        return lambda x: x
    return lambda x: np.flip(x, axis=axes)


@register_fast("iota")
def _make_iota(inst):
    dims = inst.shape.dims
    d = inst.attr("iota_dimension", 0)
    dt = inst.shape.dtype
    et = inst.shape.element_type
    if not 0 <= d < max(len(dims), 1):
        raise UnsupportedError(f"iota_dimension={d} is out of range for rank {len(dims)}")

    def iota():
        if et == "pred":
            line = np.arange(dims[d]) != 0
        else:
            line = np.arange(dims[d], dtype=np.int64)
            line = line.astype(np.float64).astype(dt) if dt.kind in "fcV" else line.astype(dt)
        shape = [1] * len(dims)
        shape[d] = dims[d]
        return np.broadcast_to(line.reshape(shape), dims)
    return iota


# ---- bitcast: reinterpret through the physical layouts -----------------------------------
def _major_to_minor(shape) -> tuple[int, ...]:
    layout = shape.effective_layout()
    if "T(" in layout.tail:
        raise UnsupportedError(f"bitcast of a tiled layout {layout.to_text()} is not "
                               "supported by the interpreter")
    return tuple(reversed(layout.minor_to_major))


@register_fast("bitcast")
def _make_bitcast(inst):
    src = inst.operands[0].shape
    dst = inst.shape
    if not src.is_array() or not dst.is_array():
        raise UnsupportedError("bitcast of a non-array shape")
    if src.num_elements() * _bits(src) != dst.num_elements() * _bits(dst):
        raise UnsupportedError(f"bitcast changes the size: {src.to_text()} -> {dst.to_text()}")
    if _bits(src) != _bits(dst):
        raise UnsupportedError(f"bitcast between element sizes is not supported: "
                               f"{src.to_text()} -> {dst.to_text()}")
    src_order = _major_to_minor(src)
    dst_order = _major_to_minor(dst)
    out_dims = dst.dims
    dst_physical = tuple(out_dims[d] for d in dst_order)
    inverse = tuple(np.argsort(dst_order)) if dst_order else ()
    src_identity = src_order == tuple(range(src.rank))
    dst_identity = dst_order == tuple(range(dst.rank))
    retype = src.element_type != dst.element_type
    dt = dst.dtype

    def bitcast(x):
        if retype:
            x = np.asarray(x).view(dt)
        flat = x if src_identity else np.transpose(x, src_order)
        if dst_identity:
            return np.reshape(flat, out_dims)
        return np.transpose(np.reshape(flat, dst_physical), inverse)
    return bitcast


def _bits(shape) -> int:
    from ...ir.types import BIT_WIDTH
    return BIT_WIDTH[shape.element_type]


@register_fast("get-dimension-size")
def _make_get_dimension_size(inst):
    d = inst.dimensions[0] if inst.dimensions else 0
    dt = inst.shape.dtype
    return lambda x: np.asarray(np.shape(x)[d], dtype=dt)


@register_fast("set-dimension-size")
def _make_set_dimension_size(inst):
    d = inst.dimensions[0] if inst.dimensions else 0
    bound = inst.shape.dims[d]

    def set_size(x, size):
        n = scalar_int(size)
        if n != bound:
            raise UnsupportedError(
                f"set-dimension-size to {n} below the bound {bound}: dynamic dimension sizes "
                "are not supported by the interpreter")
        return x
    return set_size
