"""scripts/kernel_table.py: the rows are measured, not made up."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from hlo_opt.flags import DebugOptions

ROOT = Path(__file__).resolve().parents[3]


def _script():
    spec = importlib.util.spec_from_file_location("kernel_table", ROOT / "scripts" /
                                                  "kernel_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rows_for_samples():
    kt = _script()
    paths = [ROOT / "sample_modules" / f"{n}.hlo" for n in ("matmul_bias_gelu", "softmax")]
    rows = {r["module"]: r for r in kt.collect(paths, "gpu", DebugOptions())}
    gelu = rows["matmul_bias_gelu"]
    # one cuBLASLt call with the bias + GELU epilogue (XLA:GPU's output), no fusion
    assert (gelu["library_calls"], gelu["fusions"], gelu["unfused"]) == (1, 0, 0)
    assert gelu["bytes_after"] < gelu["bytes_before"] / 4
    soft = rows["softmax"]
    assert soft["kernels_after"] < soft["kernels_before"]
    table = kt.markdown(list(rows.values()))
    assert "| matmul_bias_gelu |" in table and "total (2 modules)" in table
