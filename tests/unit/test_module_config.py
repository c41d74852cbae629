"""The options travel with the module (``HloModule.config``, XLA's HloModuleConfig): two
modules optimized in one process with different flags never see each other's options,
and a pass run on its own reads its module's config, not what an earlier run installed."""
from __future__ import annotations

from hlo_opt.analysis.device import A100, H100
from hlo_opt.api import parse_hlo
from hlo_opt.flags import DebugOptions
from hlo_opt.ir.config import HloModuleConfig
from hlo_opt.passes_api import optimize
from passes.collectives.all_reduce_combiner import AllReduceCombiner
from passes.pipelines import build_pipeline

TWO_ALL_REDUCES = """HloModule two
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %main (p0: f32[32], p1: f32[32]) -> (f32[32], f32[32]) {
  %p0 = f32[32]{0} parameter(0)
  %p1 = f32[32]{0} parameter(1)
  %ar0 = f32[32]{0} all-reduce(f32[32]{0} %p0), replica_groups={}, to_apply=%add
  %ar1 = f32[32]{0} all-reduce(f32[32]{0} %p1), replica_groups={}, to_apply=%add
  ROOT %t = (f32[32]{0}, f32[32]{0}) tuple(f32[32]{0} %ar0, f32[32]{0} %ar1)
}
"""
NO_COMBINE = DebugOptions(xla_gpu_all_reduce_combine_threshold_bytes=0)


def _all_reduces(module) -> int:
    return sum(i.opcode == "all-reduce" for i in module.entry.instructions)


def test_a_new_module_has_default_options_and_the_default_device():
    m = parse_hlo(TWO_ALL_REDUCES)
    assert m.config.debug_options == DebugOptions()
    assert m.config.device == H100


def test_two_modules_optimized_with_different_flags_in_one_process():
    a, b = parse_hlo(TWO_ALL_REDUCES), parse_hlo(TWO_ALL_REDUCES)
    optimize(a, NO_COMBINE, passes="all-reduce-combiner", verifier=None)
    optimize(b, DebugOptions(), passes="all-reduce-combiner", verifier=None)
    assert _all_reduces(a) == 2 and _all_reduces(b) == 1
    assert a.config.debug_options.xla_gpu_all_reduce_combine_threshold_bytes == 0
    assert b.config.debug_options == DebugOptions()
    # the other order: b's defaults do not leak into a later run with other flags
    c, d = parse_hlo(TWO_ALL_REDUCES), parse_hlo(TWO_ALL_REDUCES)
    optimize(d, DebugOptions(), passes="all-reduce-combiner", verifier=None)
    optimize(c, NO_COMBINE, passes="all-reduce-combiner", verifier=None)
    assert _all_reduces(c) == 2 and _all_reduces(d) == 1


def test_a_pass_run_alone_reads_its_module_not_the_last_run():
    optimize(parse_hlo(TWO_ALL_REDUCES), NO_COMBINE, passes="all-reduce-combiner",
             verifier=None)
    fresh = parse_hlo(TWO_ALL_REDUCES)
    assert AllReduceCombiner().run(fresh) and _all_reduces(fresh) == 1
    configured = parse_hlo(TWO_ALL_REDUCES)
    configured.config = HloModuleConfig(NO_COMBINE)
    assert not AllReduceCombiner().run(configured)


def test_a_clone_has_its_own_copy_of_the_config():
    m = parse_hlo(TWO_ALL_REDUCES)
    m.config = HloModuleConfig(NO_COMBINE, A100)
    c = m.clone()
    assert c.config == m.config and c.config.debug_options is not m.config.debug_options
    c.config.debug_options.xla_gpu_all_reduce_combine_threshold_bytes = 5
    assert m.config.debug_options.xla_gpu_all_reduce_combine_threshold_bytes == 0


def test_pipelines_are_built_from_the_config():
    classic = HloModuleConfig(DebugOptions(xla_gpu_enable_priority_fusion=False))
    names = [p.name for _, p in build_pipeline("fusion", classic).leaves()]
    assert "fusion_merger" in names and "priority-fusion" not in names
    names = [p.name for _, p in build_pipeline("fusion", HloModuleConfig()).leaves()]
    assert "priority-fusion" in names
