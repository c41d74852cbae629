"""--ray: rows as Ray tasks on a private local instance (loopback only) give the same
statuses and kernel counts as the rows run here."""
from __future__ import annotations

import pytest

from hlo_opt.flags import DebugOptions
from hlo_opt.triage.ablate import AblateSettings, Sweep
from hlo_opt.triage.executors import RAY_LOCAL_ENV, RayExecutor, SerialExecutor

from .factories import ExpandFoo, Listed
from .test_ablate import HLO

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'hlo-opt[ray]')")


def test_ray_rows_equal_local_rows(monkeypatch):
    for key in RAY_LOCAL_ENV:
        monkeypatch.delenv(key, raising=False)
    factory = Listed(ExpandFoo, "algsimp", "test-only-miscompile", "cse", "dce")
    settings = AblateSettings(repeat=1, warmup=0)

    def run(executor):
        return Sweep(HLO, "ablate.hlo", factory, DebugOptions(), settings).run(executor)

    local = run(SerialExecutor())
    remote = run(RayExecutor("local", jobs=2))
    assert not ray.is_initialized()  # the instance it started is gone
    import os
    assert {k: os.environ.get(k) for k in RAY_LOCAL_ENV} == RAY_LOCAL_ENV

    def facts(doc):
        return [(r["pass"], r["status"], r["kernels"]) for r in doc["passes"]]
    assert facts(remote) == facts(local)
    ran = [r for r in remote["passes"] if r["times_s"]]
    assert ran and all(r["host"] and r["device"] for r in ran)
