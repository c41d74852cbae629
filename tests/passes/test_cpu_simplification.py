"""The ``cpu`` pipeline's simplification fixpoint: XLA:CPU's algsimp options (no dot
strength reduction), so a dot with a vector operand stays a dot, where the GPU's
simplification turns it into a multiply and a reduce; the interpreter gives the same
results before and after either way, and the verifier passes after every change."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.ir.config import HloModuleConfig
from hlo_opt.pipeline import Pipeline
from passes.cpu_pipelines import simplification as cpu_simplification
from passes.gpu_pipelines import simplification as gpu_simplification
from tests.support.harness import check_pass

VECTOR_DOTS = """
HloModule vector_dots

ENTRY e {
  h = f32[24] parameter(0)
  w = f32[24,10] parameter(1)
  m = f32[10,24] parameter(2)
  hw = f32[10] dot(h, w), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  mh = f32[10] dot(m, h), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT s = f32[10] add(hw, mh)
}
"""


def _opcodes(module):
    return [i.opcode for i in module.entry.instructions]


@pytest.mark.parametrize("which", ["cpu", "gpu"])
def test_vector_dots_stay_dots_on_cpu_only(which):
    make = cpu_simplification if which == "cpu" else gpu_simplification
    module = parse_hlo(VECTOR_DOTS)
    result = check_pass(module, Pipeline(f"{which}-simplification",
                                         [make(HloModuleConfig())]), rtol=1e-4, atol=1e-5)
    ops = _opcodes(result.module)
    if which == "cpu":
        assert ops.count("dot") == 2 and "reduce" not in ops
    else:
        assert "dot" not in ops and ops.count("reduce") == 2
