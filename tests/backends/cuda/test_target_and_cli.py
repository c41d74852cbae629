"""Deviceless target (gpu_specs text, Hopper default), the gpu platform's stages, the
run command on cuda-sim (profile table and JSON), dumps, and clear errors."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.backends.cuda.support import require_gxx, require_nvrtc
from tests.conftest import SAMPLES

SPECS = """
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  core_count: 108
  fpus_per_core: 64
  memory_bandwidth: 1555200000000
  l2_cache_size: 41943040
  clock_rate_ghz: 1.41
  shared_memory_per_block_optin: 166912
  cuda_compute_capability {
    major: 8
    minor: 0
  }
}
platform_name: "CUDA"
dnn_version_info { major: 8 minor: 3 patch: 2 }
device_description_str: "A100 SXM4 40 GB"
"""


def cli(*args):
    from hlo_opt.cli import main
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_gpu_specs_text(tmp_path):
    from hlo_opt.backends.cuda.target import arch_of, read_specs
    p = tmp_path / "a100.txtpb"
    p.write_text(SPECS)
    d = read_specs(str(p))
    assert (d.compute_capability, d.core_count, d.name) == ((8, 0), 108, "A100 SXM4 40 GB")
    assert arch_of(d) == "sm_80"


def test_gpu_specs_errors(tmp_path):
    from hlo_opt.backends.cuda.target import TargetConfigError, read_specs
    p = tmp_path / "bad.txtpb"
    p.write_text("gpu_device_info {\n  core_count: 3\n  ] \n}\n")
    with pytest.raises(TargetConfigError, match=r"bad.txtpb:3:3: error"):
        read_specs(str(p))
    with pytest.raises(TargetConfigError, match="cannot read"):
        read_specs(str(tmp_path / "missing.txtpb"))


def test_default_target_is_hopper():
    from hlo_opt.backends.cuda.target import arch_of, target_device
    assert arch_of(target_device()) == "sm_90"


def test_platform_stages_listed():
    r = cli(str(SAMPLES / "softmax.hlo"), "--platform=cuda", "--list-stages")
    stages = [ln.split("\t")[0] for ln in r.output.splitlines()]
    assert stages == ["hlo", "html", "hlo-backend", "buffer-assignment", "cuda", "ptx"]


def test_stage_cuda_and_ptx(tmp_path):
    require_nvrtc()
    r = cli(str(SAMPLES / "softmax.hlo"), "--platform=gpu", "--stage=cuda")
    assert r.exit_code == 0 and '#include "prelude.cuh"' in r.output
    # the gpu pipeline's one __triton softmax fusion (XLA:GPU's one kernel)
    assert r.output.count('extern "C" __global__') == 1
    p = tmp_path / "a100.txtpb"
    p.write_text(SPECS)
    r = cli(str(SAMPLES / "softmax.hlo"), "--platform=gpu", "--stage=ptx",
            f"--xla_gpu_target_config_filename={p}")
    assert r.exit_code == 0 and ".target sm_80" in r.output
    r = cli(str(SAMPLES / "softmax.hlo"), "--platform=gpu", "--stage=hlo-backend")
    assert "// kernel" in r.output and "row_normalization" in r.output


def test_run_cuda_sim_compare_and_profile():
    require_gxx()
    r = cli("run", str(SAMPLES / "while_loop.hlo"), "--backend", "cuda-sim", "--compare",
            "interpreter", "--profile")
    assert r.exit_code == 0, r.output
    assert "1/1 runs passed" in r.output and "cuda-sim profile" in r.output
    r = cli("run", str(SAMPLES / "softmax.hlo"), "--backend", "cuda-sim", "--profile", "--json")
    data = json.loads(r.output[r.output.index("{"):])
    rows = data["thunks"]
    assert {x["name"] for x in rows} >= {"triton_softmax"}
    assert abs(sum(x["share"] for x in rows) - 1) < 1e-6
    assert [x["share"] for x in rows] == sorted((x["share"] for x in rows), reverse=True)


def test_dump_writes_ptx_cu_and_buffer_assignment(tmp_path):
    require_gxx()
    require_nvrtc()
    from hlo_opt.api import load
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda import dump
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.program import build_program, full_source
    from hlo_opt.backends.cuda.target import target_device
    from hlo_opt.flags import DebugOptions
    m = load(str(SAMPLES / "softmax.hlo"))
    opts = DebugOptions.from_sources([f"--xla_dump_to={tmp_path}"])
    prog = build_program(m, target_device())
    dump(m, opts, prog, compile_cuda(full_source(prog), "sm_90"))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert any(n.endswith(f".{m.name}.ptx") for n in names), names
    assert any(n.endswith(".cu") for n in names)
    assert any(n.endswith("gpu_after_optimizations-buffer-assignment.txt") for n in names)
    compile_module(m, "cuda-sim", debug_options=opts)  # cuda-sim dumps the .cu too


def test_no_driver_is_a_clear_error():
    from hlo_opt.backends.cuda import driver
    try:
        driver.probe()
        pytest.skip("a CUDA device is present")
    except driver.CudaDriverError:
        pass
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "from hlo_opt.cli import run; run()", "run",
                        str(SAMPLES / "softmax.hlo"), "--backend", "cuda"],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "no CUDA driver/device found" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_gemm_plans_of_the_gpu_pipeline():
    """The cuBLAS custom calls of the samples become cuBLASLt gemms (their numerics:
    test_gemm_plan.py); layouts decide which operand is transposed."""
    from hlo_opt import passes_api
    from hlo_opt.api import load
    from hlo_opt.backends.cuda.gemm_plan import gemm_plan
    from hlo_opt.flags import DebugOptions
    # (with the Triton gemm emitter off: by default 4 of the 5 dots are gemm fusions)
    m = passes_api.optimize(load(str(SAMPLES / "mlp_train_step.hlo")),
                            DebugOptions.from_sources(["--xla_gpu_enable_triton_gemm=false"]),
                            pipeline="gpu")
    plans = [gemm_plan(i) for c in m.computations for i in c.instructions
             if i.opcode == "custom-call"]
    plans = [p for p in plans if p is not None]
    assert len(plans) == 5
    assert {(p.trans_a, p.trans_b) for p in plans} == {(True, False), (False, False),
                                                       (False, True)}
    for p in plans:
        assert p.m * p.n * p.k > 0 and p.epilogue in ("DEFAULT", "BIAS") and p.swapped
    # cuBLASLt (the default, as XLA:GPU) takes the forward pass's bias adds as epilogues
    assert any(p.epilogue == "BIAS" and p.bias_operand == 2 for p in plans)


@pytest.mark.parametrize("width", [2, 4])
def test_vector_width_is_a_launch_parameter(width):
    """Loop kernels read and write ``width`` elements per thread (bounds-checked under
    cuda-sim: a 2-wide kernel once read 4)."""
    require_gxx()
    from hlo_opt import passes_api
    from hlo_opt.api import load
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.cuda.emitters import LaunchConfig
    from hlo_opt.flags import DebugOptions
    from tests.conftest import ROOT
    m = load(str(ROOT / "benchmarks" / "jax_modules" / "gelu_bias.hlo"))
    mm = passes_api.optimize(m.clone(), DebugOptions.from_sources([]), pipeline="gpu")
    exe = compile_module(mm, "cuda-sim", config=LaunchConfig(unroll=width))
    assert [k.extra.get("vector_width") for k in exe.program.kernels] == [width]
    assert check_executable(m, exe).status == "pass"


def test_event_timer_mean_is_per_call_after_the_warmup():
    from hlo_opt.backends.cuda.driver import EventTimer

    class Dev:   # one "millisecond" of device time per queued call
        def __init__(self):
            self.clock, self.calls, self.synced = 0.0, 0, False

        def event(self):
            return {}

        def record(self, ev):
            ev["t"] = self.clock

        def elapsed_ms(self, a, b):
            return b["t"] - a["t"]

        def sync(self):
            self.synced = True

    dev = Dev()

    def call():
        dev.calls += 1
        dev.clock += 1.0
    assert EventTimer.mean(dev, call, 4, warmup=3) == 1e-3
    assert dev.calls == 7 and dev.synced


HOST_CALL_FAILS = """HloModule host_call_fails
f {
  p = f32[8,4]{1,0} parameter(0)
  ROOT g = f32[16,4]{1,0} all-gather(p), replica_groups={{0,1}}, dimensions={0}
}

ENTRY entry {
  p0 = f32[8,4]{1,0} parameter(0)
  ROOT fusion = f32[16,4]{1,0} fusion(p0), kind=kCustom, calls=f
}
"""


@pytest.mark.parametrize("backend", ["cuda-sim", "cpu"])
def test_a_failing_host_call_is_one_clear_error(tmp_path, backend):
    """An instruction run on the host whose called computation fails (here: a collective
    over two replicas in a one-replica run) ends in the interpreter's message and exit 1,
    not in a traceback of its internal control-flow exception."""
    if backend == "cuda-sim":
        require_gxx()
    path = tmp_path / "m.hlo"
    path.write_text(HOST_CALL_FAILS)
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "from hlo_opt.cli import run; run()", "run",
                        str(path), "--backend", backend], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert "all-gather over replica groups of 2 devices needs 2 replicas" in r.stderr


@pytest.mark.parametrize("block", [128, 256, 512, 1024])
def test_transpose_thread_tile_is_a_launch_parameter(block):
    """A transposing loop fusion's 32 x 32 shared tile is walked by 32 x (block / 32)
    threads in 32 / (block / 32) passes (a tuning knob); every shape equals the
    interpreter under cuda-sim's bounds checks."""
    require_gxx()
    from hlo_opt import passes_api
    from hlo_opt.api import load
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.cuda.emitters import LaunchConfig
    from hlo_opt.flags import DebugOptions
    from tests.conftest import ROOT
    m = load(str(ROOT / "benchmarks" / "jax_modules" / "transpose_add.hlo"))
    mm = passes_api.optimize(m.clone(), DebugOptions.from_sources([]), pipeline="gpu")
    exe = compile_module(mm, "cuda-sim", config=LaunchConfig(block=block))
    tiled = [k for k in exe.program.kernels if k.kind == "transpose"]
    assert tiled and all(k.block == (block, 1, 1) for k in tiled)
    assert f"ty + {block // 32}" in tiled[0].code or block == 1024
    assert check_executable(m, exe).status == "pass"
