"""`hlo-opt INPUT`: printing, -o, stdin, --split-input-file, and clean user errors.

Functional checks run in-process through click's CliRunner; the error checks run the real
console script, because "one red line and exit 1, no traceback" is what `run()` adds.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlo_opt.cli import main
from hlo_opt.text.parser import parse_hlo
from tests.conftest import SAMPLES

HLO_OPT = Path(sys.executable).parent / "hlo-opt"
SORT = SAMPLES / "sort.hlo"

SMALL = """HloModule small

ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
"""


def invoke(args, input=None):
    result = CliRunner().invoke(main, [str(a) for a in args], input=input,
                                standalone_mode=False, catch_exceptions=False)
    return result


def console(args, input=None):
    return subprocess.run([str(HLO_OPT), *map(str, args)], input=input, capture_output=True,
                          text=True, timeout=120)


def test_prints_the_canonical_module():
    out = invoke([SORT]).output
    expected = parse_hlo(SORT.read_text()).to_text()
    assert out == expected
    assert out.startswith("HloModule sort.10, entry_computation_layout=")


def test_output_file(tmp_path):
    target = tmp_path / "sub" / "out.hlo"
    result = invoke([SORT, "-o", target])
    assert result.output == ""
    assert target.read_text() == parse_hlo(SORT.read_text()).to_text()


def test_stdin():
    out = invoke(["-"], input=SMALL).output
    assert out == parse_hlo(SMALL).to_text()
    assert "%n = f32[4]{0} negate(f32[4]{0} %p)" in out


def test_split_input_file_keeps_the_separators():
    second = SMALL.replace("small", "second").replace("negate", "abs")
    text = SMALL + "// -----\n" + second
    out = invoke(["--split-input-file", "-"], input=text).output
    first_text, second_text = parse_hlo(SMALL).to_text(), parse_hlo(second).to_text()
    assert out == first_text + "\n// -----\n" + second_text
    # the output reads back as the same modules
    again = invoke(["--split-input-file", "-"], input=out).output
    assert again == out


def test_without_split_a_separator_is_just_a_comment():
    out = invoke(["-"], input=SMALL + "// -----\n").output
    assert out == parse_hlo(SMALL).to_text()


def test_bad_file_exit_1_with_location_and_caret_no_traceback(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text(SMALL.replace("negate(p)", "negate(p"))
    proc = console([bad])
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0] == f"{bad}:6:1: error: expected ',' or ')'"
    assert lines[1:] == ["}", "^"]
    assert "Traceback" not in proc.stderr


def test_semantic_error_in_a_split_file_names_the_absolute_line(tmp_path):
    bad = tmp_path / "split.hlo"
    bad.write_text(SMALL + "// -----\n" + SMALL.replace("negate(p)", "negate(q)"))
    proc = console(["--split-input-file", bad])
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == \
        f"{bad}:12:26: error: instruction 'n' uses unknown operand '%q'"
    assert "Traceback" not in proc.stderr


def test_missing_file_is_a_clean_error(tmp_path):
    proc = console([tmp_path / "nope.hlo"])
    assert proc.returncode == 1
    assert "nope.hlo" in proc.stderr and "no such file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_xla_flag_is_named_with_a_suggestion():
    proc = console([SORT, "--xla_dump_hlo_as_txt"])
    assert proc.returncode == 1
    assert "--xla_dump_hlo_as_txt" in proc.stderr
    assert "--xla_dump_hlo_as_text" in proc.stderr  # the suggestion
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("text", ["", "garbage", "HloModule m\n", "\x00"])
def test_garbage_on_stdin_is_a_clean_error(text):
    proc = console(["-"], input=text)
    assert proc.returncode == 1
    assert proc.stderr.startswith("<stdin>:") and ": error: " in proc.stderr
    assert "Traceback" not in proc.stderr


def test_summary_shares_are_of_the_total_and_say_where_the_rest_went():
    import re
    from rich.console import Console
    from hlo_opt import passes_api
    from hlo_opt.commands.dumps import print_summary
    from hlo_opt.flags import DebugOptions
    collected = []
    passes_api.optimize(parse_hlo(SORT.read_text()), DebugOptions(), pipeline="optimization",
                        on_stats=collected.append)
    console = Console(record=True, width=200)
    print_summary(collected, console)
    text = console.export_text()
    assert "outside passes" in text
    total = re.search(r"total\s+│\s+│\s+│\s+([\d.]+)\s+│\s+100%", text)
    assert total and abs(float(total.group(1)) - collected[0].total_ms) < 0.01
    shares = [int(s) for s in re.findall(r"│\s+(\d+)%\s+│", text)]
    assert shares[-1] == 100 and 95 <= sum(shares[:-1]) <= 105  # rounding only


def test_help_starts_without_loading_the_library():
    """`hlo-opt --help` imports click and the command modules only: no parser, numpy,
    rich or passes (benchmarks/startup_bench.py times it against `import click`)."""
    import subprocess
    import sys
    code = ("import sys\nfrom hlo_opt import cli\nsys.argv = ['hlo-opt', '--help']\n"
            "try:\n    cli.run()\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    loaded = set(r.stderr.split())
    assert "hlo_opt.cli" in loaded and "--passes" in r.stdout and "Commands:" in r.stdout
    heavy = {"numpy", "rich", "lark", "passes", "hlo_opt.text.parser", "hlo_opt.ir.module"}
    assert not heavy & loaded, heavy & loaded


@pytest.mark.skipif(not HLO_OPT.exists(), reason="the hlo-opt console script is not installed")
def test_the_cli_says_what_it_does():
    r = console(["-V"])
    assert r.returncode == 0 and r.stdout.startswith("hlo-opt, version ")
    r = console(["--help"])
    assert all(o in r.stdout for o in ("--passes", "--pipeline", "--summary", "--stats",
                                       "-o, --o", "-V, --version", "run", "diff"))
    r = console([SORT, "--bogus"])  # usage names the command users typed
    assert r.returncode != 0 and "Usage: hlo-opt [OPTIONS]" in r.stderr
    assert "hlo-opt opt" not in r.stderr
    r = console(["autotune"])  # not a sub-command (ablate is one)
    assert r.returncode == 1 and "neither a command nor a file" in r.stderr
    assert "run" in r.stderr and "no such file" not in r.stderr
