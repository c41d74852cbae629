"""batchnorm_expander: the expansions match the interpreter's batch-norm ops (which
implement XLA's semantics directly) on random inputs; positive variances for
inference/grad.  Tolerance: rtol 1e-4 (the expansion rounds differently)."""
import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from passes.batchnorm_expander import BatchNormExpander
from tests.support.harness import assert_close, execute_or_xfail
from tests.support.lit_chunks import chunks
from tests.support.pass_suite import real_modules_test

test_real_modules = real_modules_test(BatchNormExpander, exact=False)


def _args(module, seed):
    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        v = rng.standard_normal(p.shape.dims).astype(np.float32)
        if p.name in ("v",):
            v = np.abs(v) + 0.5  # a variance
        out.append(v)
    return out


@pytest.mark.parametrize("chunk", chunks("batchnorm_expander*.hlo"), ids=lambda c: c.id)
def test_expansion_matches_the_op(chunk):
    m = parse_hlo(chunk.text)
    work = m.clone()
    assert BatchNormExpander().run(work)
    assert not any(i.opcode.startswith("batch-norm") for i in work.instructions())
    from hlo_opt.api import verify
    verify(work)
    for seed in range(3):
        args = _args(m, seed)
        assert_close(execute_or_xfail(m, args), execute_or_xfail(work, args), 1e-4, 1e-4,
                     f"{chunk.name} seed {seed}")


def test_training_mean_and_variance_are_the_batch_statistics():
    m = parse_hlo(next(c for c in chunks("batchnorm_expander*.hlo")
                       if c.name == "expand_training").text)
    BatchNormExpander().run(m)
    x = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)
    out, mean, var = execute_or_xfail(m, [x, np.ones(4, np.float32), np.zeros(4, np.float32)])
    np.testing.assert_allclose(mean, x.mean(axis=(0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, x.var(axis=(0, 2)), rtol=1e-4, atol=1e-5)


def test_only_enabled_forms_are_expanded():
    c = next(c for c in chunks("batchnorm_expander*.hlo") if c.name == "expand_inference")
    m = parse_hlo(c.text)
    assert not BatchNormExpander(rewrite_inference_op=False).run(m)
