"""hlo-opt bisect: the first bad pass occurrence, then the first bad rewrite inside it."""
from __future__ import annotations

import pytest

from hlo_opt.errors import HloError
from hlo_opt.flags import DebugOptions
from hlo_opt.passes_api import PipelineFactory
from hlo_opt.triage.bisect import BisectSettings, bisect, reproducer_text

from .factories import Inserted, Listed, WrongAlgsimp
from .util import gpu_options, sample_text


@pytest.mark.parametrize("sample", ["layer_norm.hlo", "matmul_bias_gelu.hlo"])
@pytest.mark.parametrize("where,index", [
    ("optimization", 0),  # first pass of the pipeline
    ("simplification", 4),  # inside the simplification fixpoint, run x3
    ("post-layout-assignment", 3),
    ("fusion", -1),  # last item of the fusion fixpoint
    ("GPU-ir-emit-prepare", -1),  # the very last pass
])
def test_finds_test_only_miscompile_wherever_it_is(sample, where, index):
    # (without gemm epilogues, matmul_bias_gelu keeps a loop fusion with adds in it for
    # the miscompile to hit after the fusion passes)
    result = bisect(sample_text(sample), sample,
                    Inserted("gpu", where, index, "test-only-miscompile"),
                    gpu_options(gemm_epilogues=False))
    assert result.found
    assert result.culprit.pass_name == "test-only-miscompile"
    assert result.culprit.pipeline_path[-1] == where
    assert result.culprit.iteration == 0  # its first run, not a later fixpoint iteration
    assert result.failure.kind == "wrong_result"
    assert (result.rewrite.index, result.rewrite.total) == (1, 1)
    assert "=> subtract" in result.rewrite.description
    assert "subtract" in result.rewrite.diff_text
    assert result.reproduces is True
    # binary search: far fewer checks than pass invocations
    assert result.checks < result.invocations / 4


MAX_HLO = """
HloModule wrong_rule
ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  one = f32[] constant(1)
  b1 = f32[8] broadcast(one), dimensions={}
  zero = f32[] constant(0)
  bz = f32[8] broadcast(zero), dimensions={}
  m1 = f32[8] multiply(p0, b1)
  a1 = f32[8] add(m1, bz)
  n1 = f32[8] negate(a1)
  n2 = f32[8] negate(n1)
  mx = f32[8] maximum(n2, p1)
  m2 = f32[8] multiply(mx, b1)
  ROOT s = f32[8] subtract(m2, bz)
}
"""


@pytest.mark.parametrize("factory", [WrongAlgsimp(passes="algsimp,dce"),
                                     WrongAlgsimp(pipeline="optimization")],
                         ids=["passes", "optimization"])
def test_finds_the_wrong_rule_inside_algsimp(factory):
    result = bisect(MAX_HLO, "wrong.hlo", factory, DebugOptions())
    assert result.found and result.culprit.pass_name == "algsimp"
    rw = result.rewrite
    assert rw is not None, result.rewrite_note
    assert rw.description.startswith("WRONG max(A, B) => A")
    assert 1 < rw.index <= rw.total  # correct rewrites came first and are not blamed
    assert "maximum" in rw.diff_text
    # the reproducer line runs the registered algsimp, which lacks the injected rule
    assert result.reproduces is False


def test_clean_pipeline_finds_nothing():
    result = bisect(sample_text("softmax.hlo"), "softmax.hlo",
                    PipelineFactory(pipeline="gpu"), DebugOptions())
    assert not result.found and result.changed > 0 and result.checks == 1


def test_verifier_failure_names_the_pass_at_once():
    result = bisect(MAX_HLO, "v.hlo", Listed("algsimp", "test-only-break-verifier", "dce"),
                    DebugOptions())
    assert result.found and result.culprit.pass_name == "test-only-break-verifier"
    assert result.failure.kind == "verifier"
    assert "Failed after test-only-break-verifier" in result.failure.message
    assert (result.rewrite.index, result.rewrite.total) == (1, 1)
    assert result.reproduces is True
    assert result.reproducer_command.startswith("hlo-opt REPRO --passes "
                                                "test-only-break-verifier --xla_fuel=")


def test_crashing_pass_without_fuel_stops_at_the_pass(tmp_path):
    result = bisect(MAX_HLO, "c.hlo", Listed("algsimp", "test-only-crash"), DebugOptions())
    assert result.found and result.culprit.pass_name == "test-only-crash"
    assert result.failure.kind == "pass" and "deliberate" in result.failure.message
    assert result.rewrite is None and "does not count its rewrites" in result.rewrite_note
    text = reproducer_text(result, "c.hlo", "transforms_pipeline", str(tmp_path / "r.hlo"))
    assert text.startswith("// hlo-opt bisect reproducer")
    from hlo_opt.api import parse_hlo
    parse_hlo(text)  # the reproducer is a module (the comments are comments)


def test_broken_input_is_an_error():
    with pytest.raises(HloError, match="not supported by the interpreter"):
        bisect("""HloModule b
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = f32[2] custom-call(p), custom_call_target="Nope"
}""", "b.hlo", PipelineFactory(passes="dce"), DebugOptions(),
            BisectSettings())
