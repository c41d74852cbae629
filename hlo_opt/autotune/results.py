"""Per-candidate outcomes, shaped as XLA's ``AutotuneResult`` (``xla/autotuning.proto``).

A result names its candidate by one ``key`` (the proto's ``oneof key``):

* ``("gemm", {"algorithm": N})`` -- a cuBLAS / cuBLASLt algorithm (for cuBLASLt, N is the
  index into the heuristic's list, as XLA stores it);
* ``("algorithm", {"algo_id": N, ...})`` -- a cuDNN engine (``stream_executor.dnn.AlgorithmProto``);
* ``("other", {"name": "..."})`` -- XLA's ``BackendConfigKey``: our own kernels (NVRTC gemm
  tiles, launch configurations) by their stable name.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace


class FailureKind(enum.IntEnum):
    UNKNOWN = 0
    REDZONE_MODIFIED = 1  # wrote memory outside its buffers
    WRONG_RESULT = 2      # differs from the reference candidate
    DISQUALIFIED = 3      # failed to run, known-bad, or (level 5) wrong


@dataclass(frozen=True)
class CandidateKey:
    kind: str                      # "gemm" | "algorithm" | "other"
    fields: tuple = ()             # sorted (name, value) pairs

    @classmethod
    def gemm(cls, algorithm: int) -> "CandidateKey":
        return cls("gemm", (("algorithm", int(algorithm)),))

    @classmethod
    def cudnn(cls, algo_id: int, **extra) -> "CandidateKey":
        return cls("algorithm", tuple(sorted({"algo_id": int(algo_id), **extra}.items())))

    @classmethod
    def other(cls, name: str) -> "CandidateKey":
        return cls("other", (("name", str(name)),))

    def get(self, name: str, default=None):
        return dict(self.fields).get(name, default)

    def __str__(self) -> str:
        inner = " ".join(f"{k}={v}" for k, v in self.fields)
        return f"{self.kind}({inner})"


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    msg: str = ""
    reference: CandidateKey | None = None   # WRONG_RESULT: what it was compared with
    buffer_address: int = 0


@dataclass(frozen=True)
class AutotuneResult:
    key: CandidateKey | None = None
    run_time_s: float | None = None          # None: not measured
    scratch_bytes: int = 0
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    def with_failure(self, kind: FailureKind, msg: str = "", **kw) -> "AutotuneResult":
        return replace(self, failure=Failure(kind, msg, **kw))


@dataclass
class TuningRecord:
    """Everything measured for one instruction (for logs and tests)."""
    instruction: str
    name: str = ""                           # the instruction's name
    results: list[AutotuneResult] = field(default_factory=list)
    best: AutotuneResult | None = None
    measurements: int = 0                    # candidate executions that were timed
    seconds: float = 0.0
    error: Exception | None = None           # why best is None (NoUsableCandidate)
