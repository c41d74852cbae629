"""`hlo-opt ablate`: the JSON report's shape, the table, --plot, --resume, user errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlo_opt.cli import main

HLO_OPT = Path(sys.executable).parent / "hlo-opt"

HLO = """HloModule cli

ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  zero = f32[] constant(0)
  bz = f32[8] broadcast(zero), dimensions={}
  a0 = f32[8] add(p0, bz)
  a1 = f32[8] add(a0, p1)
  e1 = f32[8] exponential(p1)
  e2 = f32[8] exponential(p1)
  m = f32[8] multiply(a1, e1)
  ROOT r = f32[8] subtract(m, e2)
}
"""
PASSES = "algsimp,test-only-miscompile,cse,dce"

TOP = {"module", "pipeline", "backend", "repeat", "baseline", "passes"}
BASELINE = {"time_s", "times_s", "kernels"}
ROW = {"pass", "occurrence", "status", "time_s", "times_s", "slowdown", "kernels"}


def invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args], standalone_mode=False,
                              catch_exceptions=False)


@pytest.fixture()
def module_file(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(HLO)
    return path


def test_json_shape_table_and_plot(module_file, tmp_path):
    out = tmp_path / "sweep.json"
    args = ["ablate", module_file, "--passes", PASSES, "--repeat", "2", "--warmup", "0",
            "--json", out]
    have_mpl = True
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        have_mpl = False
    if have_mpl:
        args += ["--plot", tmp_path / "slow.png"]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert TOP <= set(doc) and BASELINE <= set(doc["baseline"])
    assert (doc["module"], doc["pipeline"], doc["backend"], doc["repeat"]) == (
        "cli", "transforms_pipeline", "interpreter", 2)
    assert len(doc["baseline"]["times_s"]) == 2
    status = {r["pass"]: r["status"] for r in doc["passes"]}
    assert status == {"algsimp": "wrong_result", "test-only-miscompile": "wrong_result",
                      "cse": "ok", "dce": "no_change"}
    for row in doc["passes"]:
        assert ROW <= set(row)
        assert ("error" in row) == (row["status"] in ("breaks", "wrong_result"))
        if row["status"] in ("ok", "wrong_result"):
            assert len(row["times_s"]) == 2
            assert row["slowdown"] == pytest.approx(row["time_s"] / doc["baseline"]["time_s"])
    assert "slowdown" in result.output and "test-only-miscompile" in result.output
    assert "runs (changed)" in result.output
    if have_mpl:
        png = (tmp_path / "slow.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000


def test_resume_fills_in_missing_rows(module_file, tmp_path):
    out = tmp_path / "sweep.json"
    assert invoke(["ablate", module_file, "--passes", PASSES, "--repeat", "1",
                   "--warmup", "0", "--json", out]).exit_code == 0
    doc = json.loads(out.read_text())
    kept = doc["passes"][0]
    kept["times_s"] = [123.0]  # a row the resumed sweep must not run again
    doc["passes"] = [kept]
    out.write_text(json.dumps(doc))
    result = invoke(["ablate", module_file, "--passes", PASSES, "--repeat", "1",
                     "--warmup", "0", "--resume", out])
    assert result.exit_code == 0, result.output
    resumed = json.loads(out.read_text())
    assert [r["pass"] for r in resumed["passes"]] == PASSES.split(",")
    assert resumed["passes"][0]["times_s"] == [123.0]


def console(args):
    return subprocess.run([str(HLO_OPT), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("extra,message", [
    (["--passes", "no-such-pass"], "Pass no-such-pass not found"),
    (["--passes", "algsimp,test-only-crash"], "the baseline fails"),
    (["--passes", "dce", "--resume", "{bad}"], "not an ablate report"),
    (["--passes", "dce", "--plot", "out.txt"], "must end in"),
])
def test_user_errors_are_one_red_line(module_file, tmp_path, extra, message):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    extra = [str(bad) if a == "{bad}" else a for a in extra]
    if "--plot" in extra:
        extra[extra.index("--plot") + 1] = str(tmp_path / "out.txt")
    proc = console(["ablate", module_file, "--repeat", "1", "--warmup", "0", *extra])
    assert proc.returncode == 1, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


class _InterruptedExecutor:
    """Runs one row, then the user presses Ctrl-C."""

    description = "interrupted"

    def map(self, context, rows):
        from hlo_opt.triage.ablate import run_row
        yield run_row(context, rows[0])
        raise KeyboardInterrupt


def test_interrupted_sweep_keeps_its_rows_and_resumes(module_file, tmp_path, monkeypatch):
    import hlo_opt.triage.executors as executors
    out = tmp_path / "sweep.json"
    args = ["ablate", module_file, "--passes", PASSES, "--repeat", "1", "--warmup", "0"]
    with monkeypatch.context() as m:
        m.setattr(executors, "make_executor", lambda jobs, ray: _InterruptedExecutor())
        result = CliRunner().invoke(main, [str(a) for a in args + ["--json", out]],
                                    standalone_mode=False)
    assert result.return_value == 130  # what the console script exits with
    assert "interrupted" in result.output and "--resume" in result.output
    doc = json.loads(out.read_text())
    # dce (changed nothing: no run needed) and the one row that ran before the interrupt
    assert sorted(r["pass"] for r in doc["passes"]) == ["algsimp", "dce"]
    result = invoke(args + ["--resume", out])
    assert result.exit_code == 0, result.output
    assert [r["pass"] for r in json.loads(out.read_text())["passes"]] == PASSES.split(",")
