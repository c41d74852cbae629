"""Imports the GPU pass modules in ``passes/gpu/`` so that the registry's loader (which
imports only the top-level modules of ``passes/``) registers them."""
from __future__ import annotations

import importlib
import pkgutil

from . import gpu as _gpu

for _info in sorted(pkgutil.iter_modules(_gpu.__path__), key=lambda i: i.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{_gpu.__name__}.{_info.name}")
