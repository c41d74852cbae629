"""Providers prepare every instruction a picker will measure at once (the GPU providers
compile all candidate kernels in parallel, as XLA compiles autotuning candidates on a
thread pool): the session hands them the cache misses, each fingerprint once."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.autotune import ResultCache

from .util import PlantedProvider, gemm_module, pick, rewritten, session

TWIN_GEMMS = """HloModule twins
ENTRY %main (a: f32[64,32], b: f32[32,48], c: f32[64,32]) -> (f32[64,48], f32[64,48]) {
  %a = f32[64,32]{1,0} parameter(0)
  %b = f32[32,48]{1,0} parameter(1)
  %c = f32[64,32]{1,0} parameter(2)
  %d = f32[64,48]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %e = f32[64,48]{1,0} dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[64,48]{1,0}, f32[64,48]{1,0}) tuple(%d, %e)
}
"""


class Preparing(PlantedProvider):
    def __init__(self):
        super().__init__()
        self.prepared: list = []

    def prepare(self, insts):
        self.prepared.append([i.name for i in insts])


def test_the_session_prepares_the_misses_once_each():
    cache = ResultCache()
    provider = Preparing()
    assert pick(gemm_module(), session(provider, cache=cache))
    assert [len(p) for p in provider.prepared] == [2]          # two gemms, two shapes
    provider.prepared.clear()
    assert pick(gemm_module(), session(provider, cache=cache))   # all answered by the cache
    assert provider.prepared == []
    twins = rewritten(TWIN_GEMMS, "cublas-gemm-rewriter")
    provider = Preparing()
    pick(twins, session(provider))
    assert [len(p) for p in provider.prepared] == [1]           # one fingerprint


def test_cuda_sim_prepare_compiles_every_candidate_ahead(tmp_path, monkeypatch):
    """After ``prepare``, the first launch of every fusion's candidates finds its library
    in the cache: no host compiler runs during the measurements."""
    from tests.backends.cuda.support import require_gxx
    require_gxx()
    monkeypatch.setenv("HLO_OPT_CACHE_DIR", str(tmp_path))
    from hlo_opt import passes_api
    from hlo_opt.backends.cuda_sim import compiler
    from hlo_opt.backends.cuda_sim.autotune import SimProvider
    from hlo_opt.flags import DebugOptions
    m = parse_hlo("""HloModule two
ENTRY %main (a: f32[64,96], b: f32[96,64]) -> f32[64,64] {
  %a = f32[64,96]{1,0} parameter(0)
  %b = f32[96,64]{1,0} parameter(1)
  %e = f32[64,96]{1,0} exponential(%a)
  %f = f32[64,96]{1,0} multiply(%e, %a)
  %d = f32[64,64]{1,0} dot(%f, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %s = f32[64,64]{1,0} sine(%d)
  ROOT %m = f32[64,64]{1,0} multiply(%s, %d)
}
""")
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=0), pipeline="gpu")
    provider = SimProvider()
    fusions = [i for i in m.entry.instructions if provider.kind_of(i) == "fusion"]
    assert len(fusions) == 2
    real_popen = compiler.subprocess.Popen
    runs = []
    monkeypatch.setattr(compiler.subprocess, "Popen",
                        lambda *a, **k: runs.append(a) or real_popen(*a, **k))
    provider.prepare(fusions)
    assert sum("-shared" in a[0] for a in runs) == 2      # a library each (+ the header)

    def no_compiler(*a, **k):
        pytest.fail("the host compiler ran after prepare")
    monkeypatch.setattr(compiler.subprocess, "Popen", no_compiler)
    sess = session(provider, level=4)
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=4),
                        passes="fusion-launch-autotuner", autotune=sess)
    assert sess.stats.tuned == 2 and sess.stats.measurements > 2


def test_cuda_prepare_fills_the_nvrtc_cache_for_every_instruction(tmp_path, monkeypatch):
    """The CUDA provider's ``prepare`` compiles each instruction's merged candidate source
    (the one its first launch compiles) with NVRTC, in parallel, into the compile cache."""
    from tests.backends.cuda.support import require_nvrtc
    require_nvrtc()
    monkeypatch.setenv("HLO_OPT_CACHE_DIR", str(tmp_path))
    from hlo_opt import passes_api
    from hlo_opt.api import load
    from hlo_opt.backends.cuda import compiler
    from hlo_opt.backends.cuda.autotune import CudaProvider
    from hlo_opt.backends.cuda.launch_tuning import candidate_source, merged_kernels
    from hlo_opt.backends.cuda.target import target_device
    from hlo_opt.flags import DebugOptions
    from tests.conftest import SAMPLES

    class NoGpu:   # what the provider asks of a device before anything runs
        arch = "sm_90"

        def device_info(self):
            return target_device()
    m = load(str(SAMPLES / "mlp_train_step.hlo"))
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=0), pipeline="gpu")
    provider = CudaProvider(NoGpu())
    fusions = [i for i in m.entry.instructions
               if i.opcode == "fusion" and len(provider._kernel_variants(i)) > 1]
    assert len(fusions) >= 2
    provider.prepare(fusions)
    for f in fusions:
        src = candidate_source(merged_kernels(provider._kernel_variants(f))[0])
        assert compiler._read_cache(compiler.cache_key(src, "sm_90"), "sm_90") is not None


def test_prepare_is_best_effort(monkeypatch):
    """A candidate source that does not compile ahead is left to its first launch (which
    reports it as before): ``prepare`` itself never ends the tuning."""
    from hlo_opt.backends.cuda import compiler
    from hlo_opt.backends.cuda.autotune import CudaProvider
    from hlo_opt.backends.cuda.target import target_device

    class NoGpu:
        arch = "sm_90"

        def device_info(self):
            return target_device()

    def refuse(*a, **k):
        raise compiler.CudaCompileError("NVRTC failed to compile autotune.part0.cu")
    monkeypatch.setattr(compiler, "compile_cuda_parts", refuse)
    provider = CudaProvider(NoGpu())
    provider._kernel_variants = lambda inst: [inst]
    monkeypatch.setattr("hlo_opt.backends.cuda.autotune.merged_kernels",
                        lambda vs: ("// kernels", [], []))
    provider.prepare(["a", "b"])        # no exception
