"""scripts/device_libs_libs.py without a GPU: its cases run under cuda-sim (library thunks
as host calls), so the script's modules, inputs, references and report are checked on
every machine; ``run`` itself says why it skips."""
from __future__ import annotations

import importlib.util

import pytest

from tests.backends.cuda.support import require_gxx
from tests.conftest import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("device_libs_libs",
                                                  ROOT / "scripts" / "device_libs_libs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("case", ["fft", "cholesky", "cholesky-gpu-pipeline", "trsm",
                                  "trsm-gpu-pipeline", "not-pd", "not-pd-gpu-pipeline"])
def test_cases_pass_under_cuda_sim(case):
    require_gxx()
    s = _script()
    text, pipeline = {"fft": (s.FFT_SMALL, None),
                      "cholesky": (s._chol("f64", [3, 16, 16], False, "chol"), None),
                      "cholesky-gpu-pipeline": (s._chol("f32", [2, 8, 8], True, "c"), "gpu"),
                      "trsm": (s._trsm_module(), None),
                      "trsm-gpu-pipeline": (s._trsm_module(), "gpu"),
                      "not-pd": (s._chol("f32", [4, 8, 8], True, "c"), None),
                      "not-pd-gpu-pipeline": (s._chol("f64", [4, 8, 8], False, "c"), "gpu")}[case]
    lines = []
    make = s._not_positive_definite if case.startswith("not-pd") else None
    assert s._case(lines.append, case.split("-")[0], text, pipeline, backend="cuda-sim",
                   make_args=make), lines
    assert lines and all("MISMATCH" not in x for x in lines)
    print("\n".join(lines))


def test_numpy_reference_of_the_big_choleskys():
    import numpy as np
    s = _script()
    a = np.array([[4.0, 2.0], [2.0, 5.0]])
    (low,) = s._numpy_cholesky(True)([a])
    (up,) = s._numpy_cholesky(False)([a])
    np.testing.assert_allclose(low @ low.T, a)
    np.testing.assert_allclose(up.T @ up, a)


def test_run_says_why_without_a_device():
    lines = []
    _script().run(lines.append)
    assert len(lines) == 1 and lines[0].startswith("libs: ") or \
        pytest.skip("a CUDA device is present: the probe ran")
