"""`hlo-opt run`: inputs, outputs, comparisons, exit codes."""
from __future__ import annotations

import subprocess
import sys
import types

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from hlo_opt.cli import main
from hlo_opt.errors import HloError
from tests.conftest import ROOT

SOFTMAX = str(ROOT / "sample_modules" / "softmax.hlo")
SOFTMAX_NPZ = str(ROOT / "tests" / "fixtures" / "softmax.npz")

BF16 = """HloModule b
ENTRY e {
  %x = bf16[3] parameter(0)
  %y = bf16[3] add(%x, %x)
  %c = f32[3] convert(%x)
  ROOT %t = (bf16[3], f32[3]) tuple(%y, %c)
}"""


def invoke(*args):
    return CliRunner().invoke(main, ["run", *map(str, args)])


def test_inputs_and_outputs_npz_match_the_fixture(tmp_path):
    out = tmp_path / "out.npz"
    r = invoke(SOFTMAX, "--inputs", SOFTMAX_NPZ, "--outputs", out)
    assert r.exit_code == 0, r.output
    assert "wrote 1 output(s)" in r.output
    with np.load(out) as got, np.load(SOFTMAX_NPZ) as ref:
        assert got.files == ["out0"]
        np.testing.assert_allclose(got["out0"], ref["out0"], rtol=1e-5, atol=1e-6)


def test_random_inputs_are_seeded(tmp_path):
    paths = [tmp_path / f"{k}.npz" for k in ("a", "b", "c")]
    for p, seed in zip(paths, (3, 3, 4)):
        assert invoke(SOFTMAX, "--random-inputs", "--seed", seed, "--outputs", p).exit_code == 0
    a, b, c = (np.load(p)["out0"] for p in paths)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_compare_prints_a_table_and_passes(tmp_path):
    r = invoke(SOFTMAX, "--compare", "interpreter", "--iterations", 3)
    assert r.exit_code == 0, r.output
    for word in ("out0", "f32[32,1024]", "max abs error", "PASS", "run 2", "3/3 runs passed"):
        assert word in r.output


def test_compare_failure_exits_1(monkeypatch):
    class Perturbed:
        def __init__(self, module):
            from hlo_opt.backends.interpreter import Interpreter
            self.inner = Interpreter(module)

        def run(self, args):
            return [v + np.float32(0.01) for v in self.inner.run(args)]
    fake = types.ModuleType("hlo_opt.backends.cpu")
    fake.compile = lambda module, **kw: Perturbed(module)
    monkeypatch.setitem(sys.modules, "hlo_opt.backends.cpu", fake)
    r = invoke(SOFTMAX, "--backend", "cpu", "--compare", "interpreter")
    assert r.exit_code == 1
    assert "FAIL" in r.output
    loose = invoke(SOFTMAX, "--backend", "cpu", "--compare", "interpreter",
                   "--abs_error_bound", "0.02")
    assert loose.exit_code == 0, loose.output


def test_passes_then_compare_with_unoptimized():
    r = invoke(SOFTMAX, "--passes", "dce", "--compare", "unoptimized")
    assert r.exit_code == 0, r.output
    assert "interpreter vs interpreter (unoptimized)" in r.output


def test_passes_not_available(monkeypatch):
    monkeypatch.setitem(sys.modules, "hlo_opt.passes_api", None)
    r = invoke(SOFTMAX, "--passes", "dce")
    assert isinstance(r.exception, HloError)
    assert "passes not available" in str(r.exception)


@pytest.mark.parametrize("make,message", [
    (lambda d: d / "missing.npz", "no such file"),
    (lambda d: (d / "junk.npz").write_text("not a zip") and d / "junk.npz",
     "not a readable .npz"),
    (lambda d: _npz(d, arg0=np.zeros((32, 1024), np.float32),
                    arg1=np.zeros(1, np.float32)), "unexpected arg1"),
    (lambda d: _npz(d, x=np.zeros(3)), "missing arg0"),
    (lambda d: _npz(d, arg0=np.zeros((3, 3), np.float32)), r"shape \[3, 3\] does not match"),
    (lambda d: _npz(d, arg0=np.zeros((32, 1024), np.complex64)), "cannot feed"),
])
def test_bad_inputs_are_clean_errors(tmp_path, make, message):
    r = invoke(SOFTMAX, "--inputs", make(tmp_path))
    assert isinstance(r.exception, HloError), r.output
    import re
    assert re.search(message, str(r.exception))


def _npz(directory, **arrays):
    path = directory / "in.npz"
    np.savez(path, **arrays)
    return path


def test_bf16_inputs_as_floats_bits_or_bf16_and_outputs(tmp_path):
    module = tmp_path / "b.hlo"
    module.write_text(BF16)
    values = np.array([1.0, 1 + 2**-8, -3.5], np.float32)  # 1+2^-8 rounds to 1.0
    as_bf16 = values.astype(ml_dtypes.bfloat16)
    for feed in (values, as_bf16, as_bf16.view(np.uint16)):
        inp = _npz(tmp_path, arg0=feed)
        out = tmp_path / "o.npz"
        assert invoke(module, "--inputs", inp, "--outputs", out).exit_code == 0
        with np.load(out) as got:
            assert got["out0"].dtype == np.float32
            assert got["out0"].tolist() == [2.0, 2.0, -7.0]
            assert got["out1"].tolist() == [1.0, 1.0, -3.5]
    raw = tmp_path / "raw.npz"
    assert invoke(module, "--inputs", inp, "--outputs", raw, "--raw-bits").exit_code == 0
    with np.load(raw) as got:
        assert got["out0"].dtype == np.uint16
        assert got["out0"].tolist() == [0x4000, 0x4000, 0xC0E0]
        assert got["out1"].dtype == np.float32  # f32 outputs are unaffected


def test_print_literals(tmp_path):
    module = tmp_path / "b.hlo"
    module.write_text(BF16)
    r = invoke(module, "--print-literals", "--seed", 1)
    assert r.exit_code == 0
    assert "input arg0: bf16[3]" in r.output and "output out1: f32[3]" in r.output


def test_unknown_backend_and_bad_flags():
    r = invoke(SOFTMAX, "--backend", "tpu")
    assert isinstance(r.exception, HloError) and "unknown backend 'tpu'" in str(r.exception)
    r = invoke(SOFTMAX, "--inputs", SOFTMAX_NPZ, "--random-inputs")
    assert r.exit_code != 0 and "cannot be used together" in r.output


def test_console_script_prints_one_line_and_exits_1(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", "from hlo_opt.cli import run; run()", "run", SOFTMAX,
         "--inputs", str(tmp_path / "nope.npz")],
        capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("nope.npz: error: no such file")
    assert "Traceback" not in proc.stderr
