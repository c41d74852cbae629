"""``layout-assignment``: XLA's GpuLayoutAssignment (the backend constraints and the
propagation that keeps copies few).

* Every shape keeps its layout (row-major unless written otherwise); the entry
  computation's parameter and result layouts are fixed.
* cuDNN convolutions get the layouts cuDNN wants (HeuristicLayoutAssignment): on Hopper or
  newer (the module's ``config.device``) NHWC data and OHWI filters for every floating-point
  convolution but f64 (NCHW); before Hopper NCHW / OIHW, except f16/bf16 2-D convolutions on
  Volta or newer, which get NHWC / OHWI.  An operand in another layout is copied (``copy``
  with the wanted layout); the result gets the wanted layout and is copied back for users
  that expect the old one.
* cuBLAS calls need matrix layouts with the batch dimensions most major; others are
  copied to row-major.
* A dot's operand without batch dimensions (one contracting, at most one free dimension)
  is left open, as XLA's AddDotBackendConstraints leaves it: the single-user transposes,
  reshapes and concatenates it is built from take the layouts their producers give them
  (each transpose and reshape the one that makes it a bitcast), so the layout-sensitive
  algebraic simplifier turns them into bitcasts and cuBLAS reads the operand column-major.
* Propagation: a layout-changing ``copy`` feeding a shape-preserving elementwise op whose
  other operands are copies from the same layout or broadcasts is moved below the op (the
  op now runs in the producer's layout), and ``copy(copy(x))`` back to ``x``'s layout and
  copies that change nothing are removed.  So an elementwise chain between two
  convolutions stays in cuDNN's layout and needs no transposes, as XLA's propagation
  achieves.  Values and bitcasts keep their meaning: only layouts of values whose users
  read them through a copy change.
"""
from __future__ import annotations

from hlo_opt.analysis.layout import (major_to_minor, reshape_bitcast_layout,
                                      transpose_bitcast_layout)
from hlo_opt.ir.dimension_numbers import ConvolutionDimensionNumbers, DotDimensionNumbers
from hlo_opt.ir.shape import Layout, Shape

from ._conv_util import (CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT, is_cudnn_conv)
from hlo_opt.analysis.gpu.fusible import is_elementwise
from hlo_opt.rewrite.graph import fusible_computations, remove_dead_operands
from .gemm_rewriter import is_gemm


def _layout(major_to_minor_dims) -> Layout:
    return Layout(tuple(reversed(list(major_to_minor_dims))))


def conv_layouts(call, device) -> tuple[Layout, Layout, Layout] | None:
    """(input, filter, output) layouts cuDNN wants, for the forward convolution the call's
    dim_labels describe; None for integer convolutions (left alone)."""
    dn = ConvolutionDimensionNumbers.of(call)
    target = call.custom_call_target
    x_type = call.operands[0].shape.element_type
    if x_type.startswith(("s", "u")):
        return None
    if device.compute_capability >= (9, 0):  # tensor cores: NHWC (cuDNN has no f64 NHWC)
        nhwc = x_type != "f64"
    else:
        nhwc = x_type in ("f16", "bf16") and device.compute_capability >= (7, 0) and \
            len(dn.input_spatial) == 2
    if nhwc:
        data_in = [dn.input_batch] + list(dn.input_spatial) + [dn.input_feature]
        data_out = [dn.output_batch] + list(dn.output_spatial) + [dn.output_feature]
        filt = [dn.kernel_output_feature] + list(dn.kernel_spatial) + [dn.kernel_input_feature]
    else:
        data_in = [dn.input_batch, dn.input_feature] + list(dn.input_spatial)
        data_out = [dn.output_batch, dn.output_feature] + list(dn.output_spatial)
        filt = [dn.kernel_output_feature, dn.kernel_input_feature] + list(dn.kernel_spatial)
    del target
    return _layout(data_in), _layout(filt), _layout(data_out)


def _copy_to(comp, x, layout: Layout):
    return comp.add("copy", x.shape.with_layout(layout), [x], name="copy")


def _valid_matrix_layout(shape: Shape, batch_dims) -> bool:
    order = list(major_to_minor(shape))
    nb = len(batch_dims)
    return sorted(order[:nb]) == sorted(batch_dims)


class _Assigner:
    def __init__(self, comp, device):
        self.comp = comp
        self.device = device
        self.changed = False

    def constrain_operand(self, inst, index: int, layout: Layout) -> None:
        x = inst.operands[index]
        if x.shape.effective_layout() == layout:
            return
        c = _copy_to(self.comp, x, layout)
        inst.replace_operand(index, c)
        self.changed = True

    def constrain_result(self, call, layout: Layout) -> None:
        """Give element 0 of the call's tuple result ``layout``; users keep theirs."""
        shapes = list(call.shape.tuple_shapes)
        old = shapes[0]
        if old.effective_layout() == layout:
            return
        shapes[0] = old.with_layout(layout)
        call.shape = Shape.tuple(shapes)
        for user in call.users:
            if user.opcode != "get-tuple-element" or user.attr("index") != 0:
                continue
            users = user.users
            was_root = user.is_root
            user.shape = shapes[0]
            back = self.comp.add("copy", old, [user], name="copy")
            for u in users:
                u.replace_operand_with(user, back)
            if was_root:
                self.comp.root = back
        self.changed = True

    def conv(self, call) -> None:
        layouts = conv_layouts(call, self.device)
        if layouts is None:
            return
        x_l, w_l, y_l = layouts
        target = call.custom_call_target
        if target == CONV_BACKWARD_INPUT:   # (output grad, filter) -> input grad
            slots, result = [y_l, w_l], x_l
        elif target == CONV_BACKWARD_FILTER:  # (input, output grad) -> filter grad
            slots, result = [x_l, y_l], w_l
        else:
            slots, result = [x_l, w_l], y_l
        for i, lay in enumerate(slots):
            self.constrain_operand(call, i, lay)
        if len(call.operands) > 3:  # side input: the output's layout
            self.constrain_operand(call, 3, result)
        self.constrain_result(call, result)

    def dot(self, dot) -> None:
        """XLA's AddDotBackendConstraints for a side with no batch dimensions, one
        contracting and at most one free dimension: no constraint, the operand's chain
        takes its producer's layout (the gemm rewriter and cuBLAS take either matrix
        order)."""
        dn = DotDimensionNumbers.of(dot)
        for i, batch, contracting in ((0, dn.lhs_batch_dims, dn.lhs_contracting_dims),
                                      (1, dn.rhs_batch_dims, dn.rhs_contracting_dims)):
            x = dot.operands[i]
            if not batch and len(contracting) == 1 and x.shape.rank <= 2 and \
                    dot.operands.count(x) == 1:
                self.changed |= forward_bitcast_layouts(x)

    def gemm(self, call) -> None:
        from .gemm_rewriter import gemm_config
        dnums = gemm_config(call).get("dot_dimension_numbers", {})
        lb = [int(d) for d in dnums.get("lhs_batch_dimensions", [])]
        rb = [int(d) for d in dnums.get("rhs_batch_dimensions", [])]
        for i, batch in ((0, lb), (1, rb)):
            x = call.operands[i]
            if not batch and x.shape.rank <= 2 and call.operands.count(x) == 1:
                self.changed |= forward_bitcast_layouts(x)
            if not _valid_matrix_layout(x.shape, batch):
                self.constrain_operand(call, i, Layout.default(x.shape.rank))
        out = call.shape.tuple_shapes[0] if call.shape.is_tuple() else call.shape
        if not _valid_matrix_layout(out, list(range(len(lb)))) and call.shape.is_tuple():
            self.constrain_result(call, Layout.default(out.rank))


_OPEN = ("transpose", "reshape", "concatenate")


def _open_layouts(x) -> list[tuple[Layout, dict]]:
    """The layouts ``x`` can take when its layout is left open, most propagated first,
    each with the layouts that gives the open instructions of its operand tree
    (``{inst: layout}``); the last keeps ``x`` and its tree as they are.  Open: single-user
    transposes and reshapes (each takes the layout that makes it a bitcast of its operand)
    and concatenates (a layout all their operands can take)."""
    fixed = (x.shape.effective_layout(), {})
    if x.opcode not in _OPEN or x.user_count != 1 or not x.shape.is_array() or \
            x.shape.is_dynamic():
        return [fixed]
    subs = [_open_layouts(o) for o in x.operands]
    out: list[tuple[Layout, dict]] = []
    if x.opcode == "concatenate":
        for layout, _ in subs[0]:
            picks = [next((p for lay, p in opts if lay == layout), None) for opts in subs]
            if all(p is not None for p in picks):
                props = {k: v for p in picks for k, v in p.items()}
                out.append((layout, {**props, x: layout}))
    else:
        for src_layout, props in subs[0]:
            src = x.operands[0].shape.with_layout(src_layout)
            if x.opcode == "transpose":
                layout = transpose_bitcast_layout(src, x.dimensions)
            else:
                layout = reshape_bitcast_layout(src, x.shape)
            if layout is not None:
                out.append((layout, {**props, x: layout}))
    out.append(fixed)
    seen, unique = set(), []
    for layout, props in out:
        if layout not in seen:
            seen.add(layout)
            unique.append((layout, props))
    return unique


def forward_bitcast_layouts(x) -> bool:
    """XLA leaves the layout of a matrix operand without batch dimensions (one
    contracting, at most one free dimension) open: the layouts of the values it is built
    from propagate through the transposes, reshapes and concatenates on the way
    (single-user ones), each transpose and reshape taking the layout that makes it a
    bitcast, and cuBLAS reads the operand row- or column-major.  Gives the operand tree of
    ``x`` those layouts; True when a layout changed."""
    _, props = _open_layouts(x)[0]
    changed = False
    for op, layout in props.items():
        if op.shape.effective_layout() != layout:
            op.shape = op.shape.with_layout(layout)
            changed = True
    return changed


def _is_layout_free(inst) -> bool:
    return inst.opcode in ("broadcast", "constant", "iota") and inst.user_count == 1


def sink_copies(comp) -> bool:
    """Move layout-changing copies below elementwise ops and cancel inverse pairs."""
    changed = False
    work = [i for i in comp.instructions if i.opcode == "copy"]
    while work:
        c = work.pop()
        if c.parent is not comp or c.opcode != "copy":
            continue
        src = c.operands[0]
        # a copy that changes nothing, or the inverse of the copy feeding it
        target = None
        if c.shape.effective_layout_or_none() == src.shape.effective_layout_or_none():
            target = src
        elif src.opcode == "copy" and src.operands[0].shape.effective_layout_or_none() == \
                c.shape.effective_layout_or_none():
            target = src.operands[0]
        if target is not None and not (c.is_root and target.shape != c.shape):
            was_root = c.is_root
            c.replace_all_uses_with(target)
            if was_root:
                comp.root = target
            remove_dead_operands(comp, [c])
            changed = True
            work.extend(u for u in target.users if u.opcode == "copy")
            continue
        src_layout = src.shape.effective_layout()
        for e in list(c.users):
            if not _can_sink_through(e, c, src_layout):
                continue
            _sink(comp, e, src_layout, work)
            changed = True
            if c.parent is comp:
                work.append(c)
            break
    return changed


def _can_sink_through(e, c, layout: Layout) -> bool:
    if e.parent is not c.parent or not is_elementwise(e) or e.opcode in ("copy", "fusion"):
        return False
    if not e.shape.is_array() or e.shape.dims != c.shape.dims or \
            e.shape.effective_layout() != c.shape.effective_layout():
        return False
    for o in e.operands:
        if o.opcode == "copy" and o.operands[0].shape.effective_layout() == layout and \
                o.shape.dims == e.shape.dims:
            continue
        if _is_layout_free(o) and o.shape.dims == e.shape.dims:
            continue
        if o.shape.rank == 0:
            continue
        return False
    return True


def _sink(comp, e, layout: Layout, work: list) -> None:
    old_shape = e.shape
    users = e.users
    was_root = e.is_root
    for i, o in enumerate(list(e.operands)):
        if o.opcode == "copy" and o.shape.dims == e.shape.dims:
            e.replace_operand(i, o.operands[0])
            if o.user_count == 0:
                remove_dead_operands(comp, [o])
        elif _is_layout_free(o) and o.shape.rank:
            o.shape = o.shape.with_layout(layout)
    e.shape = old_shape.with_layout(layout)
    back = comp.add("copy", old_shape, [e], name="copy")
    for u in users:
        u.replace_operand_with(e, back)
    if was_root:
        comp.root = back
    work.append(back)
    work.extend(u for u in back.users if u.opcode == "copy")


class GpuLayoutAssignment:
    name = "layout-assignment"

    def run(self, module) -> bool:
        device = module.config.device
        changed = False
        for comp in fusible_computations(module):
            a = _Assigner(comp, device)
            for inst in comp.post_order():
                if inst.parent is not comp:
                    continue
                if is_cudnn_conv(inst):
                    a.conv(inst)
                elif inst.opcode == "dot":
                    a.dot(inst)
                elif is_gemm(inst):
                    a.gemm(inst)
            if a.changed:
                sink_copies(comp)
            changed |= a.changed
        return changed
