"""Runs the lit/FileCheck suite (``lit -v tests/lit``) and fails on any lit failure."""
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


def test_lit_suite():
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    proc = subprocess.run(_lit_command() + ["-v", str(LIT_DIR)], capture_output=True,
                          text=True, env=env, timeout=900)
    out = proc.stdout + proc.stderr
    passed = re.search(r"Passed\s*:\s*(\d+)", out)
    assert proc.returncode == 0, f"lit failed (exit {proc.returncode}):\n{out[-20000:]}"
    assert passed and int(passed.group(1)) >= 10, f"expected at least 10 lit tests:\n{out}"
    assert "Failed" not in re.sub(r"Failed Tests \(0\)", "", out.split("Testing Time")[-1]), out
