"""--xla_fuel=PASS=N (XLA's ConsumeFuel): N rewrites, then none; every intermediate
module is valid and computes what the input computes (the interpreter is the oracle)."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import parse_hlo, verify
from hlo_opt.backends import execute
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.flags import DebugOptions
from hlo_opt.fuel import UNLIMITED, FuelPool, consume_fuel, fuel_scope, has_fuel
from hlo_opt.passes_api import optimize
from hlo_opt.pipeline import module_fingerprint

from .util import before_first_change, gpu_options, sample_text

ALGSIMP_HLO = """
HloModule fuel
ENTRY e {
  p0 = f32[8] parameter(0)
  one = f32[] constant(1)
  b1 = f32[8] broadcast(one), dimensions={}
  zero = f32[] constant(0)
  bz = f32[8] broadcast(zero), dimensions={}
  m1 = f32[8] multiply(p0, b1)
  a1 = f32[8] add(m1, bz)
  n1 = f32[8] negate(a1)
  n2 = f32[8] negate(n1)
  m2 = f32[8] multiply(n2, b1)
  ROOT s = f32[8] subtract(m2, bz)
}
"""


def test_pool_follows_xla_consume_fuel():
    pool = FuelPool({"p": 2})
    with fuel_scope(pool):
        assert [consume_fuel("p") for _ in range(4)] == [True, True, False, False]
        assert consume_fuel("other")  # no limit: always
        assert not has_fuel("p")
    assert pool.consumed["p"] == 2
    assert pool.unused() == []
    assert FuelPool({"q": 1}).unused() == ["q"]
    assert consume_fuel("p")  # no pool active


def _outputs(module, args):
    return execute(module, args)


def _check_fuel(before_text: str, pass_obj, name: str, rtol=1e-5, atol=1e-5,
                options: DebugOptions | None = None):
    """Fuel 0, 1, half, all: exactly that many rewrites; valid, equivalent modules; all
    equals unlimited."""
    def parse(text):
        module = parse_hlo(text)
        if options is not None:
            module.config = module.config.replace(debug_options=options)
        return module

    reference_module = parse(before_text)
    args = random_arguments(reference_module, 7)
    expected = _outputs(reference_module, args)

    def run(fuel):
        module = parse(before_text)
        pool = FuelPool({name: fuel}, describe=True)
        with fuel_scope(pool):
            pass_obj.run(module)
        return module, pool

    full, pool = run(UNLIMITED)
    total = pool.consumed[name]
    assert total > 0, f"{name} made no counted rewrite"
    assert len(pool.descriptions[name]) == total
    unlimited = parse(before_text)
    pass_obj.run(unlimited)
    assert full.to_text() == unlimited.to_text()
    none, _ = run(0)
    assert module_fingerprint(none) == module_fingerprint(parse_hlo(before_text))
    for k in sorted({1, total // 2, total}):
        module, pool = run(k)
        assert pool.consumed[name] == k
        verify(module)
        got = _outputs(module, args)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(np.asarray(g, dtype=np.float64),
                                       np.asarray(e, dtype=np.float64), rtol=rtol, atol=atol)
    return total


def test_algsimp_rule_driver_takes_fuel():
    from passes.algsimp import AlgebraicSimplifier
    total = _check_fuel(parse_hlo(ALGSIMP_HLO).to_text(), AlgebraicSimplifier(), "algsimp")
    assert total >= 4


def test_fuel_flag_through_the_runner():
    text = parse_hlo(ALGSIMP_HLO).to_text()
    counts = []
    for k in range(0, 6):
        module = parse_hlo(text)
        opts = DebugOptions.from_sources({"xla_fuel": {"algsimp": k}})
        optimize(module, opts, passes="algsimp")
        counts.append(len(module.entry.instructions))
    # each unit of fuel removes at least one instruction until algsimp is done
    assert counts[0] == len(parse_hlo(text).entry.instructions)
    assert all(a > b for a, b in zip(counts[:4], counts[1:4]))


def test_cse_takes_fuel():
    from passes.cse import HloCSE
    text = parse_hlo("""
HloModule cse
ENTRY e {
  p0 = f32[4] parameter(0)
  c1 = f32[] constant(2)
  c2 = f32[] constant(2)
  e1 = f32[4] exponential(p0)
  e2 = f32[4] exponential(p0)
  e3 = f32[4] exponential(p0)
  b1 = f32[4] broadcast(c1), dimensions={}
  b2 = f32[4] broadcast(c2), dimensions={}
  a = f32[4] add(e1, e2)
  m = f32[4] multiply(e3, b1)
  ROOT r = f32[4] add(a, m)
}
""").to_text()
    assert _check_fuel(text, HloCSE(), "cse") >= 3


@pytest.mark.parametrize("sample,pass_name,priority", [
    ("mobilenet_cluster.hlo", "priority-fusion", True),
    # (softmax and layer norm are one __triton fusion before the fusion passes run; the
    # gemms take no epilogues, so that loop fusions are left to fuse)
    ("matmul_bias_gelu.hlo", "fusion", False),
    ("mlp_train_step.hlo", "fusion_merger", False),
    ("mlp_train_step.hlo", "multi_output_fusion", True),
])
def test_fusion_passes_take_fuel(sample, pass_name, priority):
    options = gpu_options(priority, gemm_epilogues=False)
    before, pass_obj = before_first_change(sample_text(sample), pass_name, options)
    _check_fuel(before, pass_obj, pass_name, rtol=1e-4, atol=1e-4, options=options)
