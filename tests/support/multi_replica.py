"""The differential check for passes on modules with collectives: the interpreter runs
the module on every replica / partition (``execute_replicated``) before and after the
pass, on seeded random inputs that differ per device, and the results must agree on
every device.  Everything else is ``harness.check_pass``'s: the pipeline runner (verifier
after each changing pass, ``--verify-no-change``) and the canonical-text round trip.

    from tests.support.multi_replica import check_pass_replicated
    result = check_pass_replicated(load_text(HLO), "all-reduce-folder", num_replicas=8)
    assert result.changed
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from hlo_opt.api import parse_hlo
from hlo_opt.errors import UnsupportedError
from hlo_opt.flags import DebugOptions
from hlo_opt.pipeline import PipelineRunner

from tests.support.harness import CheckResult, _as_pipeline, assert_close, random_args

__all__ = ["check_pass_replicated", "device_args", "run_replicated"]


def device_args(module, num_devices: int, seed: int) -> list | None:
    """One argument list per device, each from its own seed."""
    out = []
    for d in range(num_devices):
        args = random_args(module, seed * 1009 + d)
        if args is None:
            return None
        out.append(args)
    return out


def run_replicated(module, args_per_device, num_replicas=None, num_partitions=None,
                   skip_unsupported: bool = False):
    """Every device's result leaves; an UnsupportedError skips the test when
    ``skip_unsupported`` (for modules from elsewhere), else it fails it."""
    from hlo_opt.backends.interpreter import execute_replicated
    try:
        outs = execute_replicated(module, args_per_device, num_replicas=num_replicas,
                                  num_partitions=num_partitions, timeout=60)
    except UnsupportedError as e:
        if not skip_unsupported:
            raise
        import pytest
        pytest.skip(f"interpreter cannot run this module: {e}")
    return [[np.asarray(x) for x in o] for o in outs]


def check_pass_replicated(module, passes, *, num_replicas: int | None = None,
                          num_partitions: int | None = None,
                          seeds: Iterable[int] = (0, 1), rtol: float = 1e-5,
                          atol: float = 1e-5, options: DebugOptions | None = None,
                          skip_unsupported: bool = False) -> CheckResult:
    """Run ``passes`` on a copy of ``module``; check the verifier / no-silent-change /
    round trip, then compare every device's results before and after.  Replica and
    partition counts come from the module header, else the arguments."""
    from hlo_opt.backends.interpreter.replicas import device_counts
    work = module.clone()
    before_text = module.to_text()
    runner = PipelineRunner(options, verify_no_change=True)  # None: the module's config
    changed = runner.run(_as_pipeline(passes), work)
    after_text = work.to_text()
    assert parse_hlo(after_text, "<after pass>").to_text() == after_text, \
        "printing the result is not canonical"
    if not changed:
        assert after_text == before_text, "pass reported no change but the text changed"
    result = CheckResult(changed, before_text, after_text, work)
    if not changed:
        result.notes.append("not compared: the module did not change")
        return result
    r, p = device_counts(module, num_replicas, num_partitions)
    for seed in seeds:
        args = device_args(module, r * p, seed)
        assert args is not None, "no generatable inputs"
        expected = run_replicated(module, args, r, p, skip_unsupported)
        actual = run_replicated(work, args, r, p, skip_unsupported)
        for d, (e, a) in enumerate(zip(expected, actual)):
            assert_close(e, a, rtol, atol, f"{module.name} seed {seed} device {d}")
        result.compared_runs += 1
    return result
