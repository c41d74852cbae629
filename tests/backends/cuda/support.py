"""Skips with a printed reason when a tool the CUDA tests need is missing."""
from __future__ import annotations

import shutil

import pytest


def require_gxx():
    if not (shutil.which("g++") or shutil.which("clang++")):
        pytest.skip("cuda-sim needs a host C++ compiler (g++): not installed")


def require_nvrtc():
    from hlo_opt.backends.cuda import toolchain
    try:
        toolchain.nvrtc()
    except toolchain.MissingToolError as e:
        pytest.skip(str(e))


def require_ptxas():
    from hlo_opt.backends.cuda import toolchain
    try:
        toolchain.ptxas_path()
    except toolchain.MissingToolError as e:
        pytest.skip(str(e))
