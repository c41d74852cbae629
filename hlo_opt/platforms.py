"""XLA's hlo-opt surface: ``--platform=NAME --stage=STAGE`` and ``--list-stages``.

A small registry.  A :class:`Platform` names the pipeline that XLA's compiler for it runs
before code generation (``default_pipeline``; the CLI runs it, since the core does not
import ``passes/``) and its stages, each ``fn(module, options) -> str`` run on the
optimised module.  A backend registers its platform in a module named in ``PROVIDERS``
(imported on first use), so adding a platform is one line here plus that module::

    PROVIDERS = {"cpu": "hlo_opt.backends.cpu.stages", "gpu": "hlo_opt.backends.cuda.stages"}
    ALIASES = {"host": "cpu", "cuda": "gpu"}

Platform and stage names are case-insensitive (XLA's tests spell ``--platform=CUDA``).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from .errors import HloError


@dataclass
class Stage:
    name: str
    description: str
    fn: Callable  # (module, options) -> str


@dataclass
class Platform:
    name: str
    description: str
    default_pipeline: str | None = None
    stages: dict = field(default_factory=dict)   # name -> Stage, in listing order

    def add_stage(self, name: str, description: str, fn: Callable) -> None:
        self.stages[name] = Stage(name, description, fn)

    def stage(self, name: str) -> Stage:
        s = self.stages.get((name or "").lower())
        if s is None:
            raise HloError(f"unknown --stage={name} for --platform={self.name} (known: "
                           f"{', '.join(self.stages)})")
        return s


PROVIDERS: dict[str, str | None] = {
    "transforms": None,
    "cpu": "hlo_opt.backends.cpu.stages",
    "gpu": "hlo_opt.backends.cuda.stages",
}
ALIASES: dict[str, str] = {"host": "cpu", "cuda": "gpu"}
_REGISTRY: dict[str, Platform] = {}


def register(platform: Platform) -> Platform:
    _REGISTRY[platform.name] = platform
    return platform


def _transforms() -> Platform:
    p = Platform("transforms", "hardware-independent HLO passes only")
    p.add_stage("hlo", "the module after the passes, as HLO text",
                lambda module, options: module.to_text(
                    syntax_sugar_async_ops=options.xla_syntax_sugar_async_ops))
    return p


def known_platforms() -> list[str]:
    return sorted(set(PROVIDERS) | set(ALIASES))


def get(name: str) -> Platform:
    key = (name or "transforms").lower()
    key = ALIASES.get(key, key)
    if key not in PROVIDERS:
        raise HloError(f"unknown --platform={name} (known: {', '.join(known_platforms())})")
    if key not in _REGISTRY:
        provider = PROVIDERS[key]
        if provider is None:
            register(_transforms())
        else:
            try:
                importlib.import_module(provider)
            except ImportError as e:
                raise HloError(f"--platform={name} is not available: {e}") from None
    return _REGISTRY[key]
