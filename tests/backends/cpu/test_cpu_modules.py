"""The CPU backend against the interpreter: every sample module and every corpus module
the interpreter runs, on seeded random inputs, with ``run --compare`` semantics (XLA's
error bounds; integers and preds exact).  Compiles go through the disk cache
(``$HLO_OPT_CACHE_DIR`` or ``.hlo_opt_test_cache/`` in the checkout), so a second run
skips LLVM."""
from __future__ import annotations

import os

import numpy as np
import pytest

from hlo_opt.api import load
from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import compare_results, random_arguments, result_shapes
from hlo_opt.errors import HloError
from hlo_opt.text.parser import parse_hlo_modules
from tests.conftest import ROOT, corpus_files, require_corpus, sample_files

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402

CACHE = os.environ.get("HLO_OPT_CACHE_DIR") or str(ROOT / ".hlo_opt_test_cache")
MAX_BYTES = 256 << 20
ABS, REL = 1e-3, 1e-3
FIXTURES = ROOT / "tests" / "fixtures"


def _check(module, args):
    expected = Interpreter(module).run(args)
    exe = CpuExecutable(module, cache_dir=CACHE)
    got = exe.run(args)
    rows = compare_results(got, expected, result_shapes(module), ABS, REL)
    bad = [r for r in rows if not r.ok]
    assert not bad, f"{module.name}: " + "; ".join(
        f"out{r.index} {r.shape}: {r.mismatches} mismatches, max abs {r.max_abs:.3g} "
        f"{r.note}" for r in bad)
    return exe


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_sample_module_matches_interpreter(path):
    module = load(str(path))
    exe = _check(module, random_arguments(module, seed=0))
    # the fixtures' inputs too (XLA-computed; the interpreter matches them)
    fixture = FIXTURES / f"{path.stem}.npz"
    if fixture.exists():
        with np.load(fixture) as data:
            keys = sorted((k for k in data.files if k.startswith("arg")),
                          key=lambda k: int(k[3:]))
            args = [data[k] for k in keys]
        expected = Interpreter(module).run(args)
        rows = compare_results(exe.run(args), expected, result_shapes(module), ABS, REL)
        assert all(r.ok for r in rows)


def _corpus_modules():
    out = []
    for p in corpus_files():
        try:
            mods = parse_hlo_modules(p.read_text(encoding="utf-8"), str(p))
        except HloError:
            continue
        out.extend(pytest.param(p, i, id=f"{p.name}#{i}" if len(mods) > 1 else p.name)
                   for i in range(len(mods)))
    return out or [pytest.param(None, 0, id="no-corpus")]


@pytest.mark.parametrize("path,index", _corpus_modules())
def test_corpus_module_matches_interpreter(path, index):
    require_corpus()
    if path is None:
        pytest.skip("corpus is empty")
    module = parse_hlo_modules(path.read_text(encoding="utf-8"), str(path))[index]
    biggest = max([p.shape.byte_size() for p in module.entry.parameters] +
                  [i.shape.byte_size() for i in module.instructions()])
    if biggest > MAX_BYTES:
        pytest.skip(f"arrays of {biggest >> 20} MiB are too large for a unit test")
    args = random_arguments(module, seed=0)
    try:
        Interpreter(module).run(args)
    except HloError as e:
        pytest.skip(f"the interpreter does not run this module: {str(e).splitlines()[0][:120]}")
    _check(module, args)


def _passes_fingerprint():
    import passes
    from hlo_opt.fileutil import source_fingerprint
    return source_fingerprint(os.path.dirname(passes.__file__))


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_sample_module_through_the_cpu_pipeline(path):
    """XLA's CPU pipeline (cpu-instruction-fusion, cpu-layout-assignment, ...) then the
    backend, against the interpreter on the module as written."""
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    module = load(str(path))
    args = random_arguments(module, seed=1)
    expected = Interpreter(module).run(args)
    exe = CpuExecutable(module.clone(), cache_dir=CACHE,
                        prepare=lambda m: passes_api.optimize(m, DebugOptions(),
                                                              pipeline="cpu"),
                        prepare_key="pipeline=cpu;" + _passes_fingerprint())
    assert any(i.opcode == "fusion" for i in exe.module.instructions()) or \
        path.stem in ("sort", "while_loop", "conditional", "scatter_gather")
    rows = compare_results(exe.run(args), expected, result_shapes(module), ABS, REL)
    assert all(r.ok for r in rows), [(r.index, r.mismatches, r.note) for r in rows]
