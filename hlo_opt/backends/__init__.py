"""Execution backends: ``compile(module, backend)`` -> executable, ``execute(...)``.

The interpreter (numpy) is always available and is the reference; other backends
(``cpu``, ``cuda``) live in ``hlo_opt/backends/<name>/`` and expose
``compile(module) -> executable`` with ``executable.run(args) -> list[np.ndarray]``.
"""
from __future__ import annotations

import importlib

from ..errors import UnsupportedError

KNOWN_BACKENDS = ("interpreter", "cpu", "cuda", "cuda-sim")


def compile(module, backend: str = "interpreter", **options):  # noqa: A001 - XLA's verb
    """An executable for ``module`` on ``backend`` (``.run(args) -> list of arrays``)."""
    if backend == "interpreter":
        from .interpreter import Interpreter
        return Interpreter(module, **options)
    if backend not in KNOWN_BACKENDS:
        raise UnsupportedError(f"unknown backend '{backend}' (known: "
                               f"{', '.join(KNOWN_BACKENDS)})")
    try:
        mod = importlib.import_module(f"{__name__}.{backend.replace('-', '_')}")
    except ImportError as e:
        raise UnsupportedError(f"backend '{backend}' is not available: {e}") from None
    make = getattr(mod, "compile", None)
    if make is None:
        raise UnsupportedError(f"backend '{backend}' is not available (no compile())")
    return make(module, **options)


def execute(module, args, backend: str = "interpreter") -> list:
    """Run ``module`` on ``args`` (numpy arrays, one per entry parameter); returns the
    leaves of the result, in order, as numpy arrays."""
    return compile(module, backend).run(args)
