"""reshape-mover: FileCheck inputs and real modules differentially (it only moves
reshapes/transposes, so results must match bit for bit), plus a property test on random
reshape/transpose/elementwise graphs (alone and followed by algsimp)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from hlo_opt.api import parse_hlo
from passes.algsimp import AlgebraicSimplifier
from passes.reshape_mover import ReshapeMover
from tests.support.differential import check_real_module, real_modules_or_marker
from tests.support.harness import check_pass
from tests.support.lit_chunks import chunks
from tests.support.random_graphs import modules
from tests.passes.test_algsimp_property import check_pass_on_random_graph

CHUNKS = chunks("reshape_mover*.hlo")
MODULES = real_modules_or_marker()


@pytest.mark.parametrize("chunk", CHUNKS, ids=lambda c: c.id)
def test_lit_modules_keep_values(chunk):
    result = check_pass(parse_hlo(chunk.text), [ReshapeMover()])
    assert result.changed == chunk.name.startswith("sink"), chunk.name


@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_modules(mid, text, fixture):
    check_real_module(text, ReshapeMover, fixture, exact_of=lambda p: True)


def test_rearranges_are_not_duplicated():
    # %r feeds two candidates and one non-candidate: neither candidate may move.
    text = """HloModule m
ENTRY %main (p0: f32[2,3]) -> (f32[6], f32[6], f32[2,3]) {
  %p0 = f32[2,3] parameter(0)
  %r = f32[6] reshape(%p0)
  %n = f32[6] negate(%r)
  %e = f32[6] exponential(%r)
  %back = f32[2,3] reshape(%r)
  ROOT %t = (f32[6], f32[6], f32[2,3]) tuple(%n, %e, %back)
}
"""
    m = parse_hlo(text)
    assert not ReshapeMover().run(m)


class _MoverThenAlgsimp:
    name = "reshape-mover+algsimp"

    def __init__(self):
        self.last_inexact = None

    def run(self, module):
        ReshapeMover().run(module)
        a = AlgebraicSimplifier()
        a.run(module)
        self.last_inexact = a.last_inexact
        return True


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(modules())
def test_reshape_mover_preserves_values_of_random_graphs(text):
    check_pass_on_random_graph(text, ReshapeMover, lambda p: True)
    check_pass_on_random_graph(text, _MoverThenAlgsimp, lambda p: not p.last_inexact)
