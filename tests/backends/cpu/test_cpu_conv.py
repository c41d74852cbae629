"""convolution through per-tap GEMMs: strides, padding (also negative), odd sizes; other
convolutions (groups, dilation) still right through the host."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402
from hlo_opt.backends.cpu.conv import conv_plan  # noqa: E402


def _conv(inp, ker, out, window, extra="", native=True):
    m = parse_hlo_modules(f"""
HloModule c
ENTRY e {{
  x = {inp} parameter(0)
  w = {ker} parameter(1)
  ROOT c = {out} convolution(x, w), window={{{window}}}, dim_labels=b01f_01io->b01f{extra}
}}
""", "c.hlo")[0]
    assert (conv_plan(m.entry.root) is not None) == native
    args = random_arguments(m, seed=5)
    exe = CpuExecutable(m, cache=False)
    np.testing.assert_allclose(exe.run(args)[0], Interpreter(m).run(args)[0], rtol=1e-4,
                               atol=1e-4)
    assert ("blas conv" in exe.meta["native"].values()) == native


@pytest.mark.parametrize("window,ker,out", [
    ("size=3x3 pad=1_1x1_1", "f32[3,3,3,5]", "f32[2,7,9,5]"),
    ("size=3x3 stride=2x2 pad=1_1x1_1", "f32[3,3,3,5]", "f32[2,4,5,5]"),
    ("size=3x2", "f32[3,2,3,5]", "f32[2,5,8,5]"),
    ("size=3x3 pad=-1_2x0_1", "f32[3,3,3,5]", "f32[2,6,8,5]"),
    ("size=1x1", "f32[1,1,3,5]", "f32[2,7,9,5]"),
])
def test_plain_convolutions(window, ker, out):
    _conv("f32[2,7,9,3]", ker, out, window)


def test_depthwise_goes_to_the_host():
    _conv("f32[1,6,6,4]", "f32[3,3,1,4]", "f32[1,6,6,4]", "size=3x3 pad=1_1x1_1",
          ", feature_group_count=4", native=False)
