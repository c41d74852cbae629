"""Multi-output reduction fusions whose other outputs have the reduced operand's dims (XLA's
reduction emitter writes them while it reads the operand): one kernel, not a reduction and a
loop, checked under cuda-sim against the interpreter, the nested-reduction case included."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import load, parse_hlo
from tests.backends.cuda.support import require_gxx
from tests.conftest import ROOT

SCAN_BODY = """HloModule side
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%fused (p0: f32[LEN], p1: f32[LEN]) -> (f32[], f32[LEN]) {
  %p0 = f32[LEN] parameter(0)
  %p1 = f32[LEN] parameter(1)
  %x = f32[LEN] add(%p0, %p1)
  %t = f32[LEN] tanh(%x)
  %z = f32[] constant(0)
  %r = f32[] reduce(%t, %z), dimensions={0}, to_apply=%add
  ROOT %out = (f32[], f32[LEN]) tuple(%r, %t)
}
ENTRY %e (a: f32[LEN], b: f32[LEN]) -> (f32[], f32[LEN]) {
  %a = f32[LEN] parameter(0)
  %b = f32[LEN] parameter(1)
  ROOT %f = (f32[], f32[LEN]) fusion(%a, %b), kind=kInput, calls=%fused
}
"""


def _check(module, seed=0):
    from hlo_opt.backends.cuda_sim import SimExecutable
    from hlo_opt.backends.interpreter import execute
    from hlo_opt.backends.interpreter.literals import random_arguments
    exe = SimExecutable(module)
    args = [a * 0.05 if a.dtype.kind == "f" else a for a in random_arguments(module, seed)]
    for g, w in zip(exe.run(args), execute(module, args)):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=1e-4, atol=1e-5)
    return exe.program


@pytest.mark.parametrize("length", [128, 5000])
def test_reduce_and_its_operand_are_one_kernel(length):
    require_gxx()
    prog = _check(parse_hlo(SCAN_BODY.replace("LEN", str(length))))
    (k,) = prog.kernels
    assert k.extra["side_outputs"] == [1] and "out1[" in k.code


def test_nested_reductions_store_from_the_outer_loop():
    """A column reduction whose operand holds row reductions (mlp_train_step's softmax
    gradient, on a Volta, where no Triton normalisation takes it): the side output is
    stored by the outer, parallel loop."""
    require_gxx()
    from dataclasses import replace

    from hlo_opt import passes_api
    from hlo_opt.analysis.device import H100
    from hlo_opt.flags import DebugOptions
    path = ROOT / "benchmarks" / "xla_gpu_modules" / "mlp_train_step.hlo"
    m = load(str(path))
    m.config = m.config.replace(device=replace(H100, compute_capability=(7, 0)))
    m = passes_api.optimize(m, DebugOptions.from_sources([]), pipeline="gpu")
    prog = _check(m, seed=1)
    sided = [k for k in prog.kernels if k.extra.get("side_outputs")]
    assert len(sided) >= 3 and all("out1[" in k.code for k in sided)
