"""`hlo-opt diff` on the command line: exit codes, formats, dump directories."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .cases import LEFT, RIGHT, run_cli

ANSI = "\x1b["


@pytest.fixture
def files(tmp_path):
    a, b = tmp_path / "a.hlo", tmp_path / "b.hlo"
    a.write_text(LEFT)
    b.write_text(RIGHT)
    return a, b


def test_equal_modules_exit_0(files, monkeypatch, capsys):
    a, _ = files
    code, out, err = run_cli(["diff", a, a], monkeypatch, capsys)
    assert code == 0
    assert "no difference" in out and not err


def test_different_modules_exit_1_with_summary_and_diff(files, monkeypatch, capsys):
    a, b = files
    code, out, err = run_cli(["diff", a, b], monkeypatch, capsys)
    assert code == 1
    assert "instructions: 13 unchanged, 6 changed, 1 removed, 4 added" in out
    assert "1 x broadcast+maximum folded into fusion" in out
    assert "- %copy = f32[8,16]{1,0} copy(%scaled)" in out
    assert "+ %sq = f32[8,16]{1,0} sqrt(%neg)" in out
    assert "direction=GE  // attributes direction" in out
    assert "@@ added computation %fused_relu (fused) @@" in out
    assert ANSI not in out  # captured output is not a terminal: plain text


def test_errors_exit_2(files, tmp_path, monkeypatch, capsys):
    a, _ = files
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %x = f32[] bogus-op()\n}\n")
    cases = [
        (["diff", a, tmp_path / "missing.hlo"], "no such file"),
        (["diff", a, bad], "bad.hlo:3"),
        (["diff", a], "missing B"),
        (["diff", a, a, "--no-such-flag"], "No such option"),
        (["diff", a, a, "--color", "purple"], "purple"),
        (["diff", tmp_path], "use --pass NAME or --all"),
        (["diff", a, a, "--all"], "need a dump directory"),
    ]
    for args, message in cases:
        code, out, err = run_cli(args, monkeypatch, capsys)
        assert code == 2, (args, code, out, err)
        assert message in err, (args, err)
        assert "Traceback" not in err


def test_json_report(files, monkeypatch, capsys):
    a, b = files
    code, out, _ = run_cli(["diff", a, b, "--json"], monkeypatch, capsys)
    assert code == 1
    report = json.loads(out)
    assert report["equal"] is False
    assert report["summary"]["instructions"] == {
        "unchanged": 13, "changed": 6, "removed": 1, "added": 4, "renamed": 2}
    assert {r["name"] for r in report["removed"]} == {"copy"}
    assert {r["name"] for r in report["added"]} == {"sq", "relu.fusion", "param_0", "c"}
    cmp = next(c for c in report["changed"] if c["left"]["name"] == "cmp")
    assert cmp["kinds"] == ["attributes"] and cmp["details"]["attributes"] == ["direction"]
    assert report["patterns"][0] == {
        "count": 1, "description": "broadcast+maximum folded into fusion",
        "kind": "fusion", "examples": ["relu.fusion"]}
    code, out, _ = run_cli(["diff", a, a, "--json"], monkeypatch, capsys)
    assert code == 0 and json.loads(out)["equal"] is True


def test_color_switch(files, monkeypatch, capsys):
    a, b = files
    _, out, _ = run_cli(["diff", a, b, "--color", "always"], monkeypatch, capsys)
    assert ANSI in out
    _, out, _ = run_cli(["diff", a, b, "--color", "never"], monkeypatch, capsys)
    assert ANSI not in out


def test_summary_quiet_output_and_html(files, tmp_path, monkeypatch, capsys):
    a, b = files
    code, out, _ = run_cli(["diff", a, b, "--summary"], monkeypatch, capsys)
    assert code == 1 and "patterns:" in out and "@@" not in out
    code, out, _ = run_cli(["diff", a, b, "-q"], monkeypatch, capsys)
    assert code == 1 and out == ""
    report, page = tmp_path / "r.txt", tmp_path / "r.html"
    code, out, _ = run_cli(["diff", a, b, "-o", report, "--html", page], monkeypatch, capsys)
    assert code == 1 and out == ""
    assert "folded into fusion" in report.read_text()
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_ignore_switches(tmp_path, monkeypatch, capsys):
    a, b = tmp_path / "a.hlo", tmp_path / "b.hlo"
    a.write_text(LEFT)
    b.write_text(LEFT.replace("%bias = f32[8,16]{1,0}", "%bias = f32[8,16]{0,1}")
                 .replace("%tanh = f32[8,16]{1,0} tanh(%p2)",
                          '%tanh = f32[8,16]{1,0} tanh(%p2), metadata={op_name="t"}')
                 .replace("%scaled", "%scaled.7"))
    code, out, _ = run_cli(["diff", a, b], monkeypatch, capsys)
    assert code == 1 and "1 layout" in out and "1 metadata" in out and "renamed" in out
    code, out, _ = run_cli(["diff", a, b, "--ignore-layout", "--ignore-metadata"],
                           monkeypatch, capsys)
    assert code == 0 and "no difference" in out and "1 renamed" in out
    code, out, _ = run_cli(["diff", a, b, "--ignore-layout", "--ignore-metadata",
                            "--ignore-names"], monkeypatch, capsys)
    assert code == 0 and "renamed" not in out


def _dump(directory: Path, module_id: int, name: str, steps: list[tuple[str, str, str]],
          whole: tuple[str, str] | None = None) -> None:
    """steps: (after pass, before pass, text), numbered from 0."""
    for k, (after, before, text) in enumerate(steps):
        (directory / f"module_{module_id:04d}.{name}.{k:04d}.pipe.after_{after}"
                     f".before_{before}.txt").write_text(text)
    if whole:
        (directory / f"module_{module_id:04d}.{name}.before_optimizations.txt"
         ).write_text(whole[0])
        (directory / f"module_{module_id:04d}.{name}.after_optimizations.txt"
         ).write_text(whole[1])


@pytest.fixture
def dumpdir(tmp_path):
    d = tmp_path / "dump"
    d.mkdir()
    _dump(d, 0, "edits.1", [("pipeline-start", "algsimp", LEFT), ("algsimp", "dce", RIGHT),
                            ("dce", "fusion", RIGHT), ("fusion", "pipeline-end", LEFT)],
          (LEFT, LEFT))
    _dump(d, 1, "other", [("pipeline-start", "algsimp", LEFT), ("algsimp", "pipeline-end",
                                                                 LEFT)])
    (d / "module_0000.edits.1.ir-no-opt.ll").write_text("; not HLO")
    return d


def test_dump_dir_all_prints_one_line_per_pass(dumpdir, monkeypatch, capsys):
    code, out, _ = run_cli(["diff", dumpdir, "--all"], monkeypatch, capsys)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("module_0000 edits.1: 3 steps")
    assert "0001 algsimp" in lines[1] and "6 changed, 1 removed, 4 added" in lines[1]
    assert "folded into fusion" in lines[1]
    assert "0002 dce" in lines[2] and lines[2].endswith("no change")
    assert "0003 fusion" in lines[3] and "unfused" in lines[3]
    assert lines[4].startswith("module_0001 other: 1 steps")
    assert lines[5].endswith("no change")
    code, out, _ = run_cli(["diff", dumpdir, "--all", "--module", "1"], monkeypatch, capsys)
    assert code == 0 and "module_0000" not in out
    code, out, _ = run_cli(["diff", dumpdir, "--all", "--json"], monkeypatch, capsys)
    records = json.loads(out)
    assert [(r["module_id"], r["pass"], r["equal"]) for r in records] == [
        (0, "algsimp", False), (0, "dce", True), (0, "fusion", False), (1, "algsimp", True)]


def test_dump_dir_pass(dumpdir, monkeypatch, capsys):
    code, out, _ = run_cli(["diff", dumpdir, "--pass", "algsimp"], monkeypatch, capsys)
    assert code == 1
    assert "== module_0000 edits.1: 0001 pipe.after_algsimp" in out
    assert "== module_0001 other: 0001 pipe.after_algsimp" in out
    assert "+ %sq = f32[8,16]{1,0} sqrt(%neg)" in out
    code, out, _ = run_cli(["diff", dumpdir, "--pass", "dce"], monkeypatch, capsys)
    assert code == 0 and "no difference" in out
    code, out, err = run_cli(["diff", dumpdir, "--pass", "nope"], monkeypatch, capsys)
    assert code == 2 and "no dump after pass 'nope'" in err and "algsimp" in err
    code, out, err = run_cli(["diff", dumpdir, "--all", "--html", dumpdir / "x.html"],
                             monkeypatch, capsys)
    assert code == 2 and "--html" in err


def test_dump_dir_pass_to_files(dumpdir, tmp_path, monkeypatch, capsys):
    report, page = tmp_path / "out.txt", tmp_path / "page.html"
    code, out, _ = run_cli(["diff", dumpdir, "--pass", "algsimp", "-o", report,
                            "--html", page], monkeypatch, capsys)
    assert code == 1 and out == ""
    text = report.read_text()  # both runs of the pass, in one report
    assert "== module_0000" in text and "== module_0001" in text
    assert (tmp_path / "page.0.html").exists() and (tmp_path / "page.1.html").exists()
    code, _, err = run_cli(["diff", dumpdir, "--pass", "algsimp", "-o", report / "x.txt"],
                           monkeypatch, capsys)  # the parent is a file
    assert code == 2 and "cannot write" in err and "Traceback" not in err


def test_console_script_exit_status_and_pipe(files):
    exe = Path(sys.executable).parent / "hlo-opt"  # this environment's, not XLA's binary
    if not exe.exists():
        pytest.skip(f"hlo-opt console script not installed next to {sys.executable}")
    exe = str(exe)
    a, b = files
    r = subprocess.run([exe, "diff", str(a), str(b)], capture_output=True, text=True)
    assert r.returncode == 1 and ANSI not in r.stdout and "folded into fusion" in r.stdout
    r = subprocess.run([exe, "diff", str(a), str(a)], capture_output=True, text=True)
    assert r.returncode == 0
    r = subprocess.run([exe, "diff", str(a), "/nonexistent.hlo"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_dumps_written_by_hlo_opt_itself(tmp_path, monkeypatch, capsys):
    """End to end with the real dump writer: optimize with --xla_dump_to, then diff."""
    from tests.conftest import SAMPLES
    from .cases import require_pass
    require_pass("algsimp")
    dump = tmp_path / "dump"
    code, _, err = run_cli([SAMPLES / "mobilenet_cluster.hlo", "--passes=algsimp,dce",
                            f"--xla_dump_to={dump}", "--xla_dump_hlo_pass_re=.*"],
                           monkeypatch, capsys)
    if code != 0 or not dump.is_dir() or not list(dump.glob("module_*.after_*.txt")):
        pytest.skip(f"hlo-opt wrote no per-pass dumps here (status {code}: {err[-200:]})")
    code, out, _ = run_cli(["diff", dump, "--all"], monkeypatch, capsys)
    assert code == 1
    algsimp = next(line for line in out.splitlines() if " algsimp " in line)
    assert "removed" in algsimp and "convert removed" in algsimp
    code, out, _ = run_cli(["diff", dump, "--pass", "algsimp", "--json"], monkeypatch,
                           capsys)
    (record,) = json.loads(out)
    assert record["pass"] == "algsimp" and record["equal"] is False
    assert any(r["opcode"] == "convert" for r in record["removed"])


def test_dump_dir_pass_that_ran_twice_lists_the_runs_and_shows_the_one_that_changed(
        tmp_path, monkeypatch, capsys):
    d = tmp_path / "dump"
    d.mkdir()
    _dump(d, 0, "twice", [("pipeline-start", "fusion", LEFT), ("fusion", "dce", RIGHT),
                          ("dce", "fusion", RIGHT), ("fusion", "pipeline-end", RIGHT)])
    code, out, _ = run_cli(["diff", d, "--pass", "fusion"], monkeypatch, capsys)
    assert code == 1
    assert "pass 'fusion' ran 2 times: step 0001 (changed), step 0003 (no change)" in out
    assert "0001 pipe.after_fusion" in out and "0003 pipe.after_fusion" not in out


def test_dump_dir_all_skips_pipeline_markers_and_names_renames(tmp_path, monkeypatch, capsys):
    d = tmp_path / "dump"
    d.mkdir()
    renamed = LEFT.replace("%neg", "%negated")
    assert renamed != LEFT
    _dump(d, 0, "m", [("pipeline-start", "rename", LEFT), ("rename", "pipeline-end", renamed),
                      ("pipeline-end", "pipeline-start", renamed)])
    code, out, _ = run_cli(["diff", d, "--all"], monkeypatch, capsys)
    lines = out.splitlines()
    assert lines[0].startswith("module_0000 m: 1 steps")
    assert "rename" in lines[1] and "renamed, structure unchanged" in lines[1]
    assert not any("pipeline-end" in ln or "pipeline-start" in ln for ln in lines[1:])
