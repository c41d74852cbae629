"""Check a backend against the interpreter on seeded random inputs (XLA's error bounds:
an element fails when both the absolute and the relative bound are exceeded; integers and
preds exact).  Used by the tests, ``scripts/device_check.sh`` and benchmarks."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckResult:
    name: str
    status: str        # pass | mismatch | error | skip (the interpreter cannot run it)
    detail: str = ""
    kernels: int = 0


def check_module(module, backend: str, seed: int = 1, pipeline: str | None = None,
                 abs_bound: float = 1e-3, rel_bound: float = 1e-3, **options) -> CheckResult:
    from .. import compile as compile_module
    from ..interpreter.literals import random_arguments
    name = module.name
    try:
        args = random_arguments(module, seed)
        expected = compile_module(module, "interpreter").run(args)
    except Exception as e:  # noqa: BLE001 - the oracle cannot run it: not counted
        return CheckResult(name, "skip", f"interpreter: {type(e).__name__}: {str(e)[:200]}")
    test_module = module
    try:
        if pipeline:
            from ... import passes_api
            from ...flags import DebugOptions
            test_module = passes_api.optimize(module.clone(), DebugOptions.from_sources([]),
                                              pipeline=pipeline)
        exe = compile_module(test_module, backend, **options)
        got = exe.run(args)
    except Exception as e:  # noqa: BLE001 - reported, counted as a failure
        return CheckResult(name, "error", f"{type(e).__name__}: {str(e)[:400]}")
    return _compare(name, module, got, expected, exe, abs_bound, rel_bound)


def check_executable(module, exe, seed: int = 1, abs_bound: float = 1e-3,
                     rel_bound: float = 1e-3) -> CheckResult:
    """As check_module, for an executable built beforehand (``module`` is the oracle's)."""
    from .. import compile as compile_module
    from ..interpreter.literals import random_arguments
    try:
        args = random_arguments(module, seed)
        expected = compile_module(module, "interpreter").run(args)
    except Exception as e:  # noqa: BLE001
        return CheckResult(module.name, "skip", f"interpreter: {type(e).__name__}: {str(e)[:200]}")
    try:
        got = exe.run(args)
    except Exception as e:  # noqa: BLE001
        return CheckResult(module.name, "error", f"{type(e).__name__}: {str(e)[:400]}")
    return _compare(module.name, module, got, expected, exe, abs_bound, rel_bound)


HALF_BOUNDS = {"f16": 1e-2, "bf16": 2e-2, "f8e4m3fn": 1.25e-1, "f8e5m2": 2.5e-1}


def _compare(name, module, got, expected, exe, abs_bound, rel_bound) -> CheckResult:
    """16- and 8-bit float outputs get the bounds XLA's tests give them (ErrorSpec 1e-2
    for f16 ...): the gpu pipeline rounds intermediates (tree reductions) where the
    interpreter, on the unoptimized module, accumulates in f32."""
    from ..interpreter.literals import compare_results, result_shapes
    shapes = result_shapes(module)
    for s in shapes:
        b = HALF_BOUNDS.get(getattr(s, "element_type", ""), 0.0)
        abs_bound, rel_bound = max(abs_bound, b), max(rel_bound, b)
    rows = compare_results(got, expected, shapes, abs_bound, rel_bound)
    prog = getattr(exe, "program", None)
    nk = len(getattr(prog, "kernels", []) or [])
    notes = getattr(prog, "library_fallbacks", None) or []
    if all(r.ok for r in rows):   # the run's library fallbacks (cuDNN refusals) said
        return CheckResult(name, "pass", "; ".join(
            f"%{n}: {why[:120]}" for n, why in notes[:2]), kernels=nk)
    bad = [r for r in rows if not r.ok]
    return CheckResult(name, "mismatch", "; ".join(
        f"out{r.index}: max abs {r.max_abs:.3g} rel {r.max_rel:.3g} {r.note}" for r in bad[:3]),
        kernels=nk)
