"""The pass-related command line: --passes/--pipeline, --list-passes, --stats, --summary,
`hlo-opt dumps` and `hlo-opt pipelines` (in process, through the console entry point)."""
from __future__ import annotations

import json
import sys

import pytest

from hlo_opt import cli

from ..conftest import SAMPLES

HLO = """
HloModule m

ENTRY %main (p: f32[2]) -> f32[2] {
  %p = f32[2] parameter(0)
  %a = f32[2] add(%p, %p)
  %b = f32[2] add(%p, %p)
  %dead = f32[2] negate(%p)
  ROOT %r = f32[2] multiply(%a, %b)
}
"""


@pytest.fixture
def hlo_file(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(HLO)
    return str(path)


def run_cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["hlo-opt", *args])
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    code = 0
    try:
        cli.run()
    except SystemExit as e:
        code = e.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def test_list_passes_sorted_comma_joined(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "--list-passes")
    names = out.strip().split(",")
    assert code == 0 and names == sorted(names)
    assert {"dce", "cse", "tuple-simplifier", "call-inliner", "flatten-call-graph"} <= set(names)


def test_passes_run_in_order(monkeypatch, capsys, hlo_file):
    code, out, _ = run_cli(monkeypatch, capsys, hlo_file, "--passes=cse,dce")
    assert code == 0
    assert "%b" not in out and "%dead" not in out and "ROOT %r" in out


def test_unknown_pass_one_red_line_exit_1(monkeypatch, capsys, hlo_file):
    code, out, err = run_cli(monkeypatch, capsys, hlo_file, "--passes=dce,nonexistent")
    assert code == 1 and out == ""
    assert err.strip() == "INVALID_ARGUMENT: Pass nonexistent not found."


def test_passes_and_pipeline_exclusive(monkeypatch, capsys, hlo_file):
    code, _, err = run_cli(monkeypatch, capsys, hlo_file, "--passes=dce", "--pipeline=cleanup")
    assert code == 1 and "cannot be used together" in err


def test_flags_before_and_after_input(monkeypatch, capsys, hlo_file, tmp_path):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    assert run_cli(monkeypatch, capsys, f"--xla_dump_to={d1}", "--passes=dce", hlo_file)[0] == 0
    assert run_cli(monkeypatch, capsys, hlo_file, "--passes=dce", f"--xla_dump_to={d2}")[0] == 0
    assert sorted(p.name for p in d1.iterdir()) == sorted(p.name for p in d2.iterdir())
    code, _, err = run_cli(monkeypatch, capsys, hlo_file, "extra.hlo", "--passes=dce")
    assert code == 1 and "unexpected argument" in err


def test_bad_flag_names_the_closest(monkeypatch, capsys, hlo_file):
    code, _, err = run_cli(monkeypatch, capsys, hlo_file, "--passes=dce",
                           "--xla_dump_hlo_pass_regex=.*")
    assert code == 1 and "xla_dump_hlo_pass_re" in err


def test_make_run_command(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, str(SAMPLES / "reduce_sum_xyz.hlo"),
                             "--pipeline=optimization", "--summary")
    assert code == 0
    assert out.startswith("HloModule cluster_reduce_sum_xyz__.12")
    assert "pipeline optimization" in err and "tuple-simplifier" in err and "share" in err


def test_stats_file_and_split_input(monkeypatch, capsys, tmp_path):
    path = tmp_path / "two.hlo"
    path.write_text(HLO + "\n// -----\n" + HLO.replace("HloModule m", "HloModule n"))
    stats = tmp_path / "stats.json"
    code, out, _ = run_cli(monkeypatch, capsys, str(path), "--split-input-file",
                           "--pipeline=optimization", f"--stats={stats}")
    assert code == 0 and out.count("HloModule") == 2
    docs = json.loads(stats.read_text())
    assert [d["module"] for d in docs] == ["m", "n"]
    assert [d["module_id"] for d in docs] == [0, 1]
    assert docs[0]["totals"]["cse"]["changed"] == 1


def test_verify_no_change_flag_passes_on_honest_passes(monkeypatch, capsys, hlo_file):
    code, _, _ = run_cli(monkeypatch, capsys, hlo_file, "--pipeline=optimization",
                         "--verify-no-change")
    assert code == 0


def test_dumps_command(monkeypatch, capsys, hlo_file, tmp_path):
    d = tmp_path / "dump"
    run_cli(monkeypatch, capsys, hlo_file, "--pipeline=optimization", f"--xla_dump_to={d}",
            "--xla_dump_hlo_pass_re=.*")
    code, out, _ = run_cli(monkeypatch, capsys, "dumps", str(d), "--json")
    assert code == 0
    doc = json.loads(out)
    (mod,) = doc["modules"]
    assert mod["module"] == "m" and mod["source"] == "pass_stats.json"
    assert [e["pass"] for e in mod["entries"]][:3] == [
        "flatten-call-graph", "zero_sized_hlo_elimination", "dynamic-index-splitter"]
    code, out, _ = run_cli(monkeypatch, capsys, "dumps", str(d), "--json", "--pass", "dce")
    assert {e["pass"] for e in json.loads(out)["modules"][0]["entries"]} == {"dce"}
    code, out, _ = run_cli(monkeypatch, capsys, "dumps", str(d))
    assert code == 0 and "module_0000 m" in out and "cse" in out
    code, _, err = run_cli(monkeypatch, capsys, "dumps", str(tmp_path / "missing"))
    assert code != 0


def test_pipelines_command(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "pipelines")
    assert code == 0 and "optimization" in out and "simplification" in out
    code, out, _ = run_cli(monkeypatch, capsys, "pipelines", "--json")
    doc = json.loads(out)
    assert doc["optimization"]["pipeline"] == "optimization"
    assert "call-inliner" in doc["optimization"]["items"]
    code, _, err = run_cli(monkeypatch, capsys, "pipelines", "nope")
    assert code == 1 and "Pipeline nope not found" in err


def test_progress_bar_callback():
    from hlo_opt.commands.opt import _progress_bar
    from hlo_opt.pipeline import ProgressEvent
    with _progress_bar(False) as callback:
        assert callback is None
    with _progress_bar(True) as callback:
        callback(ProgressEvent(1, 3, ("optimization",), "dce", 0))
        callback(ProgressEvent(4, 3, ("optimization", "simplification"), "cse", 1))
