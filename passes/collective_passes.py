"""Imports the collective pass modules in ``passes/collectives/`` so that the registry's
loader (which imports only the top-level modules of ``passes/``) registers them."""
from __future__ import annotations

import importlib
import pkgutil

from . import collectives as _collectives

for _info in sorted(pkgutil.iter_modules(_collectives.__path__), key=lambda i: i.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{_collectives.__name__}.{_info.name}")
