"""Levels 0-5 as XLA defines them, on host candidates with planted failures."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.autotune import AutotuneCheckFailure, AutotuneError, FailureKind

from .util import (FailingCandidate, PlantedProvider, add_one, conv_module, gemm_module,
                   interpreter_outputs, pick, selected, session, write_before_start,
                   write_past_end)

WRONG = ("planted-wrong", add_one, 1.0)          # the fastest, and wrong
OOB = ("planted-oob", write_past_end, 0.5)       # the fastest, writes past its output
OOB_LHS = ("planted-oob-lhs", write_before_start, 0.5)


def failures(sess) -> dict:
    """candidate name -> failure kind name (or None) for the last tuned instruction."""
    rec = sess.records[-1]
    return {str(r.key): (r.failure.kind.name if r.failure else None) for r in rec.results}


def test_level0_changes_nothing_and_measures_nothing():
    m = gemm_module()
    before = m.to_text()
    provider = PlantedProvider([WRONG, OOB])
    assert not pick(m, session(provider, level=0))
    assert m.to_text() == before and provider.runs == 0


@pytest.mark.parametrize("planted,algorithm", [(WRONG, "100"), (OOB, "100")])
def test_level1_chooses_the_fastest_even_if_bad(planted, algorithm):
    m = gemm_module()
    provider = PlantedProvider([planted])
    sess = session(provider, level=1)
    assert pick(m, sess)
    assert selected(m) == [algorithm, algorithm]
    assert all(f is None for f in failures(sess).values())  # no checks at level 1


def test_level4_rejects_the_out_of_bounds_writer():
    m = gemm_module()
    sess = session(PlantedProvider([OOB]), level=4)
    pick(m, sess)
    assert failures(sess)["gemm(algorithm=100)"] == "REDZONE_MODIFIED"
    assert selected(m) == ["0", "0"]          # the fastest clean candidate (cost 10)
    msg = [r for r in sess.records[-1].results if r.failure][0].failure.msg
    assert msg.startswith("Redzone mismatch in RHS redzone of buffer 0x")
    assert "at offset 0; expected ffffffffffffffff but was ffffffff5a5a5a5a." in msg


def test_level4_detects_writes_before_the_buffer():
    m = gemm_module()
    sess = session(PlantedProvider([OOB_LHS]), level=4)
    pick(m, sess)
    rec = sess.records[-1]
    bad = [r for r in rec.results if r.failure]
    assert [r.failure.kind for r in bad] == [FailureKind.REDZONE_MODIFIED]
    assert "LHS redzone" in bad[0].failure.msg and f"offset {256 - 8}" in bad[0].failure.msg


def test_level4_records_a_wrong_result_but_keeps_it_eligible_as_xla():
    """XLA's KeepNonFailures keeps WRONG_RESULT (the reference might be the wrong one):
    at level 4 the wrong candidate is flagged, and still the fastest."""
    m = gemm_module()
    sess = session(PlantedProvider([WRONG]), level=4)
    pick(m, sess)
    rec = sess.records[-1]
    wrong = [r for r in rec.results if str(r.key) == "gemm(algorithm=100)"][0]
    assert wrong.failure.kind == FailureKind.WRONG_RESULT
    assert str(wrong.failure.reference) == "gemm(algorithm=0)"   # the first clean one
    assert selected(m) == ["100", "100"]


def test_level5_drops_wrong_results_and_out_of_bounds_writers():
    m = gemm_module()
    sess = session(PlantedProvider([WRONG, OOB]), level=5)
    pick(m, sess)
    f = failures(sess)
    assert f["gemm(algorithm=100)"] == "DISQUALIFIED"
    assert f["gemm(algorithm=101)"] == "REDZONE_MODIFIED"
    assert selected(m) == ["0", "0"]
    assert sess.stats.failed_candidates == {"DISQUALIFIED": 2, "REDZONE_MODIFIED": 2}


def test_real_candidates_agree_and_the_module_still_computes_the_same():
    m = gemm_module()
    expected = interpreter_outputs(m)
    sess = session(PlantedProvider(costs={"host-gemm-split-k-2": 3.0}), level=5)
    pick(m, sess)
    assert selected(m) == ["1", "1"]      # split-K by 2, made the cheapest
    assert all(r.failure is None for rec in sess.records for r in rec.results)
    np.testing.assert_allclose(interpreter_outputs(m)[0], expected[0], rtol=1e-5)


def test_levels_2_and_3_initialize_buffers():
    seen = []

    class Spy:
        key = None
        name = "spy"
        scratch_bytes = 0

        def __init__(self, key):
            self.key = key

        def run(self, inputs, outputs, scratch):
            seen.append((inputs[0].read().copy(), outputs[0].read().copy()))
            outputs[0].write(np.full(outputs[0].nbytes, 7, np.uint8))

    from hlo_opt.autotune.results import CandidateKey

    def spies(level):
        seen.clear()
        provider = PlantedProvider([Spy(CandidateKey.gemm(0)), Spy(CandidateKey.gemm(1))],
                                   only_planted=True, costs={"spy": 1.0})
        m = gemm_module()
        pick(m, session(provider, level=level))
        return list(seen)

    s1 = spies(1)
    assert not s1[0][0].any()                          # level 1: zero buffers
    s2 = spies(2)
    assert s2[0][0].any()                              # level 2: random inputs
    assert (s2[2][1] == 7).all()                       # ... outputs keep the last write
    s3 = spies(3)
    assert not (s3[2][1] == 7).all()                   # level 3: outputs re-initialized
    assert (s3[2][1] == s3[0][1]).all()                # ... to the same contents


def test_crash_on_verification_failures():
    for planted in (WRONG, OOB):
        m = gemm_module()
        sess = session(PlantedProvider([planted]), level=4, crash_on_check_failure=True)
        with pytest.raises(AutotuneCheckFailure, match="xla_gpu_crash_on_verification_failures"):
            pick(m, sess, xla_gpu_crash_on_verification_failures=True)


def test_disqualified_candidates_and_gemm_fallback():
    from hlo_opt.autotune.results import CandidateKey
    m = gemm_module()
    before = m.to_text()
    sess = session(PlantedProvider([FailingCandidate(CandidateKey.gemm(5))], only_planted=True))
    assert not pick(m, sess)        # every candidate failed: gemm keeps its default
    assert m.to_text() == before
    assert len(sess.stats.warnings) == 2 and "Failed to find best cuBLAS algorithm" in \
        sess.stats.warnings[0]
    assert "DISQUALIFIED Profiling failure on broken: launch failed" in sess.stats.warnings[0]


def test_strict_conv_algorithm_picker():
    from hlo_opt.autotune.results import CandidateKey
    broken = [FailingCandidate(CandidateKey.cudnn(3))]
    m = conv_module()
    with pytest.raises(AutotuneError, match="xla_gpu_strict_conv_algorithm_picker=false"):
        pick(m, session(PlantedProvider(broken, only_planted=True)),
             "gpu-conv-algorithm-picker")
    m = conv_module()
    before = m.to_text()
    sess = session(PlantedProvider(broken, only_planted=True),
                   strict_conv_algorithm_picker=False)
    assert not pick(m, sess, "gpu-conv-algorithm-picker",
                    xla_gpu_strict_conv_algorithm_picker=False)
    assert m.to_text() == before
    assert "convolution performance may be suboptimal" in sess.stats.warnings[0]


def test_conv_picker_rejects_planted_failures_and_writes_the_algorithm():
    m = conv_module()
    sess = session(PlantedProvider([WRONG, OOB]), level=5)
    assert pick(m, sess, "gpu-conv-algorithm-picker")
    f = failures(sess)
    assert f["algorithm(algo_id=100)"] == "DISQUALIFIED"
    assert f["algorithm(algo_id=101)"] == "REDZONE_MODIFIED"
    text = m.to_text()
    assert '"algorithm":{"algo_id":"0","math_type":"DEFAULT_MATH"' in text


def test_conv_scratch_is_resized_as_xla():
    from hlo_opt.autotune.results import CandidateKey

    class WithScratch:
        key = CandidateKey.cudnn(7)
        name = "scratchy"
        scratch_bytes = 96

        def __init__(self, base):
            self.base = base

        def run(self, inputs, outputs, scratch):
            assert scratch is not None and scratch.nbytes == 96
            self.base.run(inputs, outputs, None)

    class P(PlantedProvider):
        def candidates(self, inst):
            base = super(PlantedProvider, self).candidates(inst)[0]
            return [self._wrap(WithScratch(base), 1.0)]

    m = conv_module()
    expected = interpreter_outputs(m)
    pick(m, session(P(), level=4), "gpu-conv-algorithm-picker")
    calls = [i for i in m.entry.instructions if i.opcode == "custom-call"]
    assert calls[0].shape.to_text() == "(f32[1,8,8,8]{3,2,1,0}, u8[96]{0})"
    assert calls[0].name == "cudnn-conv" and '"workspace_size":"96"' in calls[0].attrs["backend_config"]
    np.testing.assert_allclose(interpreter_outputs(m)[0], expected[0], rtol=1e-5)


def test_max_solutions_and_determinism():
    m = gemm_module()
    provider = PlantedProvider([WRONG])
    sess = session(provider, level=1, max_solutions=1)
    pick(m, sess)
    assert selected(m) == ["0", "0"] and len(sess.records[-1].results) == 1
    m = gemm_module()
    sess = session(PlantedProvider([WRONG]), level=1, deterministic=True)
    pick(m, sess)
    assert selected(m) == ["0", "0"]          # first non-failing, not the fastest


def test_default_redzone_is_xlas_8_mib():
    m = gemm_module()
    sess = session(PlantedProvider([OOB]), level=4, redzone=8 * 1024 * 1024)
    pick(m, sess)
    assert failures(sess)["gemm(algorithm=100)"] == "REDZONE_MODIFIED"


def test_progress_callback_counts_instructions_and_candidates():
    events = []
    m = gemm_module()
    sess = session(PlantedProvider([WRONG]), level=4)
    sess.progress = events.append
    pick(m, sess)
    done = [(e.done, e.total) for e in events]
    assert done[-1] == (2, 2) and (1, 2) in done
    assert max(e.candidates for e in events) == 8       # 4 candidates x 2 gemms


def test_gemm_workspace_is_not_compared():
    """A gemm's workspace holds whatever the algorithm left there (XLA compares only the
    result): a candidate scribbling in it is not WRONG_RESULT."""
    def scribble(inst, outputs):
        outputs[-1].write(np.full(outputs[-1].nbytes, 0x7F, np.uint8))
    m = gemm_module()
    sess = session(PlantedProvider([("scribbler", scribble, 1.0)]), level=5)
    pick(m, sess)
    assert all(r.failure is None for r in sess.records[-1].results)
    assert selected(m) == ["100", "100"]
