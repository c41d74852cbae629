"""Where the CUDA toolchain pieces come from, and one clear error when one is missing.

Everything comes from PyPI wheels (``pip install 'hlo-opt[cuda]'``): NVRTC from
``nvidia-cuda-nvrtc``, the runtime headers from ``nvidia-cuda-runtime``, ``ptxas`` from
``nvidia-cuda-nvcc``, the bindings from ``cuda-python``.  Nothing here touches the driver.
"""
from __future__ import annotations

import functools
import os

from ...errors import UnsupportedError

EXTRA = "pip install 'hlo-opt[cuda]'"


class MissingToolError(UnsupportedError):
    """A CUDA package is not installed (the message names it)."""


def _missing(what: str, package: str) -> MissingToolError:
    return MissingToolError(f"{what} not found: install the '{package}' package "
                            f"(or everything: {EXTRA})")


def nvmath_bindings(*names: str) -> tuple:
    """``nvmath.bindings.<name>`` for each of ``names`` (cublasLt, cufft, cusolverDn,
    cublas ...); a missing nvmath-python is one clear error."""
    import importlib
    try:
        return tuple(importlib.import_module(f"nvmath.bindings.{n}") for n in names)
    except ImportError:
        raise _missing("nvmath-python", "nvmath-python") from None


@functools.cache
def nvrtc():
    """The ``cuda.bindings.nvrtc`` module with libnvrtc loadable."""
    try:
        from cuda.bindings import nvrtc as mod
    except ImportError:
        raise _missing("cuda-python (cuda.bindings)", "cuda-python") from None
    try:
        mod.nvrtcVersion()
    except Exception:  # DynamicLibNotFoundError and friends
        raise _missing("libnvrtc", "nvidia-cuda-nvrtc") from None
    return mod


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    err, major, minor = nvrtc().nvrtcVersion()
    return int(major), int(minor)


@functools.cache
def runtime_include_dir() -> str | None:
    """The CUDA runtime headers (cuda_fp16.h ...) or None; our kernels need none of them."""
    try:
        import cuda.pathfinder as pf
        return pf.find_nvidia_header_directory("cudart")
    except Exception:
        return None


@functools.cache
def ptxas_path() -> str:
    env = os.environ.get("HLO_OPT_PTXAS")
    if env:
        return env
    try:
        import cuda.pathfinder as pf
        path = pf.find_nvidia_binary_utility("ptxas")
    except Exception:
        path = None
    if not path:
        raise _missing("ptxas", "nvidia-cuda-nvcc")
    return path


def have_nvrtc() -> bool:
    try:
        nvrtc()
        return True
    except MissingToolError:
        return False


def have_ptxas() -> bool:
    try:
        ptxas_path()
        return True
    except MissingToolError:
        return False
