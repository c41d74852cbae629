"""Differential checks of a pass over real modules (sample_modules/ + the XLA corpus).

``real_modules()`` lists (id, module text, fixture name) for every module of
``sample_modules/`` and of the corpus (read through ``tests.conftest.corpus_files()``),
split on ``// -----``.  ``check_real_module(text, make_pass)`` parses one, skips it (with
the reason) when the verifier rejects the input or the interpreter cannot run it, runs the
pass on a copy, verifies the result, checks that it prints canonically, and compares the
interpreter before/after on seeded random inputs (and the XLA:CPU fixture inputs for the
samples): bit for bit when ``exact`` says so, else with the stated tolerance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.errors import HloError, UnsupportedError
from hlo_opt.text.parser import parse_hlo_modules
from tests.conftest import corpus_files, sample_files
from tests.support.exactness import assert_bitwise
from tests.support.harness import assert_close, fixture_args, is_deterministic, random_args

# Tolerance for rewrites that may change float rounding (reassociation, reordered
# reductions): relative 1e-4 / absolute 1e-5 for f32 results, 2e-2 for 16-bit floats.
RTOL, ATOL = 1e-4, 1e-5
RTOL16, ATOL16 = 2e-2, 2e-2


def real_modules() -> list[tuple[str, str, str | None]]:
    """(test id, module text, fixture name) per module; a file the parser rejects gives
    one entry holding its raw text (its test then skips with the parse error)."""
    out = []
    for path in sample_files():
        out.append((f"sample:{path.stem}", path.read_text(), path.stem))
    for path in corpus_files():
        text = path.read_text(errors="replace")
        try:
            modules = parse_hlo_modules(text, path.name)
        except HloError:
            out.append((f"corpus:{path.name}", text, None))
            continue
        for i, m in enumerate(modules):
            out.append((f"corpus:{path.name}#{i}", m.to_text(), None))
    return out


def real_modules_or_marker() -> list[tuple[str, str | None, str | None]]:
    """real_modules() plus, when the corpus is absent, one entry whose test skips with
    require_corpus()'s reason (so the missing corpus shows in the test report)."""
    out = real_modules()
    if not corpus_files():
        out.append(("corpus:absent", None, None))
    return out


@dataclass
class Outcome:
    changed: bool
    compared: int
    exact: bool


def _load(text: str):
    try:
        module = parse_hlo(text, "<module>")
        from hlo_opt.api import verify
        verify(module)
    except HloError as e:
        pytest.skip(f"input rejected by the parser/verifier: {str(e).splitlines()[0][:120]}")
    return module


_EXPECTED: dict = {}


def _expected(text, module, i, args):
    """Interpreter results of the unmodified module (cached across passes)."""
    key = (text, i)
    if key not in _EXPECTED:
        if len(_EXPECTED) > 2000:
            _EXPECTED.clear()
        _EXPECTED[key] = _execute(module, args)
    return _EXPECTED[key]


def _execute(module, args):
    from hlo_opt.backends import execute
    return [np.asarray(x) for x in execute(module, args)]


def check_real_module(text: str, make_pass, fixture: str | None = None, seeds=(0, 1),
                      exact_of=None) -> Outcome:
    """Run the pass from ``make_pass()`` on the module and check it differentially.
    ``exact_of(pass_obj) -> bool`` says whether the run promised bit-exact results."""
    from hlo_opt.api import verify
    if text is None:
        from tests.conftest import require_corpus
        require_corpus()
        pytest.skip("corpus is empty")
    module = _load(text)
    work = module.clone()
    p = make_pass()
    changed = p.run(work)
    verify(work)
    after = work.to_text()
    assert parse_hlo(after, "<after>").to_text() == after, "result does not print canonically"
    if not changed:
        assert after == module.to_text(), "pass reported no change but changed the text"
    exact = bool(exact_of(p)) if exact_of else False
    if not changed or not is_deterministic(module):
        return Outcome(changed, 0, exact)  # unchanged text: the same results
    arg_sets = [a for a in (random_args(module, s) for s in seeds) if a is not None]
    if fixture:
        fa = fixture_args(fixture)
        if fa is not None:
            arg_sets.append(fa)
    compared = 0
    for i, args in enumerate(arg_sets):
        try:
            expected = _expected((text, tuple(seeds), fixture), module, i, args)
        except UnsupportedError as e:  # the interpreter's gap, not the pass's; any other
            # error (an interpreter crash included) fails the test
            pytest.skip(f"interpreter cannot run the input module: {type(e).__name__}: "
                        f"{str(e).splitlines()[0][:120] if str(e) else ''}")
        actual = _execute(work, args)
        ctx = f"{module.name} inputs {i}"
        if exact:
            assert_bitwise(expected, actual, ctx)
        else:
            wide = any(np.asarray(e).dtype.itemsize <= 2 and np.asarray(e).dtype.kind not in "biu"
                       for e in expected)
            assert_close(expected, actual, RTOL16 if wide else RTOL,
                         ATOL16 if wide else ATOL, ctx)
        compared += 1
    return Outcome(changed, compared, exact)
