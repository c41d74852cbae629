"""algsimp on every sample module and every corpus module: verifier after, canonical
printing, interpreter before/after (bit for bit when only exact rules fired, else
differential.RTOL/ATOL)."""
from __future__ import annotations

import pytest

from passes.algsimp import AlgebraicSimplifier
from tests.support.differential import check_real_module, real_modules_or_marker

MODULES = real_modules_or_marker()


@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_algsimp_keeps_values(mid, text, fixture):
    check_real_module(text, AlgebraicSimplifier, fixture,
                      exact_of=lambda p: not p.last_inexact)
