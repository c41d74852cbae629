"""The GPU pipelines the collective passes live in: ``collective-optimizations``
(all-reduce-folder, reduce-scatter-creator, all-reduce-reassociate, algsimp,
all-gather-broadcast-reorder) and ``post-fusion-optimization`` (rename_fusions and the
three combiners), on the corpus modules with collectives (``hlo-opt m.hlo
--pipeline=...``) and on a module exercising every pass, checked on 8 replicas."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_opt.api import parse_hlo_modules
from passes.pipelines import build_pipeline
from tests.conftest import corpus_files, require_corpus
from tests.support.harness import largest_array, load_text
from tests.support.multi_replica import check_pass_replicated

from .helpers import count

PIPES = ("collective-optimizations", "post-fusion-optimization")
COLLECTIVE_PASSES = {
    "collective-optimizations": ["all-reduce-folder", "reduce-scatter-creator",
                                 "all-reduce-reassociate", "all-gather-broadcast-reorder"],
    "post-fusion-optimization": ["all-gather-combiner", "all-reduce-combiner",
                                 "reduce-scatter-combiner"],
}
_COLLECTIVE_RE = re.compile(r"\b(all-reduce|all-gather|reduce-scatter)")


def _corpus():
    return [p for p in corpus_files() if _COLLECTIVE_RE.search(p.read_text(errors="replace"))]


@pytest.mark.parametrize("pipe", PIPES)
def test_pipelines_hold_the_collective_passes(pipe):
    names = [p.name for _, p in build_pipeline(pipe).leaves()]
    for p in COLLECTIVE_PASSES[pipe]:
        assert p in names


_FILES = _corpus()


@pytest.mark.parametrize("pipe", PIPES)
@pytest.mark.parametrize("path", _FILES, ids=[p.name for p in _FILES])
def test_corpus_modules_through_the_pipeline(path, pipe):
    require_corpus()
    for module in parse_hlo_modules(path.read_text(), str(path)):
        r = module.header_attrs.get("replica_count")
        replicas = None if r else 8 if "<=[8]" in path.read_text() else 2
        result = check_pass_replicated(module, build_pipeline(pipe), num_replicas=replicas,
                                       seeds=())  # verifier, round trip, no silent change
        if pipe == "post-fusion-optimization" and "collective_cse" in path.name:
            # the three all-gathers with the same groups combine into one
            assert result.changed and count(result.module, "all-gather") == 1
        if result.changed and largest_array(module) <= (1 << 20):
            check_pass_replicated(module, build_pipeline(pipe), num_replicas=replicas,
                                  seeds=(0,), skip_unsupported=True)


@pytest.mark.parametrize("pipe", PIPES)
def test_hlo_opt_command_runs_the_pipeline_on_the_corpus(pipe):
    require_corpus()
    path = next(p for p in _FILES if "collective_cse" in p.name)
    hlo_opt = Path(sys.executable).parent / "hlo-opt"
    proc = subprocess.run([str(hlo_opt), str(path), f"--pipeline={pipe}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    n = len(re.findall(r"\ball-gather\(", proc.stdout))
    assert n == (1 if pipe == "post-fusion-optimization" else 3)


EVERYTHING = """HloModule m, replica_count=8
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add.2 = f32[] add(a, b)
}
ENTRY main {
  p0 = f32[16,4] parameter(0)
  p1 = f32[16,4] parameter(1)
  x = f32[4] parameter(2)
  y = f32[3] parameter(3)
  ar0 = f32[16,4] all-reduce(p0), replica_groups={{0,1},{2,3},{4,5},{6,7}}, to_apply=sum
  ar1 = f32[16,4] all-reduce(ar0), replica_groups={{0,2,4,6},{1,3,5,7}}, to_apply=sum
  ar2 = f32[16,4] all-reduce(p1), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=sum
  sum01 = f32[16,4] add(ar1, ar2)
  rid = u32[] replica-id()
  id = s32[] convert(rid)
  two = s32[] constant(2)
  off = s32[] multiply(id, two)
  zero = s32[] constant(0)
  ar3 = f32[16,4] all-reduce(p1), replica_groups={}, to_apply=sum
  ds = f32[2,4] dynamic-slice(ar3, off, zero), dynamic_slice_sizes={2,4}
  bc = f32[3,5,4] broadcast(x), dimensions={2}
  ag = f32[24,5,4] all-gather(bc), replica_groups={}, dimensions={0}
  g1 = f32[24] all-gather(y), replica_groups={}, dimensions={0}
  g2 = f32[32] all-gather(x), replica_groups={}, dimensions={0}
  ROOT t = (f32[16,4], f32[2,4], f32[24,5,4], f32[24], f32[32]) tuple(sum01, ds, ag, g1, g2)
}"""


def test_collective_optimizations_on_eight_replicas():
    result = check_pass_replicated(load_text(EVERYTHING), build_pipeline(
        "collective-optimizations"))
    assert result.changed and result.compared_runs == 2
    after = result.after_text
    assert "reduce-scatter(" in after  # ar3 + dynamic-slice by replica id
    assert "f32[8,4]{1,0} all-gather" in after  # gather x, then broadcast and reshape
    assert after.count("all-reduce(") == 1  # folded, then reassociated with ar2


def test_post_fusion_optimization_on_eight_replicas():
    result = check_pass_replicated(load_text(EVERYTHING), build_pipeline(
        "post-fusion-optimization"))
    assert result.changed and result.compared_runs == 2
    assert count(result.module, "all-gather") == 1  # the three all-gathers combined
