"""convolution-group-converter (ConvolutionGroupConverter): grouped convolutions become
ungrouped ones (extra spatial dims, or masked expanded filters) that compute the same."""
from __future__ import annotations

import random

import pytest

from passes.convolution_group_converter import ConvolutionGroupConverter
from tests.support.expander_real_modules import MODULES, check_module
from tests.support.harness import check_pass, load_text
from tests.support.lit_chunks import chunks

# Convolutions add up products in another order once groups become extra spatial dims or
# zero-masked filter entries: float results agree to rounding.
RTOL, ATOL = 1e-5, 1e-5


def conv_module(x: str, w: str, out: str, attrs: str, et: str = "f32") -> str:
    return f"""
HloModule m
ENTRY %e (x: {et}[{x}], w: {et}[{w}]) -> {et}[{out}] {{
  %x = {et}[{x}] parameter(0)
  %w = {et}[{w}] parameter(1)
  ROOT %c = {et}[{out}] convolution(%x, %w), {attrs}
}}"""


def convert(text: str, p=None, **kw):
    r = check_pass(load_text(text), p or "convolution-group-converter", rtol=RTOL, atol=ATOL,
                   **kw)
    return r


def convs(m):
    return [i for i in m.instructions() if i.opcode == "convolution"]


def group_counts(m):
    return [(c.attr("feature_group_count", 1) or 1, c.attr("batch_group_count", 1) or 1)
            for c in convs(m)]


def test_dim_numbers_print_back():
    from hlo_opt.ir.attributes import ConvolutionDimensionNumbers
    for text in ("b01f_01io->b01f", "bf01_oi01->bf01", "f0b1_1o0i->0bf1", "b0f_0io->fb0"):
        parsed = ConvolutionDimensionNumbers.parse(text)
        assert parsed.to_text() == parsed.with_().to_text() == text


def test_feature_groups_become_a_spatial_dim():
    r = convert(conv_module("2,5,5,6", "3,3,3,4", "2,3,3,4",
                            "window={size=3x3}, dim_labels=b01f_01io->b01f, "
                            "feature_group_count=2"))
    assert r.changed and r.compared_runs == 3
    (c,) = convs(r.module)
    assert group_counts(r.module) == [(1, 1)]
    assert c.attrs["dim_labels"] == "b012f_01i2o->b012f"
    assert c.attr("window").to_text() == "{size=3x3x2 lhs_dilate=1x1x2}"
    assert r.module.entry.root.opcode == "reshape"


def test_feature_groups_with_padding_stride_dilation_and_other_layouts():
    r = convert(conv_module("2,6,7,9", "6,2,3,2", "2,6,4,4",
                            "window={size=3x2 stride=2x2 pad=1_1x0_1 rhs_dilate=1x2}, "
                            "dim_labels=bf01_oi01->bf01, feature_group_count=3"))
    assert r.changed and r.compared_runs == 3 and group_counts(r.module) == [(1, 1)]


def test_depthwise_filter_is_expanded_and_masked():
    r = convert(conv_module("2,5,5,3", "3,3,1,6", "2,4,4,6",
                            "window={size=3x3 pad=1_0x0_1}, dim_labels=b01f_01io->b01f, "
                            "feature_group_count=3"))
    assert r.changed and r.compared_runs == 3 and group_counts(r.module) == [(1, 1)]
    (c,) = convs(r.module)
    assert c.operands[1].opcode == "select"
    assert c.operands[1].shape.dims == (3, 3, 3, 6)


def test_depthwise_without_filter_expansion_is_kept():
    """A depthwise convolution (one input feature per group, output features = groups)
    is left for the backend when filter expansion is off."""
    text = conv_module("1,6,6,4", "3,3,1,4", "1,4,4,4",
                       "window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=4")
    p = ConvolutionGroupConverter(convert_batch_groups_only=False, filter_expansion=False)
    assert not convert(text, p).changed


def test_depthwise_multiplier_becomes_a_spatial_dim_when_the_cost_model_allows():
    """filter_expansion off, cost model says viable, multiplier 2: the groups stay and
    the multiplier becomes a reversed, padded spatial window."""
    text = conv_module("2,5,5,3", "3,3,1,6", "2,3,3,6",
                       "window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=3")
    p = ConvolutionGroupConverter(is_cost_viable=lambda c: True,
                                  convert_batch_groups_only=False, filter_expansion=False)
    r = convert(text, p)
    assert r.changed and r.compared_runs == 3
    (c,) = convs(r.module)
    assert group_counts(r.module) == [(3, 1)]
    assert c.attr("window").to_text() == "{size=3x3x2 pad=0_0x0_0x1_1 rhs_reversal=0x0x1}"


BATCH_GENERAL = conv_module("4,6,6,3", "3,3,3,8", "2,4,4,8",
                            "window={size=3x3}, dim_labels=b01f_01io->b01f, "
                            "batch_group_count=2")


def test_batch_groups_become_a_spatial_dim():
    r = convert(BATCH_GENERAL)
    assert r.changed and r.compared_runs == 3
    assert group_counts(r.module) == [(1, 1)]
    (c,) = convs(r.module)
    assert c.attrs["dim_labels"] == "2b01f_01i2o->b012f"


@pytest.mark.parametrize("et", ["f32", "f16"])
def test_batch_groups_of_the_filter_gradient_form_reduce_a_masked_output(et):
    """Input batch = output features = batch groups (a depthwise filter gradient): an
    ungrouped convolution with a wider output, masked, summed back with reduce-window
    (in f32 for f16)."""
    text = conv_module("3,5,5,2", "3,3,2,3", "1,3,3,3",
                       "window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=3",
                       et)
    r = check_pass(load_text(text), "convolution-group-converter",
                   rtol=2e-2 if et == "f16" else RTOL, atol=2e-2 if et == "f16" else ATOL)
    assert r.changed and r.compared_runs == 3
    ops = [i.opcode for i in r.module.entry.instructions]
    assert "reduce-window" in ops and "select" in ops
    (c,) = convs(r.module)
    assert c.shape.dims == (3, 3, 3, 3) and group_counts(r.module) == [(1, 1)]
    rw = next(i for i in r.module.entry.instructions if i.opcode == "reduce-window")
    assert rw.shape.element_type == "f32"
    assert r.module.entry.root.opcode == "convert"


def _random_grouped_conv(seed: int) -> str:
    """A grouped 2-D convolution with random dim orders, group kinds and sizes."""
    rng = random.Random(seed)

    def order(chars):
        p = list(chars)
        rng.shuffle(p)
        return "".join(p)

    il, kl, ol = order("bf01"), order("io01"), order("bf01")
    g = rng.choice([2, 3])
    mult = rng.choice([1, 2])
    if rng.random() < 0.5:
        size = rng.choice([1, 2])
        n, c = rng.choice([1, 2]), g * size
        isz = {"b": n, "f": c, "0": 5, "1": 4}
        ksz = {"i": size, "o": g * mult, "0": 2, "1": 3}
        osz = {"b": n, "f": g * mult, "0": 4, "1": 2}
        groups = f"feature_group_count={g}"
    else:
        n, c = g * rng.choice([1, 2]), rng.choice([1, 2])
        isz = {"b": n, "f": c, "0": 5, "1": 4}
        ksz = {"i": c, "o": g * mult, "0": 2, "1": 3}
        osz = {"b": n // g, "f": g * mult, "0": 4, "1": 2}
        groups = f"batch_group_count={g}"

    def dims(labels, sizes):
        return ",".join(str(sizes[ch]) for ch in labels)
    return conv_module(dims(il, isz), dims(kl, ksz), dims(ol, osz),
                       f"window={{size=2x3}}, dim_labels={il}_{kl}->{ol}, {groups}")


@pytest.mark.parametrize("seed", range(24))
def test_random_dim_orders_and_groups(seed):
    """Every dim order and group kind, through the default converter and through the
    cost-model/no-filter-expansion configuration."""
    text = _random_grouped_conv(seed)
    r = convert(text)
    assert r.changed and r.compared_runs == 3 and group_counts(r.module) == [(1, 1)]
    p = ConvolutionGroupConverter(is_cost_viable=lambda c: True, filter_expansion=False)
    r = convert(text, p)
    assert not r.changed or r.compared_runs == 3


def test_modes_and_should_expand():
    feature = conv_module("2,5,5,6", "3,3,3,4", "2,3,3,4",
                          "window={size=3x3}, dim_labels=b01f_01io->b01f, "
                          "feature_group_count=2")
    batch_only = ConvolutionGroupConverter(convert_batch_groups_only=True)
    assert not convert(feature, batch_only).changed
    features_only = ConvolutionGroupConverter(convert_batch_groups_only=False)
    assert not convert(BATCH_GENERAL, features_only).changed
    assert convert(BATCH_GENERAL, ConvolutionGroupConverter(convert_batch_groups_only=True)
                   ).changed
    never = ConvolutionGroupConverter(should_expand=lambda c: False)
    assert not convert(feature, never).changed and not convert(BATCH_GENERAL, never).changed


def test_ungrouped_convolutions_are_left_alone():
    text = conv_module("2,5,5,3", "3,3,3,4", "2,3,3,4",
                       "window={size=3x3}, dim_labels=b01f_01io->b01f")
    assert not convert(text).changed


# ---- the FileCheck inputs, differentially ---------------------------------------------------
LIT = chunks("convolution_group_converter.hlo")


@pytest.mark.parametrize("chunk", LIT, ids=[c.id for c in LIT])
def test_lit_inputs_keep_values(chunk):
    r = convert(chunk.text)
    assert r.changed and r.compared_runs == 3


def test_lit_file_present():
    assert LIT


# ---- every sample and corpus module -------------------------------------------------------
def _grouped(text: str) -> bool:
    return "feature_group_count=" in text or "batch_group_count=" in text


@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module(mid, text, fixture):
    out = check_module(text, ConvolutionGroupConverter, fixture)
    assert out.changed == _grouped(text)


def test_real_modules_exercise_the_pass():
    assert any(_grouped(t) for _, t, _ in MODULES)  # mobilenet_cluster's depthwise convs
