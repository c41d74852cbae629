"""Runs the lit/FileCheck suite, one pytest item per test file (``lit -v
tests/lit/<file>.hlo``), so a failure names its file and ``-k`` selects one."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).resolve().parent / "lit"


def _lit_command() -> list[str]:
    try:
        import lit  # noqa: F401
    except ImportError:
        pytest.skip("lit is not installed (pip install -e '.[test]')")
    if shutil.which("filecheck") is None and shutil.which("FileCheck") is None and not (
            Path(sys.executable).parent / "filecheck").exists():
        pytest.skip("FileCheck is not installed (pip install filecheck)")
    return [sys.executable, "-c", "import sys; from lit.main import main; sys.exit(main())"]


LIT_FILES = sorted(LIT_DIR.glob("*.hlo"))
_RESULT = re.compile(r"^(PASS|FAIL|XFAIL|XPASS|UNRESOLVED|UNSUPPORTED|TIMEOUT): "
                     r"hlo-opt :: (\S+)", re.M)
_DETAIL = re.compile(r"\*{20} TEST 'hlo-opt :: (\S+)' FAILED \*{20}\n(.*?)\n\*{20}", re.S)


@pytest.fixture(scope="module")
def lit_run():
    """One parallel lit run over the directory: (file name -> result, -> failure text)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    proc = subprocess.run(_lit_command() + ["-v", str(LIT_DIR)], capture_output=True,
                          text=True, env=env, timeout=900)
    out = proc.stdout + proc.stderr
    results = {name: status for status, name in _RESULT.findall(out)}
    details = dict(_DETAIL.findall(out))
    return results, details, out


def test_the_suite_has_files():
    assert len(LIT_FILES) >= 10


@pytest.mark.parametrize("path", LIT_FILES, ids=lambda p: p.stem)
def test_lit(lit_run, path):
    results, details, out = lit_run
    status = results.get(path.name)
    assert status is not None, f"lit did not report {path.name}:\n{out[-5000:]}"
    assert status == "PASS", f"{path.name}: {status}\n{details.get(path.name, '')[-20000:]}"
