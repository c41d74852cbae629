"""Measure candidates and pick one, with XLA's checks per level.

The loop is XLA's ``GemmAutotuner::GetBestAlgorithm`` / ``AutotuneOneConvRunner``:

* a candidate that raises :class:`CandidateError` is ``DISQUALIFIED``;
* level >= 3 re-initializes the outputs before each candidate;
* level >= 4: the redzones of every buffer (and of the candidate's scratch) are checked
  after it ran (``REDZONE_MODIFIED``); the first clean candidate becomes the reference and
  every later one is compared with it (``WRONG_RESULT``; at level 5 ``DISQUALIFIED``);
* ``xla_gpu_crash_on_verification_failures`` turns a redzone or result failure into an
  error at once (XLA CHECK-fails);
* :func:`pick_best_result` keeps results without failure *and* WRONG_RESULT ones (XLA's
  ``KeepNonFailures``: the reference may be the wrong one), takes the first under
  determinism, else the fastest, preferring less scratch among those within 4 us.
"""
from __future__ import annotations

import time
from dataclasses import replace

from .buffers import RedzoneBuffers
from .candidates import Candidate, CandidateError
from .config import AutotuneConfig, AutotuneError
from .redzone import RedzoneAllocator
from .results import AutotuneResult, Failure, FailureKind, TuningRecord

MEASUREMENT_ERROR_S = 4e-6


class AutotuneCheckFailure(AutotuneError):
    """``--xla_gpu_crash_on_verification_failures``: a candidate failed a check."""


class NoUsableCandidate(AutotuneError):
    """No candidate at all, or every one failed (XLA's PickBestResult errors)."""


def _keep_non_failures(results):
    return [r for r in results if r.failure is None or r.failure.kind == FailureKind.WRONG_RESULT]


def pick_best_result(results: list[AutotuneResult], instr: str,
                     deterministic: bool = False) -> AutotuneResult:
    if not results:
        raise NoUsableCandidate(
            f"There are no algorithm candidates for computing {instr}: this likely means "
            "that the instruction shape is not supported by the target GPU library.")
    kept = _keep_non_failures(results)
    if not kept:
        errors = "; ".join(f"{r.key}: {r.failure.kind.name} {r.failure.msg}".rstrip()
                           for r in results)
        raise NoUsableCandidate(f"All algorithms tried for {instr} failed. Falling back to "
                                f"default algorithm. Per-algorithm errors: {errors}")
    if deterministic:
        return kept[0]
    ordered = sorted(kept, key=lambda r: r.run_time_s)
    limit = ordered[0].run_time_s + MEASUREMENT_ERROR_S
    within = [r for r in ordered if r.run_time_s <= limit]
    return min(within, key=lambda r: r.scratch_bytes)


def tune_candidates(candidates: list[Candidate], buffers: RedzoneBuffers,
                    config: AutotuneConfig, measure, instr: str,
                    on_candidate=None) -> TuningRecord:
    """Run ``candidates`` on ``buffers``; returns every result and the chosen one
    (``best`` None and ``error`` set when none is usable)."""
    record = TuningRecord(instr)
    t_start = time.perf_counter()
    if config.max_solutions > 0:
        candidates = candidates[:config.max_solutions]
    reference = None  # (key, name) of the reference candidate
    for cand in candidates:
        if config.should_reinit_output_buffer:
            buffers.reinit_outputs()
        scratch_alloc = RedzoneAllocator(buffers.allocator.memory, config.redzone_size)
        try:
            reference = _run_one(cand, scratch_alloc, buffers, config, measure, instr,
                                 on_candidate, record, reference)
        finally:
            scratch_alloc.release()   # the candidate's scratch and its redzones
    try:
        record.best = pick_best_result(record.results, instr, config.deterministic)
    except NoUsableCandidate as e:
        record.error = e
    record.seconds = time.perf_counter() - t_start
    return record


def _run_one(cand, scratch_alloc, buffers, config, measure, instr, on_candidate, record,
             reference):
    """One candidate: measured, checked as the level says, its result appended to
    ``record``; returns the reference (key, name), set by the first clean candidate."""
    check = config.should_check_correctness
    scratch = scratch_alloc.allocate_bytes(cand.scratch_bytes) if cand.scratch_bytes else None
    base = AutotuneResult(key=cand.key, scratch_bytes=cand.scratch_bytes)
    try:
        seconds = measure(lambda: cand.run(buffers.inputs, buffers.outputs, scratch))
    except CandidateError as e:
        record.results.append(base.with_failure(
            FailureKind.DISQUALIFIED, f"Profiling failure on {cand.name}: {e}"))
        return reference
    finally:
        if on_candidate is not None:
            on_candidate(cand)
    record.measurements += 1
    result = replace(base, run_time_s=float(seconds))
    if not check:
        record.results.append(result)
        return reference
    rz = buffers.allocator.check_redzones()
    if rz.ok:
        rz = scratch_alloc.check_redzones()
    if not rz.ok:
        msg = rz.failure_msg()
        result = replace(result, failure=Failure(FailureKind.REDZONE_MODIFIED, msg,
                                                 buffer_address=rz.user_buffer_address))
        record.results.append(result)
        if config.crash_on_check_failure:
            raise AutotuneCheckFailure(
                f"Detected out-of-bounds write of {cand.name} ({cand.key}) for {instr}: "
                f"{msg} (--xla_gpu_crash_on_verification_failures)")
        return reference
    if reference is None:
        buffers.keep_reference()
        reference = (cand.key, cand.name)
        record.results.append(result)
        return reference
    bad = [(i, n) for i in buffers.compared_outputs()
           if (n := buffers.mismatches(i, config.rtol))]
    if bad:
        i, n = bad[0]
        kind = (FailureKind.DISQUALIFIED if config.should_skip_wrong_results
                else FailureKind.WRONG_RESULT)
        msg = (f"Results mismatch between {cand.name} and the reference {reference[1]}: "
               f"{n} element(s) of output {i} beyond rtol {config.rtol}")
        result = replace(result, failure=Failure(kind, msg, reference=reference[0],
                                                 buffer_address=buffers.outputs[i].address))
        if config.crash_on_check_failure:
            record.results.append(result)
            raise AutotuneCheckFailure(f"{msg} for {instr} "
                                       "(--xla_gpu_crash_on_verification_failures)")
    record.results.append(result)
    return reference
