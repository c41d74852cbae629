"""Data-movement rules: broadcast, reshape, transpose, slices, pad, concatenate, reverse,
iota, bitcast and the dimension-size ops."""
from __future__ import annotations

import math

from ..ir.shape import Shape
from ..ir.types import is_complex, is_float, is_integral
from .common import (S32_SCALAR, attr, check_dims_in_range, compatible, declared,
                     expect_array, fail, higher_precision, int_attr, need_operands,
                     same_type_ignoring_fp, text)


def broadcast(inst) -> Shape:
    """HLO broadcast: the result dims are declared; operand dim i becomes result dim
    dimensions[i] (hlo_verifier HandleBroadcast)."""
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of broadcast")
    out = declared(inst, "result dimensions")
    expect_array(out, "result of broadcast")
    dims = attr(inst, "dimensions", ())
    if len(dims) != s.rank:
        fail(f"broadcast has {len(dims)} dimensions for an operand of rank {s.rank}")
    check_dims_in_range(dims, out.rank, "broadcast")
    for i, d in enumerate(dims):
        if s.dims[i] != out.dims[d]:
            fail(f"broadcast operand dimension {i} (size {s.dims[i]}) does not match "
                 f"result dimension {d} (size {out.dims[d]})")
    if out.element_type == s.element_type:
        return out  # the declared shape is the result (layouts are not compared)
    return Shape(s.element_type, out.dims, out.dynamic)


def reshape(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of reshape")
    out = declared(inst, "result dimensions")
    expect_array(out, "result of reshape")
    if _elements(s) != _elements(out):
        fail(f"reshape changes the element count: {text(s)} ({_elements(s)}) to "
             f"{text(out)} ({_elements(out)})")
    if out.element_type == s.element_type:
        return out  # the declared shape is the result (layouts are not compared)
    return Shape(s.element_type, out.dims, out.dynamic)


def _elements(s: Shape) -> int:
    return math.prod(d for d in s.dims if d >= 0)


def dynamic_reshape(inst) -> Shape:
    if not inst.operands:
        fail("dynamic-reshape needs an operand")
    s = expect_array(inst.operands[0].shape, "operand of dynamic-reshape")
    out = declared(inst, "result dimensions")
    expect_array(out, "result of dynamic-reshape")
    if len(inst.operands) != out.rank + 1:
        fail(f"dynamic-reshape to rank {out.rank} needs {out.rank} size operands, has "
             f"{len(inst.operands) - 1}")
    for o in inst.operands[1:]:
        if not compatible(o.shape, S32_SCALAR):
            fail(f"dynamic-reshape sizes must be s32[], got {text(o.shape)}")
    if _elements(s) != _elements(out):
        fail(f"dynamic-reshape changes the element count: {text(s)} to {text(out)}")
    return Shape(s.element_type, out.dims, out.dynamic)


def transpose(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of transpose")
    perm = attr(inst, "dimensions", required=True)
    if len(perm) != s.rank or sorted(perm) != list(range(s.rank)):
        fail(f"transpose dimensions {{{','.join(map(str, perm))}}} are not a permutation "
             f"of the operand's {s.rank} dimensions")
    return Shape(s.element_type, tuple(s.dims[p] for p in perm),
                 tuple(s.dynamic[p] for p in perm))


def slice_(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of slice")
    spec = attr(inst, "slice", required=True)
    if len(spec.dims) != s.rank:
        fail(f"slice has {len(spec.dims)} ranges for an operand of rank {s.rank}")
    dims, dyn = [], []
    for i, (start, limit, stride) in enumerate(spec.dims):
        if start < 0:
            fail(f"slice start {start} in dimension {i} is negative")
        if limit > s.dims[i] >= 0:
            fail(f"slice limit {limit} in dimension {i} exceeds the size {s.dims[i]}")
        if start > limit:
            fail(f"slice start {start} is after the limit {limit} in dimension {i}")
        if stride <= 0:
            fail(f"slice stride {stride} in dimension {i} must be positive")
        size = (limit - start + stride - 1) // stride
        dims.append(size)
        dyn.append(s.dynamic[i] and size != 1)
    return Shape(s.element_type, dims, dyn)


def _check_index_operands(op: str, rank: int, indices) -> None:
    if len(indices) == 1 and indices[0].shape.is_array() and indices[0].shape.rank == 1:
        s = indices[0].shape
        if not is_integral(s.element_type):
            fail(f"{op} start indices must be integral, got {text(s)}")
        if s.dims[0] != rank:
            fail(f"{op} has {s.dims[0]} start indices for an operand of rank {rank}")
        return
    if len(indices) != rank:
        fail(f"{op} has {len(indices)} start indices for an operand of rank {rank}")
    if indices:
        first = indices[0].shape
        if not first.is_scalar() or not is_integral(first.element_type):
            fail(f"{op} start indices must be integral scalars, got {text(first)}")
        for o in indices[1:]:
            if not compatible(o.shape, first):
                fail(f"{op} start indices must all have one shape, got {text(first)} and "
                     f"{text(o.shape)}")


def dynamic_slice(inst) -> Shape:
    if not inst.operands:
        fail("dynamic-slice needs an operand")
    s = expect_array(inst.operands[0].shape, "operand of dynamic-slice")
    _check_index_operands("dynamic-slice", s.rank, inst.operands[1:])
    sizes = attr(inst, "dynamic_slice_sizes", required=True)
    if len(sizes) != s.rank:
        fail(f"dynamic-slice has {len(sizes)} sizes for an operand of rank {s.rank}")
    for i, (size, bound) in enumerate(zip(sizes, s.dims)):
        if size < 0:
            fail(f"dynamic-slice size {size} in dimension {i} is negative")
        if size > bound >= 0:
            fail(f"dynamic-slice size {size} in dimension {i} exceeds the operand's {bound}")
    return Shape(s.element_type, sizes)


def dynamic_update_slice(inst) -> Shape:
    if len(inst.operands) < 2:
        fail("dynamic-update-slice needs an operand and an update")
    s = expect_array(inst.operands[0].shape, "operand of dynamic-update-slice")
    u = expect_array(inst.operands[1].shape, "update of dynamic-update-slice")
    _check_index_operands("dynamic-update-slice", s.rank, inst.operands[2:])
    if u.rank != s.rank:
        fail(f"dynamic-update-slice update {text(u)} and operand {text(s)} differ in rank")
    if not same_type_ignoring_fp(s, u):
        fail(f"dynamic-update-slice update type {u.element_type} differs from the "
             f"operand's {s.element_type}")
    for i, (a, b) in enumerate(zip(u.dims, s.dims)):
        if a > b >= 0:
            fail(f"dynamic-update-slice update dimension {i} ({a}) exceeds the operand's "
                 f"({b})")
    dyn = tuple(ds or (du and a == b) for ds, du, a, b in zip(s.dynamic, u.dynamic, u.dims,
                                                               s.dims))
    return Shape(s.element_type, s.dims, dyn)


def pad(inst) -> Shape:
    need_operands(inst, 2)
    s = expect_array(inst.operands[0].shape, "operand of pad")
    v = inst.operands[1].shape
    if not v.is_scalar():
        fail(f"pad value must be a scalar, got {text(v)}")
    if not same_type_ignoring_fp(s, v):
        fail(f"pad value type {v.element_type} differs from the operand's {s.element_type}")
    config = attr(inst, "padding", required=True)
    if len(config.dims) != s.rank:
        fail(f"padding has {len(config.dims)} dimensions for an operand of rank {s.rank}")
    dims = []
    for i, (lo, hi, interior) in enumerate(config.dims):
        if interior < 0:
            fail(f"interior padding {interior} in dimension {i} is negative")
        size = s.dims[i] + lo + hi + max(s.dims[i] - 1, 0) * interior
        if size < 0:
            fail(f"padding makes dimension {i} negative ({size})")
        dims.append(size)
    return Shape(s.element_type, dims, s.dynamic)


def concatenate(inst) -> Shape:
    shapes = [o.shape for o in inst.operands]
    if not shapes:
        fail("concatenate needs at least one operand")
    dims = attr(inst, "dimensions", required=True)
    if len(dims) != 1:
        fail(f"concatenate needs exactly one dimension, has {len(dims)}")
    d = dims[0]
    first = expect_array(shapes[0], "operand of concatenate")
    if d < 0 or d >= first.rank:
        fail(f"concatenate dimension {d} is out of range for rank {first.rank}")
    total = 0
    etype = first.element_type
    dyn = list(first.dynamic)
    for s in shapes:
        expect_array(s, "operand of concatenate")
        if s.rank != first.rank:
            fail(f"concatenate operands differ in rank: {text(first)} and {text(s)}")
        if not same_type_ignoring_fp(s, first):
            fail(f"concatenate operands differ in element type: {text(first)} and {text(s)}")
        for i, (a, b) in enumerate(zip(s.dims, first.dims)):
            if i != d and a != b:
                fail(f"concatenate operands differ in dimension {i}: {text(first)} and "
                     f"{text(s)}")
        total += s.dims[d]
        etype = higher_precision(etype, s.element_type)
        dyn = [a or b for a, b in zip(dyn, s.dynamic)]
    out = list(first.dims)
    out[d] = total
    return Shape(etype, out, dyn)


def reverse(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of reverse")
    check_dims_in_range(attr(inst, "dimensions", ()), s.rank, "reverse")
    return s


def iota(inst) -> Shape:
    need_operands(inst, 0)
    out = declared(inst, "shape")
    if not out.is_array() or out.rank == 0:
        fail(f"iota must produce an array of rank >= 1, declares {text(out)}")
    d = int_attr(inst, "iota_dimension")  # required, as in XLA's parser
    if d < 0 or d >= out.rank:
        fail(f"iota_dimension {d} is out of range for rank {out.rank}")
    t = out.element_type
    if not (is_integral(t) or is_float(t) or is_complex(t)):
        fail(f"iota of {t} is not supported")
    return out


def bitcast(inst) -> Shape:
    """A bitcast reinterprets the bytes: the result is declared, the byte size must
    match (layout-insensitive form of hlo_verifier's HandleBitcast)."""
    need_operands(inst, 1)
    out = declared(inst, "shape")
    s = inst.operands[0].shape
    if s.is_array() and out.is_array() and not s.is_dynamic() and not out.is_dynamic() \
            and s.byte_size() != out.byte_size():
        fail(f"bitcast changes the byte size: {text(s)} ({s.byte_size()} bytes) to "
             f"{text(out)} ({out.byte_size()} bytes)")
    return out


def get_dimension_size(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of get-dimension-size")
    d = _single_dimension(inst, s.rank)
    if s.dims[d] > 2**31 - 1:
        fail(f"get-dimension-size of dimension {d} exceeds INT_MAX")
    return S32_SCALAR


def set_dimension_size(inst) -> Shape:
    need_operands(inst, 2)
    s = expect_array(inst.operands[0].shape, "operand of set-dimension-size")
    d = _single_dimension(inst, s.rank)
    if not compatible(inst.operands[1].shape, S32_SCALAR):
        fail(f"set-dimension-size's size must be s32[], got {text(inst.operands[1].shape)}")
    dyn = list(s.dynamic)
    dyn[d] = True
    return Shape(s.element_type, s.dims, dyn)


def _single_dimension(inst, rank: int) -> int:
    dims = attr(inst, "dimensions", required=True)
    if len(dims) != 1 or not 0 <= dims[0] < rank:
        fail(f"{inst.opcode} needs one dimension in [0, {rank}), has "
             f"{{{','.join(map(str, dims))}}}")
    return dims[0]
