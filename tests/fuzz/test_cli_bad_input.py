"""The command line under bad input: every case exits non-zero with a message and no
traceback, and nothing the user named is replaced or left half-written.

The table holds what users got wrong (paths, flags, values); a seeded generator then
combines bad arguments at random.  Cases run through ``hlo_opt.cli.run`` in-process (an
escaping exception is a traceback); a few run the installed console script to prove it.
"""
from __future__ import annotations

import os
import random
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_opt import cli
from tests.conftest import SAMPLES

SAMPLE = str(SAMPLES / "softmax.hlo")
HLO_OPT = Path(sys.executable).parent / "hlo-opt"


def _run(argv, monkeypatch, capsys, stdin: str | None = None, env: dict | None = None):
    """(exit code, stdout, stderr) of ``hlo-opt argv`` in-process."""
    monkeypatch.setattr(sys, "argv", ["hlo-opt"] + [str(a) for a in argv])
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    if stdin is not None:
        import io
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    code = 0
    try:  # anything but SystemExit escaping would be a traceback
        cli.run()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def _bad(argv, monkeypatch, capsys, **kw):
    code, out, err = _run(argv, monkeypatch, capsys, **kw)
    assert code not in (0, None), f"exit 0 for {argv}: {err or out}"
    assert "Traceback" not in err and err.strip(), err
    assert len(err) < 3_000 and "\x1b[3" not in err.replace("\x1b[31m", "").replace(
        "\x1b[0m", "")
    return err


@pytest.fixture()
def tmp(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    return tmp_path


CASES = {
    "no such file": ["nope.hlo"],
    "unknown sub-command": ["ablate"],
    "a directory as input": ["{tmp}/dir"],
    "NUL in the input path": ["a\0b.hlo"],
    "-o a directory": [SAMPLE, "-o", "{tmp}/dir"],
    "-o an unwritable path": [SAMPLE, "-o", "/proc/no/such/file"],
    "-o a 300-character name": [SAMPLE, "-o", "{tmp}/" + "a" * 300],
    "--stats into a directory": [SAMPLE, "--passes", "dce", "--stats", "{tmp}/dir"],
    "--stats 300 characters": [SAMPLE, "--passes", "dce", "--stats", "{tmp}/" + "s" * 300],
    "unknown pass": [SAMPLE, "--passes", "nope"],
    "unknown pipeline": [SAMPLE, "--pipeline", "nope"],
    "unknown flag": [SAMPLE, "--xla_nope=1"],
    "bad flag value": [SAMPLE, "--xla_gpu_autotune_level=banana"],
    "5,000-digit flag": [SAMPLE, "--xla_dump_max_hlo_modules=" + "9" * 5000],
    "flag beyond int32": [SAMPLE, "--xla_dump_max_hlo_modules=99999999999999999999999"],
    "NUL in the dump path": [SAMPLE, "--passes", "dce", "--xla_dump_to={tmp}/a\0b"],
    "only separators": ["{tmp}/seps.hlo", "--split-input-file"],
    "run: negative seed": ["run", SAMPLE, "--seed", "-1"],
    "run: unknown flag": ["run", SAMPLE, "--xla_nope=1"],
    "run: bad flag value": ["run", SAMPLE, "--xla_gpu_autotune_level=banana"],
    "run: .npy inputs": ["run", SAMPLE, "--inputs", "{tmp}/x.npy"],
    "run: inputs of terabytes": ["run", "{tmp}/huge.hlo"],
    "run: an endless loop and --timeout": ["run", "{tmp}/endless.hlo", "--timeout", "1"],
    "run: outputs into a directory": ["run", SAMPLE, "--outputs", "{tmp}/dir"],
    "html: -o a directory": ["html", SAMPLE, "-o", "{tmp}/dir"],
    "dumps: a directory without dumps": ["dumps", "{tmp}/dir"],
    "diff: missing file": ["diff", SAMPLE, "nope.hlo"],
    "parse error with control bytes": ["{tmp}/ctrl.hlo"],
}

ENDLESS = """HloModule endless
cond {
  p = s32[] parameter(0)
  ROOT c = pred[] compare(p, p), direction=EQ
}
body {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(p, one)
}
ENTRY e {
  i = s32[] constant(0)
  ROOT w = s32[] while(i), condition=cond, body=body
}
"""


def _prepare(tmp: Path) -> None:
    import numpy as np
    (tmp / "seps.hlo").write_text("// -----\n// -----\n")
    np.save(tmp / "x.npy", np.zeros(3))
    (tmp / "huge.hlo").write_text("ENTRY e {\n p = f32[100000,100000,1000] parameter(0)\n"
                                  " ROOT n = f32[100000,100000,1000] negate(p)\n}\n")
    (tmp / "endless.hlo").write_text(ENDLESS)
    (tmp / "ctrl.hlo").write_text("ENTRY e {\n p = f32[4] parameter(0)\x1b[2J\x07\n}\n")


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_message_and_a_non_zero_exit(name, tmp, monkeypatch, capsys):
    _prepare(tmp)
    argv = [a.replace("{tmp}", str(tmp)) for a in CASES[name]]
    err = _bad(argv, monkeypatch, capsys)
    if name == "parse error with control bytes":
        assert "\\x1b[2J" in err and "\x07" not in err


def test_output_onto_a_symlink_writes_through_and_keeps_the_link(tmp, monkeypatch, capsys):
    target, link = tmp / "target.hlo", tmp / "link.hlo"
    target.write_text("old")
    link.symlink_to(target)
    code, _, err = _run([SAMPLE, "-o", link], monkeypatch, capsys)
    assert code == 0, err
    assert link.is_symlink() and target.read_text().startswith("HloModule")


def test_output_onto_a_fifo_writes_into_it(tmp, monkeypatch, capsys):
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    code, _, err = _run([SAMPLE, "-o", fifo], monkeypatch, capsys)
    data = reader.communicate(timeout=30)[0]
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and data.startswith(b"HloModule")


def test_run_outputs_go_to_the_path_given(tmp, monkeypatch, capsys):
    code, out, err = _run(["run", SAMPLE, "--outputs", tmp / "out"], monkeypatch, capsys)
    assert code == 0, err
    assert (tmp / "out").is_file() and not (tmp / "out.npz").exists()
    assert f"to {tmp / 'out'}" in out


def test_long_module_names_keep_their_dump_files(tmp, monkeypatch, capsys):
    for length in (200, 215, 228, 300):
        name = "m" * length
        src = tmp / f"long{length}.hlo"
        src.write_text(Path(SAMPLE).read_text().replace("jit_softmax", name, 1))
        dump = tmp / f"dump{length}"
        code, _, err = _run([src, "--passes", "dce", f"--xla_dump_to={dump}"], monkeypatch,
                            capsys)
        assert code == 0 and "Could not write" not in err, err
        names = os.listdir(dump)
        assert any(n.endswith(".before_optimization.txt") for n in names), names
        assert all(len(n.encode()) <= 255 for n in names)


def test_dump_to_a_file_with_html_dumps_still_writes_the_output(tmp, monkeypatch, capsys):
    f = tmp / "a_file"
    f.write_text("x")
    code, out, err = _run([SAMPLE, "--passes", "dce", f"--xla_dump_to={f}",
                           "--xla_dump_hlo_as_html"], monkeypatch, capsys)
    assert "Traceback" not in err and f.read_text() == "x"
    assert out.startswith("HloModule")


def test_symlinked_assets_directory_is_not_followed(tmp, monkeypatch, capsys):
    dump, elsewhere = tmp / "dump", tmp / "elsewhere"
    dump.mkdir()
    elsewhere.mkdir()
    (dump / "hlo_opt_assets").symlink_to(elsewhere)
    code, _, err = _run([SAMPLE, "--passes", "dce", f"--xla_dump_to={dump}",
                         "--xla_dump_hlo_as_html"], monkeypatch, capsys)
    assert code == 0, err
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    assert any(p.suffix == ".html" for p in dump.iterdir())


BAD_TOKENS = ["nope.hlo", "-o", "--stats", "--passes", "--pipeline", "nope", "", "-",
              "--xla_dump_to=", "--xla_gpu_autotune_level=9", "--split-input-file", "\0",
              "--xla_dump_max_hlo_modules=-5", "run", "--seed", "x", "--timeout", "0",
              "--inputs", "--iterations", "0", "dumps", "html", "diff", "--zzz", "-V",
              "--xla_fuel=dce=" + "9" * 30, "--xla_disable_hlo_passes=dce",
              "--xla_enable_hlo_passes_only=cse"]


def test_random_bad_command_lines(tmp, monkeypatch, capsys):
    """Seeded combinations: exit codes vary, tracebacks never appear."""
    rng = random.Random(1126)
    for _ in range(60):
        argv = [rng.choice(BAD_TOKENS) for _ in range(rng.randint(1, 5))]
        if rng.random() < 0.5:
            argv.insert(rng.randint(0, len(argv)), SAMPLE)
        monkeypatch.chdir(tmp)
        code, out, err = _run(argv, monkeypatch, capsys, stdin="")
        assert "Traceback" not in err, (argv, err)


@pytest.mark.skipif(not HLO_OPT.exists(), reason="the hlo-opt console script is not installed")
def test_the_console_script_prints_no_traceback(tmp):
    _prepare(tmp)
    for argv in (["ablate"], [SAMPLE, "-o", str(tmp / "dir")], ["run", str(tmp / "x.npy")],
                 [str(tmp / "ctrl.hlo")]):
        r = subprocess.run([str(HLO_OPT)] + argv, capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and "Traceback" not in r.stderr and r.stderr.strip()
