"""The autotuner from the command line: `hlo-opt --autotune-provider host`, results
files, --summary / --stats, and deviceless `--platform=gpu` errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from hlo_opt.autotune import PROCESS_CACHE
from hlo_opt.cli import main

from .util import GEMM_HLO

HLO_OPT = Path(sys.executable).parent / "hlo-opt"
SMALL_RZ = "--xla_gpu_redzone_padding_bytes=256"


def invoke(tmp_path, *args):
    src = tmp_path / "m.hlo"
    src.write_text(GEMM_HLO)
    result = CliRunner().invoke(main, [str(src), "--passes",
                                       "cublas-gemm-rewriter,gemm-algorithm-picker", *args])
    return result


def test_host_provider_writes_selected_algorithm_and_stats(tmp_path):
    stats = tmp_path / "s.json"
    r = invoke(tmp_path, "--autotune-provider", "host", SMALL_RZ, "--stats", str(stats))
    assert r.exit_code == 0, r.output
    assert r.output.count('"selected_algorithm":"') == 2
    doc = json.loads(stats.read_text())
    a = doc["autotune"]
    assert (a["instructions"], a["tuned"], a["cache_hits"]) == (2, 2, 0)
    assert a["measurements"] == 6 and a["tuning_ms"] > 0


def test_results_file_from_the_command_line(tmp_path):
    path = tmp_path / "results.txt"
    r1 = invoke(tmp_path, "--autotune-provider", "host", SMALL_RZ,
                f"--xla_gpu_dump_autotune_results_to={path}")
    assert r1.exit_code == 0 and path.read_text().startswith("version: 3\n")
    PROCESS_CACHE.clear()
    r2 = invoke(tmp_path, "--autotune-provider", "host", SMALL_RZ, "--summary",
                f"--xla_gpu_load_autotune_results_from={path}")
    assert r2.exit_code == 0
    assert "autotuning: 0 instruction(s) tuned, 2 from cache, 0 candidate(s) measured" in \
        r2.output.replace("\n", " ")


def test_level_0_and_no_provider_change_nothing(tmp_path):
    for args in (["--autotune-provider", "host", "--xla_gpu_autotune_level=0"], []):
        r = invoke(tmp_path, *args)
        assert r.exit_code == 0 and "selected_algorithm" not in r.output


def test_cache_mode_flag(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    r = invoke(tmp_path, "--autotune-provider", "host", SMALL_RZ,
               f"--xla_gpu_per_fusion_autotune_cache_dir={d}",
               "--xla_gpu_experimental_autotune_cache_mode=AUTOTUNE_CACHE_MODE_READ")
    assert r.exit_code == 0 and [p.name for p in d.iterdir()] == []
    PROCESS_CACHE.clear()   # a new process: the in-memory cache would answer first
    r = invoke(tmp_path, "--autotune-provider", "host", SMALL_RZ,
               f"--xla_gpu_per_fusion_autotune_cache_dir={d}")
    assert len([p for p in d.iterdir() if p.suffix == ".textproto"]) == 2
    r = invoke(tmp_path, "--xla_gpu_experimental_autotune_cache_mode=WRITE")
    assert r.exit_code != 0 and "AUTOTUNE_CACHE_MODE_READ" in str(r.exception)


def test_deviceless_gpu_platform_is_one_clear_line(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(GEMM_HLO)
    p = subprocess.run([str(HLO_OPT), str(src), "--platform=gpu", "--passes",
                        "cublas-gemm-rewriter,gemm-algorithm-picker"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "deviceless compilation cannot autotune %cublas-" in p.stderr
    assert "--xla_gpu_autotune_level=0" in p.stderr and p.stdout == ""
    p = subprocess.run([str(HLO_OPT), str(src), "--platform=gpu", "--passes",
                        "cublas-gemm-rewriter,gemm-algorithm-picker",
                        "--xla_gpu_autotune_level=0"], capture_output=True, text=True)
    assert p.returncode == 0 and "__cublas$lt$matmul" in p.stdout


def test_autotune_progress_joins_the_pass_bar():
    from hlo_opt.autotune import AutotuneProgress
    from hlo_opt.commands._autotune import autotune_progress
    from hlo_opt.commands.opt import _progress_bar
    assert autotune_progress(None) is None
    with _progress_bar(True) as bar:
        update = autotune_progress(bar)
        update(AutotuneProgress(0, 2, 0, 0.0, "", compiling=2))
        assert "compiling the candidates of 2" in bar.rich_progress.tasks[-1].description
        update(AutotuneProgress(0, 2, 3, 0.5, "cublas-gemm"))
        update(AutotuneProgress(2, 2, 6, 1.0, "cublas-gemm.1"))
        task = bar.rich_progress.tasks[-1]
        assert (task.completed, task.total, task.visible) == (2, 2, False)
        assert "6.0 candidates/s" in task.description
