"""ConvolutionGroupConverter (``convolution-group-converter``), as
``xla/service/convolution_group_converter.cc``.

Rewrites grouped convolutions into ungrouped ones:

* ``batch_group_count`` B > 1 (``convert_batch_groups_only=True``): when the output
  features or the input batch differ from B, B becomes an extra spatial dimension of the
  input (before its batch dim) and of the kernel (before its output-feature dim), swept by
  a window of size B, stride B-1 over a base dilation of B, and the result is reshaped
  back; otherwise (the depthwise filter-gradient form), when the cost model declines or
  ``filter_expansion`` is on, the convolution runs ungrouped into an output B times wider
  in its batch dim, a diagonal mask zeroes the cross-group terms and a ``reduce-window``
  (in f32 for narrower types) sums each group back.
* ``feature_group_count`` G > 1 (``convert_batch_groups_only=False``): with one input
  feature per group, the kernel is broadcast G times along its input-feature dim and
  masked (``filter_expansion`` or cost model declines), or, otherwise, a depthwise
  convolution keeps G and gains a spatial dim for the depthwise multiplier (a depthwise
  convolution is left alone when ``filter_expansion`` is off); with more than one feature
  per group, G becomes an extra spatial dimension as for batch groups.

``should_expand(conv)`` and ``is_cost_viable(conv)`` are XLA's two callbacks (defaults:
expand everything; no cost model, i.e. never viable, as XLA:CPU/GPU pass).  The registered
pass (``convert_batch_groups_only=None``) runs both of XLA's configurations back to back,
batch groups first, as ``cpu_compiler.cc`` adds them.  Fusion computations are not visited.
"""
from __future__ import annotations

import copy

import numpy as np

from hlo_opt.ir.attributes import ConvolutionDimensionNumbers, Window, WindowDim
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import BIT_WIDTH

from hlo_opt.rewrite.builder import Builder
from ._expander_util import (derived_attrs, non_fusion_computations, replace_instruction,
                             scalar_binary_computation)

_CONV_OWN_ATTRS = ("window", "dim_labels", "feature_group_count", "batch_group_count")


def _bump(dims: list, above: int) -> list:
    return [d + 1 if d > above else d for d in dims]


def _split_off_groups(b, x, dim: int, groups: int):
    """``x`` with dimension ``dim`` split into [groups, size / groups]."""
    sizes = list(x.shape.dims)
    sizes[dim] //= groups
    sizes.insert(dim, groups)
    return b.reshape(x, sizes)


def _with_group_dim(spatial: list, split: int, other: int):
    """(spatial dims, split dim, other dim) of one side once a group dim is inserted at
    ``split`` (the split dim moves up one): the group dim is the last spatial dim."""
    return _bump(spatial, split) + [split], split + 1, (other + 1 if other > split else other)


def _mask_ids(group_size: int, group_count: int) -> list[int]:
    """GetMaskIds: group_count groups of group_size copies of the group's id."""
    return [i for i in range(group_count) for _ in range(group_size)]


class _Converter:
    def __init__(self, comp, should_expand, is_cost_viable, batch_groups_only: bool,
                 filter_expansion: bool):
        self.comp = comp
        self.b = Builder(comp)
        self.should_expand = should_expand
        self.is_cost_viable = is_cost_viable
        self.batch_groups_only = batch_groups_only
        self.filter_expansion = filter_expansion

    # ---- building blocks ----------------------------------------------------------------
    def conv(self, old, lhs, rhs, fgc: int, bgc: int, window: Window,
             dn: ConvolutionDimensionNumbers, shape: Shape | None = None,
             derived: bool = False) -> Instruction:
        """CreateConvolve (``shape`` given) or MakeConvolveHlo (shape inferred, element
        type of ``old``)."""
        attrs = {"window": window.to_text(), "dim_labels": dn.to_text()}
        if fgc != 1:
            attrs["feature_group_count"] = str(fgc)
        if bgc != 1:
            attrs["batch_group_count"] = str(bgc)
        for k, v in old.attrs.items():
            if k in ("operand_precision", "algorithm"):
                attrs[k] = v
        if derived:
            attrs.update(derived_attrs(old))
        inst = Instruction("convolution", shape or Shape.array(old.shape.element_type, ()),
                           [lhs, rhs], attrs, "convolution")
        if shape is None:
            from hlo_opt.shape_inference import infer_shape
            inst.shape = infer_shape(inst).without_layout()
        self.comp.add_instruction(inst)
        return inst

    def expanded_filter_mask(self, filter_shape: Shape, kif: int, kof: int, groups: int):
        """GetExpandedFilterMask: pred mask, true where input group == output group."""
        b = self.b
        dims = list(filter_shape.dims)
        group_size = dims[kif]
        out_features = dims[kof]
        dims[kif] *= groups
        m1 = b.constant_array(np.array(_mask_ids(group_size, groups), np.int32), "s32")
        b1 = b.broadcast(m1, dims, [kif])
        m2 = b.constant_array(np.array(_mask_ids(out_features // groups, groups), np.int32),
                              "s32")
        b2 = b.broadcast(m2, dims, [kof])
        return b.compare(b1, b2, "EQ")

    def masked(self, make_value, shape: Shape, grown: int, other: int, groups: int):
        """``make_value()`` (``shape`` with dim ``grown`` made ``groups`` times larger) with
        zeros where the group along ``grown`` is not the group along ``other`` (the mask is
        built first, as in XLA)."""
        mask = self.expanded_filter_mask(shape, grown, other, groups)
        value = make_value()
        zeros = self.b.broadcast(self.b.scalar(0, value.shape.element_type),
                                 value.shape.dims, [])
        return self.b.select(mask, value, zeros)

    def groups_as_spatial_dim(self, conv, dn: ConvolutionDimensionNumbers, groups: int,
                              split_feature: bool, fgc: int) -> bool:
        """The G groups become an extra (last) spatial dimension: split off the input
        batch (batch groups) or input features (feature groups), the kernel's output
        features and the output features, swept by a window of size G, stride G-1 over a
        base dilation of G (input slice g meets kernel slice g only); the result is
        reshaped back.  The new convolution keeps ``fgc`` feature groups."""
        b = self.b
        activation, filt = conv.operands
        if split_feature:
            activation = _split_off_groups(b, activation, dn.input_feature, groups)
            isp, if_, ib = _with_group_dim(dn.input_spatial, dn.input_feature, dn.input_batch)
        else:
            activation = _split_off_groups(b, activation, dn.input_batch, groups)
            isp, ib, if_ = _with_group_dim(dn.input_spatial, dn.input_batch, dn.input_feature)
        filt = _split_off_groups(b, filt, dn.kernel_output_feature, groups)
        ksp, kof, kif = _with_group_dim(dn.kernel_spatial, dn.kernel_output_feature,
                                        dn.kernel_input_feature)
        osp, of, ob = _with_group_dim(dn.output_spatial, dn.output_feature, dn.output_batch)
        dn = dn.with_(input_batch=ib, input_feature=if_, input_spatial=isp,
                      kernel_input_feature=kif, kernel_output_feature=kof, kernel_spatial=ksp,
                      output_batch=ob, output_feature=of, output_spatial=osp)
        window = copy.deepcopy(conv.attr("window") or Window([]))
        window.dims.append(WindowDim(size=groups, stride=groups - 1, base_dilation=groups))
        new = self.conv(conv, activation, filt, fgc, 1, window, dn, derived=True)
        replace_instruction(self.comp, conv, b.reshape(new, conv.shape.dims))
        return True

    # ---- batch groups --------------------------------------------------------------------
    def batch_groups(self, conv) -> bool:
        bgc = conv.attr("batch_group_count", 1) or 1
        if bgc == 1 or not self.should_expand(conv):
            return False
        b = self.b
        dn = ConvolutionDimensionNumbers.of(conv)
        activation, filt = conv.operands
        ob, of = dn.output_batch, dn.output_feature
        input_batch = activation.shape.dims[dn.input_batch]
        output_feature = filt.shape.dims[dn.kernel_output_feature]
        if output_feature != bgc or input_batch != bgc:
            fgc = conv.attr("feature_group_count", 1) or 1
            return self.groups_as_spatial_dim(conv, dn, bgc, split_feature=False, fgc=fgc)
        if self.is_cost_viable(conv) and not self.filter_expansion:
            return False
        expanded = list(conv.shape.dims)
        expanded[ob] *= bgc
        et = conv.shape.element_type
        new_filter = self.masked(
            lambda: self.conv(conv, activation, filt, 1, 1, conv.attr("window") or Window([]),
                              dn, shape=Shape.array(et, expanded)),
            conv.shape, ob, of, bgc)
        reduce_type = et
        if BIT_WIDTH[et] < 32:
            reduce_type = "f32"
            new_filter = b.convert(new_filter, "f32")
        rw_dims = list(expanded)
        rw_dims[ob] = 1
        window = Window([WindowDim(size=bgc, stride=bgc) if i == ob else WindowDim()
                         for i in range(len(expanded))])
        add = scalar_binary_computation(self.comp.module, "add", reduce_type,
                                        "add_computation")
        rw = b._add("reduce-window", Shape.array(reduce_type, rw_dims),
                    [new_filter, b.scalar(0, reduce_type)],
                    attrs={"window": window.to_text(), "to_apply": ""}, called=[add],
                    called_attr="to_apply")
        out = b._add("convert", Shape.array(activation.shape.element_type, rw_dims), [rw])
        replace_instruction(self.comp, conv, out)
        return True

    # ---- feature groups ------------------------------------------------------------------
    def feature_groups(self, conv) -> bool:
        groups = conv.attr("feature_group_count", 1) or 1
        if groups == 1 or not self.should_expand(conv):
            return False
        b = self.b
        dn = ConvolutionDimensionNumbers.of(conv)
        activation, filt = conv.operands
        kif, kof = dn.kernel_input_feature, dn.kernel_output_feature
        group_size = filt.shape.dims[kif]
        window = conv.attr("window") or Window([])
        if group_size == 1:
            depthwise = groups == filt.shape.dims[kof]
            if not self.filter_expansion and depthwise:
                return False
            if not self.is_cost_viable(conv) or self.filter_expansion:
                expanded = list(filt.shape.dims)
                expanded[kif] *= groups
                kept = [i for i in range(filt.shape.rank) if i != kif]
                new_filter = self.masked(
                    lambda: b.broadcast(b.reshape(filt, [filt.shape.dims[i] for i in kept]),
                                        expanded, kept),
                    filt.shape, kif, kof, groups)
                new = self.conv(conv, activation, new_filter, 1, 1, window, dn,
                                shape=conv.shape)
                replace_instruction(self.comp, conv, new)
                return True
            return self._depthwise_spatial(conv, dn, activation, filt, groups, window)
        # General grouped convolution: G becomes an extra spatial dimension.
        return self.groups_as_spatial_dim(conv, dn, groups, split_feature=True, fgc=1)

    def _depthwise_spatial(self, conv, dn, activation, filt, groups, window) -> bool:
        """Depthwise with cost model viable and no filter expansion: keep the groups and
        move the depthwise multiplier into an extra spatial dimension."""
        b = self.b
        kif, kof = dn.kernel_input_feature, dn.kernel_output_feature
        multiplier = filt.shape.dims[kof] // groups
        fdims = []
        for i, d in enumerate(filt.shape.dims):
            fdims += [groups, multiplier] if i == kof else [d]
        ksp = _bump(dn.kernel_spatial, kof) + [kof + 1]
        new_filter = b.reshape(filt, fdims)
        isp = list(dn.input_spatial) + [activation.shape.rank]
        new_activation = b.reshape(activation, list(activation.shape.dims) + [1])
        window = copy.deepcopy(window)
        window.dims.append(WindowDim(size=multiplier, padding_low=multiplier - 1,
                                     padding_high=multiplier - 1, window_reversal=True))
        of = dn.output_feature
        odims = []
        for i, d in enumerate(conv.shape.dims):
            odims += [groups, multiplier] if i == of else [d]
        dn = dn.with_(kernel_input_feature=kif + 1 if kif > kof else kif, kernel_spatial=ksp,
                      input_spatial=isp,
                      output_batch=dn.output_batch + 1 if dn.output_batch > of
                      else dn.output_batch,
                      output_spatial=_bump(dn.output_spatial, of) + [of + 1])
        new = self.conv(conv, new_activation, new_filter, groups, 1, window, dn,
                        shape=Shape.array(conv.shape.element_type, odims))
        replace_instruction(self.comp, conv, b._add("reshape", conv.shape, [new]))
        return True

    def run(self) -> bool:
        changed = False
        for inst in self.comp.post_order():
            if inst.opcode != "convolution" or inst.parent is not self.comp:
                continue
            if self.batch_groups_only:
                changed |= self.batch_groups(inst)
            else:
                changed |= self.feature_groups(inst)
        return changed


def _always(_conv) -> bool:
    return True


def _never(_conv) -> bool:
    return False


class ConvolutionGroupConverter:
    name = "convolution-group-converter"

    def __init__(self, should_expand=None, is_cost_viable=None,
                 convert_batch_groups_only: bool | None = None, filter_expansion: bool = True):
        self.should_expand = should_expand or _always
        self.is_cost_viable = is_cost_viable or _never
        self.convert_batch_groups_only = convert_batch_groups_only
        self.filter_expansion = filter_expansion

    def run(self, module) -> bool:
        modes = ([True, False] if self.convert_batch_groups_only is None
                 else [self.convert_batch_groups_only])
        changed = False
        for batch_only in modes:
            for comp in non_fusion_computations(module):
                changed |= _Converter(comp, self.should_expand, self.is_cost_viable,
                                      batch_only, self.filter_expansion).run()
        return changed

