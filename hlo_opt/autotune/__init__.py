"""The autotuner: XLA's ``--xla_gpu_autotune_level`` semantics, redzone and result checks,
and result caches, independent of any backend (a backend supplies a
:class:`~hlo_opt.autotune.candidates.CandidateProvider`).

``config`` levels and flags; ``candidates`` the provider protocol; ``redzone`` / ``buffers``
guarded buffers; ``compare`` XLA's BufferComparator; ``tuner`` the measuring loop and
PickBestResult; ``cache`` / ``serialize`` / ``proto`` the in-memory cache, results files and
the per-fusion directory; ``session`` one compilation's tuning (what the passes call);
``host_provider`` numpy candidates for the gemm and convolution custom calls.
"""
from .cache import PROCESS_CACHE, AutotuneCacheKey, ResultCache
from .candidates import Candidate, CandidateError, CandidateProvider, measure_wall
from .config import (CACHE_MODE_READ, CACHE_MODE_UPDATE, AutotuneConfig, AutotuneError)
from .results import AutotuneResult, CandidateKey, Failure, FailureKind, TuningRecord
from .session import AutotuneProgress, AutotuneSession, AutotuneStats, session_for
from .tuner import AutotuneCheckFailure, pick_best_result, tune_candidates

__all__ = ["PROCESS_CACHE", "AutotuneCacheKey", "ResultCache", "Candidate", "CandidateError",
           "CandidateProvider", "measure_wall", "CACHE_MODE_READ", "CACHE_MODE_UPDATE",
           "AutotuneConfig", "AutotuneError", "AutotuneResult", "CandidateKey", "Failure",
           "FailureKind", "TuningRecord", "AutotuneProgress", "AutotuneSession",
           "AutotuneStats", "session_for", "AutotuneCheckFailure",
           "pick_best_result", "tune_candidates"]
