"""Linear-algebra rules: dot (and ragged-dot), convolution, fft, cholesky,
triangular-solve and the three batch-norm ops."""
from __future__ import annotations

from ..ir.shape import Shape
from ..ir.types import BIT_WIDTH, is_complex, is_float
from .common import (attr, complex_component, declared, expect_array, fail,
                     higher_precision, int_attr, need_operands, same_type_ignoring_fp, text,
                     window_output_dims)


def _result_type(inst, lhs: Shape, rhs: Shape) -> str:
    """MaybeUpcast(HigherPrecisionElementType(lhs, rhs), preferred = declared type)."""
    base = higher_precision(lhs.element_type, rhs.element_type)
    if inst.shape is None:
        return base
    if not inst.shape.is_array():
        fail(f"{inst.opcode} must produce an array, declares {text(inst.shape)}")
    want = inst.shape.element_type
    if want != base and not is_float(base) and BIT_WIDTH[want] < BIT_WIDTH[base]:
        fail(f"{inst.opcode} result type {want} is narrower than its operands' {base}")
    return want


def _dot_dims(lhs: Shape, rhs: Shape, lc, rc, lb, rb) -> tuple[list, list]:
    for rank, dims, side in ((lhs.rank, list(lc) + list(lb), "lhs"),
                             (rhs.rank, list(rc) + list(rb), "rhs")):
        for d in dims:
            if d < 0 or d >= rank:
                fail(f"dot {side} dimension {d} is out of range for rank {rank}")
        if len(set(dims)) != len(dims):
            fail(f"dot {side} contracting/batch dimensions repeat a dimension")
    if len(lc) != len(rc):
        fail(f"dot has {len(lc)} lhs but {len(rc)} rhs contracting dimensions")
    for a, b in zip(lc, rc):
        if lhs.dims[a] != rhs.dims[b]:
            fail(f"dot contracting dimension sizes differ: {text(lhs)} dim {a} vs "
                 f"{text(rhs)} dim {b}")
    if len(lb) != len(rb):
        fail(f"dot has {len(lb)} lhs but {len(rb)} rhs batch dimensions")
    for a, b in zip(lb, rb):
        if lhs.dims[a] != rhs.dims[b]:
            fail(f"dot batch dimension sizes differ: {text(lhs)} dim {a} vs {text(rhs)} "
                 f"dim {b}")
    dims = [lhs.dims[d] for d in lb]
    dyn = [lhs.dynamic[d] for d in lb]
    skip_l, skip_r = set(lc) | set(lb), set(rc) | set(rb)
    for s, skip in ((lhs, skip_l), (rhs, skip_r)):
        for i in range(s.rank):
            if i not in skip:
                dims.append(s.dims[i])
                dyn.append(s.dynamic[i])
    return dims, dyn


def _dot_numbers(inst):
    return (attr(inst, "lhs_contracting_dims", ()), attr(inst, "rhs_contracting_dims", ()),
            attr(inst, "lhs_batch_dims", ()), attr(inst, "rhs_batch_dims", ()))


def dot(inst) -> Shape:
    if "sparsity" in inst.attrs:
        if len(inst.operands) < 2:
            fail("sparse dot needs at least two operands")
        return declared(inst, "shape (sparse dot)")
    need_operands(inst, 2)
    lhs = expect_array(inst.operands[0].shape, "lhs of dot")
    rhs = expect_array(inst.operands[1].shape, "rhs of dot")
    dims, dyn = _dot_dims(lhs, rhs, *_dot_numbers(inst))
    return Shape(_result_type(inst, lhs, rhs), dims, dyn)


def ragged_dot(inst) -> Shape:
    need_operands(inst, 3)
    lhs = expect_array(inst.operands[0].shape, "lhs of ragged-dot")
    rhs = expect_array(inst.operands[1].shape, "rhs of ragged-dot")
    groups = expect_array(inst.operands[2].shape, "group sizes of ragged-dot")
    if groups.rank < 1:
        fail("ragged-dot group sizes must have rank >= 1")
    lc, rc, lb, rb = _dot_numbers(inst)
    ragged = attr(inst, "lhs_ragged_dims", ())
    group = attr(inst, "rhs_group_dims", ())
    if len(ragged) != 1 or not 0 <= ragged[0] < lhs.rank:
        fail("ragged-dot needs exactly one lhs ragged dimension in range")
    if len(group) > 1 or any(not 0 <= g < rhs.rank for g in group):
        fail("ragged-dot allows at most one rhs group dimension, in range")
    kept = [d for d in range(rhs.rank) if d not in group]
    remap = {d: i for i, d in enumerate(kept)}
    rhs_view = Shape(rhs.element_type, [rhs.dims[d] for d in kept])
    if any(d in group for d in list(rc) + list(rb)):
        fail("ragged-dot rhs group dimension cannot be contracting or batch")
    dims, dyn = _dot_dims(lhs, rhs_view, lc, [remap[d] for d in rc], lb,
                          [remap[d] for d in rb])
    r = ragged[0]
    if r in lc:  # ragged contracting: one result per group, prepended
        if group:
            fail("ragged-dot with a ragged contracting dimension takes no rhs group dim")
        dims, dyn = [groups.dims[-1]] + dims, [False] + dyn
    elif r not in lb and not group:
        fail("ragged-dot with a ragged non-contracting dimension needs an rhs group dim")
    return Shape(_result_type(inst, lhs, rhs), dims, dyn)


def convolution(inst) -> Shape:
    need_operands(inst, 2)
    lhs = expect_array(inst.operands[0].shape, "lhs of convolution")
    rhs = expect_array(inst.operands[1].shape, "rhs of convolution")
    fgc = int_attr(inst, "feature_group_count", 1)
    bgc = int_attr(inst, "batch_group_count", 1)
    if fgc <= 0 or bgc <= 0:
        fail("convolution group counts must be positive")
    if fgc > 1 and bgc > 1:
        fail("convolution cannot have both feature_group_count and batch_group_count > 1")
    dn = attr(inst, "dim_labels", required=True)
    n = len(dn.input_spatial)
    if len(dn.kernel_spatial) != n or len(dn.output_spatial) != n:
        fail(f"convolution dim_labels {dn.text} disagree on the number of spatial dims")
    window = attr(inst, "window")
    wdims = window.dims if window is not None else []
    if len(wdims) != n:
        fail(f"convolution window has {len(wdims)} dimensions, dim_labels have {n} spatial")
    rank = n + 2
    for s, side in ((lhs, "lhs"), (rhs, "rhs")):
        if s.rank != rank:
            fail(f"convolution {side} {text(s)} must have rank {rank}")
    for label, dims in (("input", [dn.input_batch, dn.input_feature] + list(dn.input_spatial)),
                        ("kernel", [dn.kernel_input_feature, dn.kernel_output_feature]
                         + list(dn.kernel_spatial)),
                        ("output", [dn.output_batch, dn.output_feature] + list(dn.output_spatial))):
        if sorted(dims) != list(range(rank)):
            fail(f"convolution {label} dim_labels must name each of {rank} dims once")
    in_batch, in_feat = lhs.dims[dn.input_batch], lhs.dims[dn.input_feature]
    k_in, k_out = rhs.dims[dn.kernel_input_feature], rhs.dims[dn.kernel_output_feature]
    if k_out % bgc:
        fail(f"convolution output features {k_out} are not a multiple of "
             f"batch_group_count {bgc}")
    if in_feat % fgc or in_feat // fgc != k_in:
        fail(f"convolution input features {in_feat} / feature_group_count {fgc} must equal "
             f"the kernel input features {k_in}")
    if k_out % fgc:
        fail(f"convolution output features {k_out} are not a multiple of "
             f"feature_group_count {fgc}")
    if in_batch % bgc:
        fail(f"convolution batch {in_batch} is not a multiple of batch_group_count {bgc}")
    kernel_spatial = [rhs.dims[d] for d in dn.kernel_spatial]
    if kernel_spatial != [d.size for d in wdims]:
        fail(f"convolution window sizes {[d.size for d in wdims]} do not match the kernel's "
             f"spatial dimensions {kernel_spatial}")
    spatial = window_output_dims([lhs.dims[d] for d in dn.input_spatial], window,
                                 "convolution")
    dims = [0] * rank
    dyn = [False] * rank
    dims[dn.output_batch] = in_batch // bgc
    dyn[dn.output_batch] = lhs.dynamic[dn.input_batch]
    dims[dn.output_feature] = k_out
    for i, d in enumerate(dn.output_spatial):
        dims[d] = spatial[i]
        dyn[d] = lhs.dynamic[dn.input_spatial[i]] or rhs.dynamic[dn.kernel_spatial[i]]
    return Shape(_result_type(inst, lhs, rhs), dims, dyn)


def fft(inst) -> Shape:
    need_operands(inst, 1)
    s = expect_array(inst.operands[0].shape, "operand of fft")
    kind = attr(inst, "fft_type", required=True)
    length = attr(inst, "fft_length", required=True)
    n = len(length)
    if not 1 <= n <= 3:
        fail(f"fft supports 1 to 3 transformed dimensions, got {n}")
    if s.rank < n:
        fail(f"fft of rank {n} needs an operand of rank >= {n}, got {text(s)}")
    inner = s.dims[s.rank - n:]
    t = s.element_type
    if kind in ("FFT", "IFFT"):
        if not is_complex(t):
            fail(f"{kind} needs a complex operand, got {t}")
        return s
    if kind == "RFFT":
        if t not in ("f32", "f64"):
            fail(f"RFFT needs an f32 or f64 operand, got {t}")
        if tuple(inner) != tuple(length):
            fail(f"RFFT innermost dimensions {list(inner)} must equal fft_length "
                 f"{list(length)}")
        dims = list(s.dims)
        if length[-1]:
            dims[-1] = length[-1] // 2 + 1
        return Shape("c64" if t == "f32" else "c128", dims, s.dynamic)
    if kind == "IRFFT":
        if not is_complex(t):
            fail(f"IRFFT needs a complex operand, got {t}")
        if tuple(inner[:-1]) != tuple(length[:-1]):
            fail(f"IRFFT leading transformed dimensions {list(inner[:-1])} must equal "
                 f"fft_length {list(length[:-1])}")
        if (inner[-1] or length[-1]) and inner[-1] != length[-1] // 2 + 1:
            fail(f"IRFFT innermost dimension {inner[-1]} must be fft_length/2+1 = "
                 f"{length[-1] // 2 + 1}")
        dims = list(s.dims)
        dims[-1] = length[-1]
        return Shape(complex_component(t), dims, s.dynamic)
    fail(f"unknown fft_type {kind}")


def _square_minor(s: Shape, op: str) -> None:
    if not (is_float(s.element_type) or is_complex(s.element_type)):
        fail(f"{op} needs floating-point or complex operands, got {s.element_type}")
    if s.rank < 2:
        fail(f"{op} needs an operand of rank >= 2, got {text(s)}")
    if s.dims[-1] != s.dims[-2]:
        fail(f"{op} needs square minor dimensions, got {text(s)}")


def cholesky(inst) -> Shape:
    need_operands(inst, 1)
    a = expect_array(inst.operands[0].shape, "operand of cholesky")
    _square_minor(a, "cholesky")
    return a


def triangular_solve(inst) -> Shape:
    need_operands(inst, 2)
    a = expect_array(inst.operands[0].shape, "a of triangular-solve")
    b = expect_array(inst.operands[1].shape, "b of triangular-solve")
    _square_minor(a, "triangular-solve")
    if a.element_type != b.element_type:
        fail(f"triangular-solve operands differ in type: {a.element_type} and "
             f"{b.element_type}")
    if b.rank != a.rank:
        fail(f"triangular-solve operands differ in rank: {text(a)} and {text(b)}")
    left = attr(inst, "left_side", "false") == "true"
    if a.dims[-1] != b.dims[-2 if left else -1]:
        fail(f"triangular-solve shared dimension differs: {text(a)} and {text(b)}")
    if a.dims[:-2] != b.dims[:-2]:
        fail(f"triangular-solve batch dimensions differ: {text(a)} and {text(b)}")
    transpose = attr(inst, "transpose_a", "NO_TRANSPOSE")
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        fail(f"triangular-solve has an invalid transpose_a={transpose}")
    return b


def _batch_norm(inst, count: int, names) -> tuple[Shape, Shape]:
    need_operands(inst, count)
    shapes = [o.shape for o in inst.operands]
    op = inst.opcode
    for s, name in zip(shapes, names):
        expect_array(s, f"{name} of {op}")
    x = shapes[0]
    fi = int_attr(inst, "feature_index")
    if not 0 <= fi < x.rank:
        fail(f"{op} feature_index {fi} is out of range for rank {x.rank}")
    if not is_float(x.element_type):
        fail(f"{op} needs a floating-point operand, got {x.element_type}")
    feature = Shape(x.element_type, (x.dims[fi],))
    for s, name in zip(shapes[1:], names[1:]):
        if name == "grad_output":
            if s.dims != x.dims or not same_type_ignoring_fp(s, x):
                fail(f"{op} grad_output {text(s)} must match the operand {text(x)}")
            continue
        if s.rank != 1:
            fail(f"{op} {name} must have rank 1, got {text(s)}")
        if not same_type_ignoring_fp(s, x):
            fail(f"{op} {name} type {s.element_type} differs from the operand's "
                 f"{x.element_type}")
        if s.dims[0] != x.dims[fi]:
            fail(f"{op} {name} size {s.dims[0]} differs from the feature count {x.dims[fi]}")
    return x, feature


def batch_norm_training(inst) -> Shape:
    x, f = _batch_norm(inst, 3, ("operand", "scale", "offset"))
    return Shape.tuple([x, f, f])


def batch_norm_inference(inst) -> Shape:
    x, _ = _batch_norm(inst, 5, ("operand", "scale", "offset", "mean", "variance"))
    return x


def batch_norm_grad(inst) -> Shape:
    x, f = _batch_norm(inst, 5, ("operand", "scale", "mean", "variance", "grad_output"))
    return Shape.tuple([x, f, f])

