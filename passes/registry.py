"""The pass registry: XLA's ``name()`` string -> pass factory.

A pass is an object with ``name`` (XLA's spelling) and ``run(module) -> bool`` (did it
change anything).  It never prints: the pipeline runner reports, verifies and dumps.
Adding a pass = one file in ``passes/`` with ``@register`` on the class + tests.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Protocol


class Pass(Protocol):
    name: str

    def run(self, module) -> bool: ...


_FACTORIES: dict[str, Callable[[], Pass]] = {}


def register(factory):
    """Class decorator (or function): registers under ``factory.name``."""
    name = factory.name
    if name in _FACTORIES and _FACTORIES[name] is not factory:
        raise ValueError(f"pass name {name!r} registered twice")
    _FACTORIES[name] = factory
    return factory


_loaded = False


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import passes
    for info in pkgutil.iter_modules(passes.__path__):
        if info.name not in ("registry", "pipelines") and not info.name.startswith("_"):
            importlib.import_module(f"passes.{info.name}")


def pass_names() -> list[str]:
    _load_all()
    return sorted(_FACTORIES)


def create_pass(name: str, **kwargs) -> Pass:
    """A new instance of the pass registered as ``name`` (constructor ``kwargs`` passed on)."""
    _load_all()
    factory = _FACTORIES.get(name)
    if factory is None:
        from hlo_opt.errors import PassError
        raise PassError(f"INVALID_ARGUMENT: Pass {name} not found.")
    return factory(**kwargs)
