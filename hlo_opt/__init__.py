"""hlo-opt: optimize, inspect and execute XLA HLO modules.

The names scripts use: ``parse_hlo``, ``load``, ``verify``, ``execute``, ``HloModule``,
``HloError``.  They load lazily, so ``import hlo_opt.flags`` stays light.
"""
from __future__ import annotations

import importlib

from .errors import HloError, HloParseError, HloVerifyError

__version__ = "0.1.0"

_LAZY = {
    "parse_hlo": ".api", "load": ".api", "load_all": ".api", "verify": ".api",
    "HloModule": ".ir", "Computation": ".ir", "Instruction": ".ir", "Literal": ".ir",
    "Shape": ".ir",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'hlo_opt' has no attribute '{name}'")


def execute(module, args, backend: str = "interpreter"):
    """Run ``module`` on numpy ``args``; returns the result leaves as a list of arrays."""
    from .backends import execute as _execute
    return _execute(module, args, backend=backend)


__all__ = ["Computation", "HloError", "HloModule", "HloParseError", "HloVerifyError",
           "Instruction", "Literal", "Shape", "execute", "load", "load_all", "parse_hlo",
           "verify"]
