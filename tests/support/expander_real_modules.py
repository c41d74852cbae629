"""Real-module checks for the expander/simplifier passes that fire on few modules
(slice-sinker, dynamic-index-splitter, dot-merger, convolution-group-converter,
stable-sort-expander, scatter_expander, rng-bit-generator-expander).

``check_module`` runs the pass on every sample/corpus module: a module the pass leaves
alone must print identically (no interpreter run: nothing to compare); a changed one goes
through :func:`tests.support.differential.check_real_module` (verifier, canonical print,
interpreter before/after).  ``check_variant`` does the same for a module a test rewrote
first so that the pass has work on real shapes (``make_variant(module) -> bool``): the
variant is compared with the original module, before and after the pass.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from hlo_opt.api import parse_hlo, verify
from hlo_opt.errors import HloError
from tests.support.differential import Outcome, check_real_module, real_modules
from tests.support.exactness import assert_bitwise
from tests.support.harness import assert_close, fixture_args, is_deterministic, random_args

__all__ = ["MODULES", "check_module", "check_variant", "load_or_skip"]


@functools.lru_cache(maxsize=1)
def _modules():
    return tuple(real_modules())


MODULES = list(_modules())


def load_or_skip(text: str):
    try:
        module = parse_hlo(text, "<module>")
        verify(module)
    except HloError as e:
        pytest.skip(f"input rejected by the parser/verifier: {str(e).splitlines()[0][:120]}")
    return module


def check_module(text: str, make_pass, fixture: str | None, exact: bool = False,
                 seeds=(0, 1)) -> Outcome:
    module = load_or_skip(text)
    work = module.clone()
    if not make_pass().run(work):
        assert work.to_text() == module.to_text(), "pass reported no change but changed"
        return Outcome(False, 0, exact)
    return check_real_module(text, make_pass, fixture, seeds=seeds,
                             exact_of=(lambda _p: exact))


def _run(module, args):
    from hlo_opt.backends import execute
    return [np.asarray(x) for x in execute(module, args)]


def check_variant(text: str, make_variant, make_pass, fixture: str | None = None,
                  exact: bool = True, rtol: float = 1e-4, atol: float = 1e-5,
                  seeds=(0,)) -> bool:
    """Rewrite a copy of the module with ``make_variant`` (False: nothing to rewrite ->
    returns False), run the pass on it and check that the original, the variant and the
    variant after the pass compute the same.  Returns whether the pass changed it."""
    module = load_or_skip(text)
    variant = module.clone()
    if not make_variant(variant):
        return False
    verify(variant)
    after = variant.clone()
    changed = make_pass().run(after)
    verify(after)
    printed = after.to_text()
    assert parse_hlo(printed, "<after>").to_text() == printed
    if not is_deterministic(module):
        return changed
    arg_sets = [a for a in (random_args(module, s) for s in seeds) if a is not None]
    if fixture and fixture_args(fixture) is not None:
        arg_sets.append(fixture_args(fixture))
    for i, args in enumerate(arg_sets):
        try:
            expected = _run(module, args)
        except Exception as e:  # noqa: BLE001 - the interpreter's gap, not the pass's
            pytest.skip(f"interpreter cannot run the module: {type(e).__name__}")
        for what, m in (("variant", variant), ("variant after the pass", after)):
            got = _run(m, args)
            ctx = f"{module.name} inputs {i}: {what}"
            if exact:
                assert_bitwise(expected, got, ctx)
            else:
                assert_close(expected, got, rtol, atol, ctx)
    return changed
