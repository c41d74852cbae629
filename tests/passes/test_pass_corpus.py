"""dce, cse, tuple-simplifier, call-inliner, flatten-call-graph and the optimization
pipeline on every sample module and every corpus module: verifier after each change, no
silent changes, canonical re-print, and the interpreter's results before == after."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo_modules
from hlo_opt.errors import HloError
from hlo_opt.verifier import module_errors
from passes.pipelines import build_pipeline

from ..conftest import corpus_files, require_corpus, sample_files
from tests.support.harness import check_pass, fixture_args, with_redundancy

MY_PASSES = ["dce", "cse", "tuple-simplifier", "call-inliner", "flatten-call-graph"]


def _valid_modules(path):
    try:
        modules = parse_hlo_modules(path.read_text(), str(path))
    except HloError as e:
        pytest.skip(f"does not parse (parser's business): {str(e).splitlines()[0]}")
    out = [m for m in modules if not module_errors(m)]
    if not out:
        pytest.skip("no module passes the verifier before any pass runs")
    return out


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_samples(path):
    (module,) = _valid_modules(path)
    extra = [fixture_args(path.stem)]
    for name in MY_PASSES:
        check_pass(module, name, extra_args=extra, rtol=1e-4, atol=1e-5)
    check_pass(module, build_pipeline("optimization"), extra_args=extra, rtol=1e-4, atol=1e-5)


def test_samples_change_something():
    """The passes are not vacuous on the bundled samples."""
    changed = {name: 0 for name in MY_PASSES}
    for path in sample_files():
        (module,) = _valid_modules(path)
        for name in MY_PASSES:
            changed[name] += check_pass(module, name, execute=False).changed
    assert changed["call-inliner"] >= 1  # mlp_train_step calls %relu
    assert changed["dce"] + changed["cse"] + changed["tuple-simplifier"] >= 1


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus(path):
    require_corpus()
    for module in _valid_modules(path):
        for name in MY_PASSES:
            check_pass(module, name, seeds=(0,), rtol=1e-4, atol=1e-5)


def test_corpus_present_or_skipped():
    require_corpus()
    assert len(corpus_files()) > 100


def _redundant_check(module):
    from passes.dce import SideEffects
    variant = with_redundancy(module)
    results = {name: check_pass(variant, name, seeds=(0,), rtol=1e-4, atol=1e-5)
               for name in MY_PASSES}
    assert results["call-inliner"].changed and results["flatten-call-graph"].changed
    assert results["tuple-simplifier"].changed
    optimized = check_pass(variant, build_pipeline("optimization"), seeds=(0,), rtol=1e-4,
                           atol=1e-5).module
    assert not any(i.opcode == "call" for i in optimized.instructions())
    effects = SideEffects()
    if not any(effects.instruction(i) for i in module.instructions()) and not any(
            i.opcode == "call" for i in module.instructions()):
        # both inlined copies merge back into one: nothing is left over compared with
        # optimizing the module itself (expanders in the pipeline may add instructions)
        alone = check_pass(module, build_pipeline("optimization"), seeds=(0,), rtol=1e-4,
                           atol=1e-5, execute=False).module
        assert optimized.instruction_count() <= alone.instruction_count()


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_samples_with_redundancy(path):
    (module,) = _valid_modules(path)
    _redundant_check(module)


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_with_redundancy(path):
    require_corpus()
    for module in _valid_modules(path):
        _redundant_check(module)
