"""``gpu-conv-algorithm-picker`` on the conv kernel's algorithms (``conv.ALGORITHMS``):
cuda-sim runs every algorithm's kernel on the tuner's redzone-guarded buffers, the picker
writes the chosen ``algo_id``, the tuned module runs that algorithm's kernel and still
matches the interpreter; level 0 leaves today's kernel; every variant compiles with NVRTC."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hlo_opt import passes_api
from hlo_opt.analysis.device import H100
from hlo_opt.api import parse_hlo
from hlo_opt.autotune import AutotuneConfig, AutotuneSession, ResultCache
from hlo_opt.autotune.results import CandidateKey
from hlo_opt.backends.cuda.conv import ALGORITHMS, algorithm_of, with_algorithm
from hlo_opt.backends.cuda.launch_tuning import conv_variants, merged_kernels
from hlo_opt.backends.cuda.program import build_program
from hlo_opt.flags import DebugOptions
from tests.backends.cuda.support import require_gxx, require_nvrtc

ROOT = Path(__file__).resolve().parents[2]

# a JAX-style NHWC f32 convolution (HWIO filter), strided and padded
JAX_CONV = """HloModule jax_conv
ENTRY %main (x: f32[2,9,9,4], w: f32[3,3,4,8]) -> f32[2,5,5,8] {
  %x = f32[2,9,9,4]{3,2,1,0} parameter(0)
  %w = f32[3,3,4,8]{3,2,1,0} parameter(1)
  ROOT %y = f32[2,5,5,8]{3,2,1,0} convolution(%x, %w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""
# its gradient with respect to the input: a backward-input call (no filter staging)
JAX_BACKWARD_INPUT = """HloModule jax_backward_input
ENTRY e {
  dy = f32[2,6,6,4] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  rev = f32[3,3,3,4] reverse(w), dimensions={0,1}
  ROOT c = f32[2,6,6,3] convolution(dy, rev), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01oi->b01f
}
"""
MODULES = {"jax_conv": JAX_CONV,
           "mobilenet_cluster": (ROOT / "sample_modules/mobilenet_cluster.hlo").read_text()}


def sim_provider(**kw):
    require_gxx()
    from hlo_opt.backends.cuda_sim.autotune import SimProvider
    return SimProvider(**kw)


class Costed:
    """SimProvider whose candidates cost ``10 - algo_id`` (the last algorithm wins, so
    the choice is deterministic and not algorithm 0); ``runs`` counts executions."""

    def __init__(self):
        self.sim = sim_provider()
        self.name, self.memory = self.sim.name, self.sim.memory
        self.runs, self._cost = 0, None

    def device_key(self):
        return self.sim.device_key()

    def kind_of(self, inst):
        return self.sim.kind_of(inst)

    def candidates(self, inst):
        return [self._costed(c) for c in self.sim.candidates(inst)]

    def _costed(self, cand):
        provider = self

        class C:
            key, name, scratch_bytes = cand.key, cand.name, cand.scratch_bytes

            def run(self, inputs, outputs, scratch):
                provider.runs += 1
                provider._cost = 10 - cand.key.get("algo_id", 0) if cand.key.kind == \
                    "algorithm" else 10
                cand.run(inputs, outputs, scratch)
        return C()

    def measure(self, run):
        run()
        run()
        return self._cost * 1e-3


def optimized(text, level, provider=None, cache=None, **cfg):
    """``text`` through the gpu pipeline at ``level`` (a session on ``provider`` when
    given): (module, session)."""
    m = parse_hlo(text)
    s = None
    if provider is not None:
        s = AutotuneSession(AutotuneConfig(level=level, redzone_padding_bytes=256, **cfg),
                            provider, cache=cache if cache is not None else ResultCache())
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=level), pipeline="gpu",
                        autotune=s)
    return m, s


def conv_calls(m) -> list:
    return [i for c in m.computations for i in c.instructions
            if i.opcode == "custom-call" and i.custom_call_target.startswith("__cudnn$conv")]


def algorithms(m) -> dict:
    """Each conv call's written ``algorithm`` (None where there is none)."""
    return {i.name: json.loads(i.attrs.get("backend_config") or "{}")
            .get("cudnn_conv_backend_config", {}).get("algorithm") for i in conv_calls(m)}


def conv_kernels(m) -> dict:
    prog = build_program(m, H100)
    return {k.name: k for k in prog.kernels if k.kind.startswith("conv_")}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_level_4_runs_every_algorithm_and_writes_the_chosen_one(name):
    from hlo_opt.backends import cuda_sim
    from hlo_opt.backends.cuda.check import check_executable
    m, s = optimized(MODULES[name], 4, Costed())
    calls = conv_calls(m)
    assert calls and len(s.records) == len(calls)
    for rec in s.records:
        keys = [r.key for r in rec.results]
        assert keys == [CandidateKey.cudnn(a.algo_id) for a in ALGORITHMS], rec.instruction
        assert all(r.failure is None for r in rec.results), \
            [(str(r.key), r.failure) for r in rec.results if r.failure]
        assert rec.best.key == CandidateKey.cudnn(ALGORITHMS[-1].algo_id)
    for got in algorithms(m).values():
        assert got["algo_id"] == str(ALGORITHMS[-1].algo_id) and got["workspace_size"] == "0"
    # the tuned module runs the chosen algorithm's kernel, and differs from algorithm 0's
    tuned, default = conv_kernels(m), conv_kernels(optimized(MODULES[name], 0)[0])
    assert tuned.keys() == default.keys()
    for k, kern in tuned.items():
        assert kern.block == (ALGORITHMS[-1].threads, 1, 1) and kern.code != default[k].code
        assert kern.extra["algorithm"] == ALGORITHMS[-1].algo_id
        assert kern.extra["implicit_gemm"]    # the last algorithm: an implicit gemm
    r = check_executable(parse_hlo(MODULES[name]), cuda_sim.compile(m), seed=3)
    assert r.status == "pass", r.detail


def test_results_file_round_trip(tmp_path):
    cache = ResultCache()
    m, _ = optimized(MODULES["mobilenet_cluster"], 4, Costed(), cache=cache)
    path = tmp_path / "conv.textproto"
    cache.dump_to_file(str(path))
    assert f"algorithm {{\n      algo_id: {ALGORITHMS[-1].algo_id}" in path.read_text()
    provider = Costed()
    m2, s = optimized(MODULES["mobilenet_cluster"], 4, provider, load_results_from=str(path))
    assert provider.runs == 0 and s.stats.measurements == 0
    assert s.stats.cache_hits == len(conv_calls(m2))
    assert algorithms(m2) == algorithms(m)


def test_level_0_writes_nothing_and_keeps_todays_kernel():
    for text in MODULES.values():
        m, s = optimized(text, 0, Costed())
        assert not s.records and set(algorithms(m).values()) == {None}
        src = build_program(m, H100).source
        assert src == build_program(optimized(text, 0)[0], H100).source
        # algorithm 0 and an id the kernel does not know give the same source
        for algo_id in (0, 99):
            for call in conv_calls(m):
                with_algorithm(call, algo_id)
                assert algorithm_of(call) == ALGORITHMS[0]
            assert build_program(m, H100).source == src
        assert all(k.block == (256, 1, 1) and "__shared__" in k.code
                   for k in conv_kernels(m).values())


def test_plain_convolutions_always_run_algorithm_0():
    m = parse_hlo(JAX_CONV)
    assert algorithm_of(m.entry.root) == ALGORITHMS[0]
    assert conv_variants(m.entry.root, H100) == []      # not a cuDNN call: nothing to tune


def test_only_algorithms_that_change_the_kernel_are_candidates():
    """A backward-input call stages no filter: algorithm 1's kernel is algorithm 0's;
    the implicit-gemm algorithms (4, 5) take it."""
    m, _ = optimized(JAX_BACKWARD_INPUT, 0)
    (call,) = conv_calls(m)
    assert call.custom_call_target == "__cudnn$convBackwardInput"
    vs = conv_variants(call, H100)
    assert [v.key for v in vs] == [CandidateKey.cudnn(i) for i in (0, 2, 3, 4, 5)]
    assert [v.program.kernels[0].block[0] for v in vs] == [256, 128, 512, 128, 128]
    assert sim_provider().kind_of(call) == "conv"


def test_gemms_keep_the_host_candidates_under_cuda_sim():
    from tests.autotune.util import gemm_module
    (gemm,) = [i for i in gemm_module().entry.instructions if i.opcode == "custom-call"][:1]
    p = sim_provider()
    assert p.kind_of(gemm) == "gemm"
    assert [c.name for c in p.candidates(gemm)][0] == "host-gemm"


class FakeDevice:
    """Enough of a CUDA device for CudaProvider to list candidates (nothing launches)."""

    arch = "sm_90"

    def device_info(self):
        return H100

    def copy(self, dst, src, nbytes):
        raise AssertionError("nothing runs here")


def test_cuda_provider_offers_the_algorithms():
    from hlo_opt.backends.cuda.autotune import CudaProvider
    m, _ = optimized(JAX_CONV, 0)
    (call,) = conv_calls(m)
    p = CudaProvider(FakeDevice())
    assert p.kind_of(call) == "conv"
    cands = p.candidates(call)
    assert [c.key for c in cands] == [CandidateKey.cudnn(a.algo_id) for a in ALGORITHMS]
    assert [c.scratch_bytes for c in cands] == [0] * len(ALGORITHMS)


@pytest.fixture(scope="module")
def every_variant():
    texts = list(MODULES.values()) + [JAX_BACKWARD_INPUT]
    calls = [c for t in texts for c in conv_calls(optimized(t, 0)[0])]
    return [v for c in calls for v in conv_variants(c, H100)]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_every_variant(every_variant, arch):
    require_nvrtc()
    import re
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.program import prelude
    code, kernels, _ = merged_kernels(every_variant)
    out = compile_cuda(prelude() + "\n" + code, arch, name="conv_variants.cu")
    entries = set(re.findall(r"^\.visible \.entry (\w+)\(", out.ptx, re.M))
    assert {n for n, _ in kernels} <= entries
    assert len(kernels) == len(every_variant) >= len(ALGORITHMS) * 2
