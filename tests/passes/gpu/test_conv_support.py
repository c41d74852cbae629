"""What the cuDNN convolution pass tests share: running passes on modules that already
hold cuDNN calls and comparing the interpreter before and after (the harness's
check_pass skips modules with custom-calls, which it cannot call deterministic), plus
tests of passes/gpu/_conv_util.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hlo_opt.analysis.device import DeviceInfo
from hlo_opt.api import parse_hlo
from hlo_opt.backends import execute
from hlo_opt.flags import DebugOptions
from hlo_opt.pipeline import PipelineRunner
from hlo_opt.ir.dimension_numbers import ConvolutionDimensionNumbers as DimNums
from passes.gpu._conv_util import padding_high_for, supports_optimized_integer_conv
from tests.support.pipelines import pipeline

from tests.support.harness import assert_close, random_args


def device(cc) -> DeviceInfo:
    return DeviceInfo(name=f"sm_{cc[0]}{cc[1]}", compute_capability=tuple(cc))


def run_passes(text_or_module, passes, cc=None, **flags):
    """(original, result) of ``passes`` (names / pass objects) on a module whose GPU has
    compute capability ``cc`` (default: the default device); the result is verified after
    every changing pass and re-parses to the same text."""
    original = parse_hlo(text_or_module) if isinstance(text_or_module, str) \
        else text_or_module
    work = original.clone()
    if cc is not None:
        work.config = work.config.replace(device=device(cc))
    items = passes.split(",") if isinstance(passes, str) else list(passes)
    options = DebugOptions(**flags) if flags else None  # None: the module's own config
    PipelineRunner(options, verify_no_change=True).run(pipeline("test", items), work)
    text = work.to_text()
    assert parse_hlo(text).to_text() == text, "printing the result is not canonical"
    dead = [i.name for c in work.computations for i in c.instructions
            if not i.user_count and i is not c.root and i.opcode != "parameter"]
    assert not dead, f"the passes left dead instructions: {dead}"
    return original, work


def same_values(before, after, seeds=(0, 1), rtol=1e-5, atol=1e-5) -> int:
    """The interpreter gives the same results on both modules for random inputs; returns
    how many input sets were compared."""
    n = 0
    for seed in seeds:
        args = random_args(before, seed)
        assert args is not None
        assert_close(execute(before, args), execute(after, args), rtol, atol,
                     f"{before.name} seed {seed}")
        n += 1
    return n


def calls(module, target=None) -> list:
    return [i for i in module.entry.post_order() if i.opcode == "custom-call" and
            (target is None or i.custom_call_target == target)]


def cudnn_config(call) -> dict:
    return json.loads(call.attrs["backend_config"]).get("cudnn_conv_backend_config", {})


# ---- _conv_util ------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["b01f_01io->b01f", "bf01_oi01->bf01", "fb01_i01o->fb01",
                                  "b0f?1_0i?1o->?b01f", "?b01f_?01io->?b01f"])
def test_dim_labels_print_back(text):
    from hlo_opt.ir.attributes import ConvolutionDimensionNumbers

    class Fake:
        def attr(self, name):
            return ConvolutionDimensionNumbers.parse(text)
    assert DimNums.of(Fake()).to_text() == text


def test_trailing_vector_dim_is_not_printed():
    # XLA prints each side only up to its largest named dimension
    dn = DimNums(0, 3, [1, 2], 2, 4, [0, 1], 0, 3, [1, 2])
    assert dn.to_text() == "b01f_01i?o->b01f"
    assert dn.vectorized_dims(5, 5, 5) == (4, 3, 4)
    assert dn.vectorized_dims(4, 5, 4) == (None, 3, None)


@pytest.mark.parametrize("low,min_high,stride,want", [
    (1, 0, 2, 1),     # low is a valid amount: symmetric
    (0, 1, 2, 1),     # below the range: its minimum
    (3, 0, 2, 1),     # above the range: its maximum
    (0, -2, 1, -2),   # negative: the caller gives up
])
def test_padding_high_for(low, min_high, stride, want):
    assert padding_high_for(low, min_high, stride) == want


INT_CONV = """HloModule m
ENTRY e {{
  input = {it}[10,20,30,40] parameter(0)
  filter = {ft}[{k},{k},40,64] parameter(1)
  ROOT result = ({ot}[10,{o},{o},64], u8[0]) custom-call(input, filter), window={{size={k}x{k}{extra}}}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward"
}}"""


def _int_conv(it="s8", ft="s8", ot="s8", k=2, extra=""):
    o = 21 - k if "rhs_dilate" not in extra else 20 - 2 * (k - 1)
    return parse_hlo(INT_CONV.format(it=it, ft=ft, ot=ot, k=k, o=o, extra=extra)).entry.root


@pytest.mark.parametrize("kwargs,cc,size,want", [
    ({}, (7, 5), 32, True),
    ({}, (7, 0), 32, False),              # int8x32 needs sm75
    ({}, (6, 0), 4, False),               # any vectorized int conv needs sm61
    ({}, (6, 1), 4, True),
    ({}, (7, 5), 8, False),               # only 4 and 32
    ({"ot": "f32"}, (7, 5), 32, False),   # int8x32 needs an integer result
    ({"ot": "f32"}, (7, 5), 4, True),
    ({"ft": "f32"}, (7, 5), 4, False),    # integer inputs and weights
    ({"k": 21}, (7, 5), 32, False),       # spatial dims too small for int8x32
    ({"k": 2, "extra": " rhs_dilate=2x2"}, (7, 5), 4, False),   # no dilation
])
def test_supports_optimized_integer_conv(kwargs, cc, size, want):
    assert supports_optimized_integer_conv(_int_conv(**kwargs), cc, size) is want


def test_same_values_catches_a_difference():
    a = parse_hlo("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] "
                  "negate(p)\n}")
    b = parse_hlo("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] "
                  "abs(p)\n}")
    with pytest.raises(AssertionError):
        same_values(a, b)
    assert same_values(a, a.clone()) == 2
    assert np.asarray(execute(a, [np.ones(4, np.float32)])[0]).tolist() == [-1] * 4
