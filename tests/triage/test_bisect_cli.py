"""`hlo-opt bisect`: exit 1 with a culprit, 0 without, 2 on errors; the reproducer file
reproduces through `hlo-opt run`."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import SAMPLES

HLO_OPT = Path(sys.executable).parent / "hlo-opt"


def console(args, cwd=None):
    return subprocess.run([str(HLO_OPT), *map(str, args)], capture_output=True, text=True,
                          timeout=180, cwd=cwd)


def test_culprit_found_exit_1_and_reproducer_reproduces(tmp_path):
    repro = tmp_path / "repro.hlo"
    proc = console(["bisect", SAMPLES / "layer_norm.hlo", "--passes",
                    "algsimp,cse,test-only-miscompile,dce", "-o", repro,
                    "--json", tmp_path / "verdict.json"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "culprit: transforms_pipeline/test-only-miscompile:0" in out
    assert "rewrite 1 of 1 inside test-only-miscompile" in out
    assert "subtract" in out  # the diff
    line = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith("hlo-opt run"))
    words = line.split()[1:]
    assert "--xla_fuel=test-only-miscompile=1" in words
    again = console(words)
    assert again.returncode == 1 and "runs failed" in again.stderr  # it reproduces
    import json
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["found"] and verdict["occurrence"] == \
        "transforms_pipeline/test-only-miscompile:0"
    assert verdict["rewrite"]["index"] == 1 and verdict["reproduces"] is True
    assert verdict["failure"]["kind"] == "wrong_result"
    text = repro.read_text()
    assert text.startswith("// hlo-opt bisect reproducer") and "HloModule" in text


def test_nothing_diverges_exit_0(tmp_path):
    proc = console(["bisect", SAMPLES / "softmax.hlo", "--pipeline", "gpu"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no pass occurrence breaks the module" in proc.stdout
    assert not list(tmp_path.iterdir())  # no reproducer when there is nothing to reproduce


@pytest.mark.parametrize("args,message", [
    (["bisect", "/no/such.hlo", "--passes", "dce"], "no such file"),
    (["bisect", SAMPLES / "softmax.hlo", "--passes", "nope"], "Pass nope not found"),
    (["bisect", SAMPLES / "softmax.hlo"], "give one of --pipeline"),
    (["bisect", SAMPLES / "softmax.hlo", "--passes", "dce", "--seed", "x"], "not a valid"),
])
def test_errors_exit_2(args, message):
    proc = console(args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
