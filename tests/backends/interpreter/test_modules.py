"""Real modules: the sample modules against XLA-computed fixtures, and the corpus on
random inputs."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import load
from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.errors import HloError, UnsupportedError
from hlo_opt.text.parser import parse_hlo_modules
from tests.conftest import ROOT, corpus_files, require_corpus, sample_files

FIXTURES = ROOT / "tests" / "fixtures"

# Float tolerances against XLA:CPU (its reductions and fusions round differently).
TOLERANCE = {"mobilenet_cluster": (1e-4, 1e-4)}
DEFAULT_TOLERANCE = (1e-5, 1e-5)  # (rtol, atol)

# Opcodes whose handlers live in the heavy-opcode files (ops_*.py), written separately.
HEAVY_OPCODES = frozenset({
    "gather", "scatter", "convolution", "fft", "sort", "topk", "reduce-window",
    "select-and-scatter", "batch-norm-training", "batch-norm-inference", "batch-norm-grad",
    "rng", "rng-bit-generator", "rng-get-and-update-state", "cholesky", "triangular-solve",
    "custom-call"})
MAX_ARGUMENT_BYTES = 256 << 20


def _numbered(data, prefix):
    keys = sorted((k for k in data.files if k.startswith(prefix) and k[len(prefix):].isdigit()),
                  key=lambda k: int(k[len(prefix):]))
    return [data[k] for k in keys]


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_sample_module_matches_xla(path):
    fixture = FIXTURES / f"{path.stem}.npz"
    assert fixture.exists(), f"missing fixture {fixture}"
    module = load(str(path))
    with np.load(fixture) as data:
        args, expected = _numbered(data, "arg"), _numbered(data, "out")
    got = Interpreter(module, always_check=True).run(args)
    assert len(got) == len(expected)
    rtol, atol = TOLERANCE.get(path.stem, DEFAULT_TOLERANCE)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape and g.dtype == e.dtype, f"out{i}"
        if np.issubdtype(e.dtype, np.floating):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"out{i}")
        else:  # integers and preds: bit for bit
            assert np.array_equal(g, e), f"out{i}"


def _corpus_modules():
    out = []
    for p in corpus_files():
        try:
            mods = parse_hlo_modules(p.read_text(encoding="utf-8"), str(p))
        except HloError:
            continue  # the parser tests own parse failures
        out.extend(pytest.param(p, i, id=f"{p.name}#{i}" if len(mods) > 1 else p.name)
                   for i in range(len(mods)))
    return out or [pytest.param(None, 0, id="no-corpus")]


@pytest.mark.parametrize("path,index", _corpus_modules())
def test_corpus_module_runs_on_random_inputs(path, index):
    require_corpus()
    if path is None:
        pytest.skip("corpus is empty")
    module = parse_hlo_modules(path.read_text(encoding="utf-8"), str(path))[index]
    arg_bytes = sum(p.shape.byte_size() for p in module.entry.parameters)
    biggest = max(i.shape.byte_size() for i in module.instructions())
    if max(arg_bytes, biggest) > MAX_ARGUMENT_BYTES:
        pytest.skip(f"arrays of {max(arg_bytes, biggest) >> 20} MiB are too large for a "
                    "unit test")
    args = random_arguments(module, seed=0)
    try:
        results = Interpreter(module, always_check=True).run(args)
    except UnsupportedError as e:
        inst = getattr(e, "instruction", None)
        if "replicas; the interpreter runs one" in str(e):
            pytest.xfail(f"multi-device collective %{inst.name if inst else '?'} cannot run "
                         "on one replica")
        if inst is not None and inst.opcode == "custom-call":
            pytest.xfail(f"custom-call target '{inst.custom_call_target}' is not supported "
                         "by the interpreter (heavy opcodes, ops_custom_call.py)")
        if inst is not None and inst.opcode in HEAVY_OPCODES:
            pytest.xfail(f"heavy opcode {inst.opcode} (ops_*.py) is not supported yet: "
                         f"{str(e).splitlines()[0][-100:]}")
        raise
    except HloError as e:
        if "produced a wrong value" in str(e) and _invalid(module):
            pytest.skip(f"the module is not valid HLO: {_invalid(module)}")
        raise
    assert len(results) == len(module.entry.root.shape.leaves())


def _invalid(module) -> str:
    """Why the module fails the verifier ('' when it passes or none is available)."""
    try:
        from hlo_opt.api import verify
        verify(module)
    except HloError as e:
        return str(e).splitlines()[0][:160]
    except Exception:  # noqa: BLE001 - a verifier still being written is no verdict
        return ""
    return ""
