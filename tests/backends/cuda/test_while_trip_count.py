"""A while loop with a known trip count (while-loop-trip-count-annotator's
``known_trip_count``) runs its body that many times and never its condition, as XLA's
WhileThunk with a trip count: no predicate read back per iteration."""
from __future__ import annotations

import numpy as np

from hlo_opt.api import load, parse_hlo
from tests.backends.cuda.support import require_gxx
from tests.conftest import SAMPLES


def _profiled_run(module, args):
    from hlo_opt.backends.cuda_sim import SimExecutable
    exe = SimExecutable(module)
    runner = exe.runner(profile=True)
    out = runner.run(args)
    return out, {name: v[1] for (name, _), v in runner.times.items()}


def test_known_trip_count_skips_the_condition():
    require_gxx()
    from hlo_opt.backends import compile as compile_module
    m = load(str(SAMPLES / "while_loop.hlo"))           # known_trip_count n=10
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    out, calls = _profiled_run(m, [x])
    np.testing.assert_array_equal(out[0], compile_module(m, "interpreter").run([x])[0])
    cond_kernels = [n for n in calls if "compare" in n]
    assert not cond_kernels, calls
    assert max(calls.values()) == 10, calls


def test_without_a_trip_count_the_condition_decides():
    require_gxx()
    text = (SAMPLES / "while_loop.hlo").read_text().replace(
        ', backend_config={"known_trip_count":{"n":"10"}}', "")
    m = parse_hlo(text)
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    out, calls = _profiled_run(m, [x])
    assert any("compare" in n for n in calls) and max(calls.values()) == 11, calls
