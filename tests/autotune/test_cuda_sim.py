"""The autotuner on cuda-sim: launch configurations of generated kernels, compiled by the
host C++ compiler against the emulation header, with planted kernels that return a wrong
result or write out of bounds (real kernels, run by the emulator on the tuner's buffers)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hlo_opt import passes_api
from hlo_opt.api import parse_hlo
from hlo_opt.autotune import AutotuneConfig, AutotuneSession, FailureKind, ResultCache
from hlo_opt.errors import UnsupportedError
from hlo_opt.flags import DebugOptions

try:
    from hlo_opt.backends.cuda_sim.compiler import host_compiler
    host_compiler()
except (ImportError, UnsupportedError) as e:  # pragma: no cover - machines without g++
    pytest.skip(f"cuda-sim needs a host C++ compiler: {e}", allow_module_level=True)

from hlo_opt.backends import cuda_sim  # noqa: E402
from hlo_opt.backends.cuda.emitters import LaunchConfig  # noqa: E402
from hlo_opt.backends.cuda.launch_tuning import config_name  # noqa: E402
from hlo_opt.backends.cuda.program import prelude  # noqa: E402
from hlo_opt.backends.cuda_sim.autotune import SimProvider  # noqa: E402
from hlo_opt.backends.cuda_sim.compiler import compile_sim  # noqa: E402
from hlo_opt.backends.interpreter import execute  # noqa: E402
from hlo_opt.autotune.results import CandidateKey  # noqa: E402

HLO = """HloModule loop
ENTRY %main (a: f32[64,96], b: f32[64,96]) -> f32[64,96] {
  %a = f32[64,96]{1,0} parameter(0)
  %b = f32[64,96]{1,0} parameter(1)
  %s = f32[64,96]{1,0} add(%a, %b)
  %e = f32[64,96]{1,0} exponential(%s)
  ROOT %m = f32[64,96]{1,0} multiply(%e, %a)
}
"""
N = 64 * 96

WRONG_SRC = f"""
extern "C" __global__ void planted_wrong(float* out) {{
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < {N}; i += gridDim.x * blockDim.x)
    out[i] += 1.0f;
}}
"""
OOB_SRC = f"""
extern "C" __global__ void planted_oob(unsigned char* out) {{
  if (threadIdx.x < 4) out[{N * 4} + threadIdx.x] = 0x5a;   // 4 bytes past the output
}}
"""


READ_SRC = f"""
extern "C" __global__ void planted_oob_read(float* out) {{
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = out[HLO_CHK({N}, {N})];  // one past
}}
"""


def planted_library():
    return compile_sim(prelude() + WRONG_SRC + OOB_SRC,
                       [("planted_wrong", ["float*"]), ("planted_oob", ["unsigned char*"])],
                       debug=False)


def checked_library():
    """Compiled with cuda-sim's bounds checks, as SimProvider compiles candidates."""
    return compile_sim(prelude() + READ_SRC, [("planted_oob_read", ["float*"])], debug=True)


class Planted:
    """A real launch-configuration candidate, followed by a planted kernel launch (its
    emulator errors become CandidateError, as the provider's own launches do)."""

    def __init__(self, base, block: int, kernel: str, lib):
        self.base, self.kernel, self.lib = base, kernel, lib
        self.name = config_name(LaunchConfig(block=block))
        self.key = CandidateKey.other(self.name)
        self.scratch_bytes = base.scratch_bytes

    def run(self, inputs, outputs, scratch):
        import ctypes
        from hlo_opt.autotune.candidates import CandidateError
        from hlo_opt.backends.cuda_sim.compiler import SimKernelError
        self.base.run(inputs, outputs, scratch)
        try:
            self.lib.launch(self.kernel, (8, 1, 1), (64, 1, 1), False,
                            [ctypes.c_void_p(outputs[0].address)])
        except SimKernelError as e:
            raise CandidateError(str(e)) from None


class CostedSimProvider(SimProvider):
    """cuda-sim candidates timed by a fixed cost each (planted ones cheapest), so the
    choice is deterministic; ``runs`` counts candidate executions."""

    def __init__(self, planted=(), real_costs=None):
        super().__init__(measure=self._measure)
        self.planted = planted
        self.real_costs = real_costs
        self.runs = 0
        self._cost = None
        self._lib = None

    def candidates(self, inst):
        real = super().candidates(inst)
        costs = list(self.real_costs or []) + [10.0 + len(real) + i for i in range(len(real))]
        if not self.real_costs:
            costs = [10.0 + i for i in range(len(real))]
        out = [self._costed(c, cost) for c, cost in zip(real, costs)]
        if self.planted:
            self._lib = self._lib or planted_library()
        for j, (block, kernel, cost) in enumerate(self.planted):
            lib = checked_library() if kernel == "planted_oob_read" else self._lib
            out.append(self._costed(Planted(real[0], block, kernel, lib), cost))
        return out

    def _costed(self, cand, cost):
        provider = self

        class C:
            key, name, scratch_bytes = cand.key, cand.name, cand.scratch_bytes

            def run(self, inputs, outputs, scratch):
                provider.runs += 1
                provider._cost = cost
                cand.run(inputs, outputs, scratch)
        return C()

    def _measure(self, run):
        run()
        run()
        return self._cost * 1e-3


def fused_module():
    m = parse_hlo(HLO)
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=0), pipeline="gpu")
    (f,) = [i for i in m.entry.instructions if i.opcode == "fusion"]
    return m, f


def tune(m, provider, level, cache=None, **cfg):
    s = AutotuneSession(AutotuneConfig(level=level, redzone_padding_bytes=256, **cfg),
                        provider, cache=cache if cache is not None else ResultCache())
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=level),
                        passes="fusion-launch-autotuner", autotune=s)
    return s


def chosen_block(fusion) -> str:
    return json.loads(fusion.attrs["backend_config"])["launch_config"]["block"]


def outcome(s) -> dict:
    return {r.key.get("name").split(",")[0]: (r.failure.kind.name if r.failure else None)
            for r in s.records[-1].results}


WRONG = (64, "planted_wrong", 1.0)
OOB = (32, "planted_oob", 0.5)
OOB_READ = (1024, "planted_oob_read", 0.25)


def test_launch_configs_are_tuned_and_the_module_still_runs():
    m, f = fused_module()
    s = tune(m, CostedSimProvider(real_costs=[12.0, 11.0, 10.0]), level=5)
    assert [str(r.key.get("name")) for r in s.records[0].results][:3] == [
        config_name(LaunchConfig()), config_name(LaunchConfig(block=128)),
        config_name(LaunchConfig(block=512))]
    # every variant (vector widths 1 and 2 included) passes cuda-sim's bounds checks and
    # agrees with the reference
    assert len(s.records[0].results) == 5
    for r in s.records[0].results:
        assert r.failure is None, r
    assert chosen_block(f) == "512"
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((64, 96)).astype(np.float32) for _ in range(2)]
    # the tuned module runs under cuda-sim with its launch_config
    exe = cuda_sim.compile(m)
    assert [k.block for k in exe.program.kernels] == [(512, 1, 1)]
    np.testing.assert_allclose(exe.run(args)[0], execute(m, args)[0], rtol=1e-5)


def test_planted_kernels_chosen_at_level_1():
    for planted, block in ((WRONG, "64"), (OOB, "32")):
        m, f = fused_module()
        tune(m, CostedSimProvider([planted]), level=1)
        assert chosen_block(f) == block


def test_level_4_rejects_the_out_of_bounds_kernel_and_flags_the_wrong_one():
    m, f = fused_module()
    s = tune(m, CostedSimProvider([WRONG, OOB]), level=4)
    o = outcome(s)
    assert o["launch:block=32"] == "REDZONE_MODIFIED"
    assert o["launch:block=64"] == "WRONG_RESULT"     # flagged; XLA keeps it eligible at 4
    assert chosen_block(f) == "64"
    oob = [r for r in s.records[-1].results if r.failure and
           r.failure.kind == FailureKind.REDZONE_MODIFIED][0]
    assert "RHS redzone" in oob.failure.msg and "5a5a5a5a" in oob.failure.msg


def test_level_5_drops_both():
    m, f = fused_module()
    s = tune(m, CostedSimProvider([WRONG, OOB]), level=5)
    o = outcome(s)
    assert (o["launch:block=64"], o["launch:block=32"]) == ("DISQUALIFIED", "REDZONE_MODIFIED")
    assert chosen_block(f) == "256"


def test_results_file_round_trip_under_cuda_sim(tmp_path):
    m, f = fused_module()
    cache = ResultCache()
    tune(m, CostedSimProvider([OOB]), level=4, cache=cache)
    path = tmp_path / "r.textproto"
    cache.dump_to_file(str(path))
    assert 'other {\n      name: "launch:block=256,' in path.read_text()
    m2, f2 = fused_module()
    provider = CostedSimProvider([OOB])
    s = tune(m2, provider, level=4, load_results_from=str(path))
    assert provider.runs == 0 and s.stats.cache_hits == 1
    assert chosen_block(f2) == chosen_block(f)


def test_device_check_section_runs_under_cuda_sim():
    """scripts/autotune_check.py (the GPU proof's autotuning part) works on cuda-sim."""
    import importlib.util
    from tests.conftest import ROOT, SAMPLES
    spec = importlib.util.spec_from_file_location("autotune_check",
                                                  ROOT / "scripts" / "autotune_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lines: list = []
    row, loop = mod.autotune_section("cuda-sim", [str(SAMPLES / "softmax.hlo"),
                                                  str(SAMPLES / "while_loop.hlo")],
                                     lines.append)
    # the gpu pipeline's one __triton softmax fusion: a warp or a block per row
    assert row["tuned"] == 1 and row["matches_interpreter"] and row["loaded_same"]
    assert row["loaded_measured"] == 0 and row["level0_s"] > 0 and row["tuned_s"] > 0
    assert "softmax.hlo" in lines[1] and "== interpreter" in lines[1]
    assert "error" not in loop and loop["tuned"] >= 1 and loop["matches_interpreter"]


def test_bounds_checked_reads_disqualify_under_cuda_sim():
    """A redzone only sees writes; cuda-sim's bounds checks (on while tuning) also catch a
    kernel reading past its buffer: DISQUALIFIED at every checking level, never chosen."""
    for level in (1, 4):
        m, f = fused_module()
        s = tune(m, CostedSimProvider([OOB_READ]), level=level)
        o = outcome(s)
        assert o["launch:block=1024"] == "DISQUALIFIED"
        (bad,) = [r for r in s.records[-1].results if "block=1024" in r.key.get("name")]
        assert "planted_oob_read: out-of-bounds access" in bad.failure.msg
        assert chosen_block(f) == "256"


GEMM_HLO = """HloModule gemm
ENTRY %main (a: bf16[40,48], b: bf16[48,24]) -> f32[40,24] {
  %a = bf16[40,48]{1,0} parameter(0)
  %b = bf16[48,24]{1,0} parameter(1)
  %ca = f32[40,48]{1,0} convert(%a)
  %cb = f32[48,24]{1,0} convert(%b)
  ROOT %d = f32[40,24]{1,0} dot(%ca, %cb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_gemm_fusion_tiles_are_candidates_of_gemm_algorithm_picker():
    from hlo_opt.codegen.gemm_fusion import DEFAULT_TILE, TILE_CANDIDATES, tile_config_of
    m = parse_hlo(GEMM_HLO)
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=0), pipeline="gpu")
    (f,) = [i for i in m.entry.instructions if i.opcode == "fusion"]
    assert tile_config_of(f) == DEFAULT_TILE          # level 0: XLA's default config
    s = AutotuneSession(AutotuneConfig(level=4, redzone_padding_bytes=256), SimProvider(),
                        cache=ResultCache())
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=4),
                        passes="gemm-algorithm-picker", autotune=s)
    names = [str(r.key.get("name")) for r in s.records[0].results]
    assert names == [config_name(t) for t in TILE_CANDIDATES]
    assert all(r.failure is None for r in s.records[0].results)   # all correct, in bounds
    assert tile_config_of(f) in TILE_CANDIDATES
    exe = cuda_sim.compile(m)
    assert [k.extra["tile"] for k in exe.program.kernels] == [tile_config_of(f)]


@pytest.mark.parametrize("section, expect", [
    ("jax", "=> 18/18 pass"),
    ("performance", "single-kernel modules, bandwidth vs copy:")])
def test_device_check_script_runs_under_cuda_sim(section, expect, tmp_path):
    """scripts/device_check.py (the GPU proof) works under cuda-sim: the JAX benchmark
    modules match the interpreter, and the bandwidth section times every module."""
    import subprocess
    import sys
    from tests.conftest import ROOT
    out = tmp_path / "figures.txt"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "device_check.py"), "--backend",
                        "cuda-sim", "--section", section, "--quick", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    text = out.read_text()
    assert expect in text and "! " not in text and "ERROR" not in text, text


GEMM_CALL_HLO = """HloModule gemm_call
ENTRY %main (a: f32[64,33], b: f32[33,96], bias: f32[96]) -> f32[64,96] {
  %a = f32[64,33]{1,0} parameter(0)
  %b = f32[33,96]{1,0} parameter(1)
  %bias = f32[96]{0} parameter(2)
  %g = (f32[64,96]{1,0}, s8[64]{0}) custom-call(%a, %b, %bias), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"alpha_real":1,"alpha_imag":0,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"BIAS_RELU"}}
  ROOT %v = f32[64,96]{1,0} get-tuple-element(%g), index=0
}
"""


def test_gemm_call_tiles_are_tuned_at_level_4_and_the_out_of_bounds_one_rejected():
    """A cuBLAS gemm call under cuda-sim: the host gemm (the reference) and our gemm
    kernel's tile configurations are candidates; a planted kernel writing past the
    output (the size the planted kernels assume) is cheapest and rejected at level 4; the cheapest tile wins, is written back as the
    call's ``triton_gemm_config`` and runs (its kernel) with the interpreter's result."""
    from hlo_opt.backends.cuda.gemm_emitter import CONFIGS, config_of
    m = parse_hlo(GEMM_CALL_HLO)
    (call,) = [i for i in m.entry.instructions if i.opcode == "custom-call"]
    host, tiles = 1, 7
    costs = [20.0] * host + [15.0 - i for i in range(tiles)]
    s = AutotuneSession(AutotuneConfig(level=4, redzone_padding_bytes=256),
                        CostedSimProvider([OOB], real_costs=costs), cache=ResultCache())
    passes_api.optimize(m, DebugOptions(xla_gpu_autotune_level=4),
                        passes="gemm-algorithm-picker", autotune=s)
    results = s.records[0].results
    keys = [r.key for r in results]
    assert keys[0] == CandidateKey.gemm(0)
    names = [str(k.get("name")) for k in keys[host:host + tiles]]
    assert names == [config_name(t) for t in CONFIGS]
    assert all(r.failure is None for r in results[:host + tiles])   # right, in bounds
    assert results[-1].failure.kind == FailureKind.REDZONE_MODIFIED
    assert config_of(call) == CONFIGS[-1]                             # the cheapest tile
    cfg = json.loads(call.attrs["backend_config"])
    assert cfg["gemm_backend_config"]["selected_algorithm"] == "-1"
    exe = cuda_sim.compile(m)
    (k,) = exe.program.kernels
    assert k.kind == "gemm" and k.extra["tile"] == CONFIGS[-1]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.shape.dims).astype(np.float32) for p in m.entry.parameters]
    np.testing.assert_allclose(exe.run(args)[0], execute(m, args)[0], rtol=1e-4, atol=1e-4)
