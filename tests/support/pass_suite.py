"""Standard differential tests for a pass, generated for each test_<pass>.py:

    test_lit_modules = lit_modules_test("simplify_sorts*.hlo", SortSimplifier)
    test_real_modules = real_modules_test(SortSimplifier)

The first runs every module of the pass's FileCheck files through the harness (verifier
after, canonical printing, interpreter before/after on seeded inputs) and checks that
modules named ``keep_*`` / ``*_kept`` / ``unknown_*`` stay unchanged and the others
change; the second checks the pass on every sample and corpus module (bit for bit when
``exact``).
"""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from tests.support.differential import check_real_module, real_modules_or_marker
from tests.support.harness import check_pass
from tests.support.lit_chunks import chunks


def _expect_unchanged(name: str) -> bool:
    return name.startswith(("keep_", "unknown_")) or name.endswith("_kept")


def lit_modules_test(pattern: str, make_pass):
    cs = chunks(pattern)
    assert cs, f"no FileCheck inputs match {pattern}"

    @pytest.mark.parametrize("chunk", cs, ids=lambda c: c.id)
    def test(chunk):
        result = check_pass(parse_hlo(chunk.text), [make_pass()])
        assert result.changed != _expect_unchanged(chunk.name), chunk.name
    return test


def real_modules_test(make_pass, exact: bool = True):
    modules = real_modules_or_marker()

    @pytest.mark.parametrize("mid,text,fixture", modules, ids=[m[0] for m in modules])
    def test(mid, text, fixture):
        check_real_module(text, make_pass, fixture, exact_of=lambda p: exact)
    return test
