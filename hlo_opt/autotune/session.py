"""One compilation's autotuning: config + provider + caches + counters + progress.

The algorithm-picker passes ask the module's session (``module.config.autotune``, set by
the app layer: :func:`hlo_opt.passes_api.optimize`'s ``autotune=``) to
:meth:`AutotuneSession.autotune` an instruction; the
session looks the result up (memory, then the per-fusion directory), and on a miss
measures the provider's candidates.  Deviceless (no device to measure on), a miss is an
error unless autotuning is off: XLA's rule that deviceless compilation needs
``--xla_gpu_autotune_level=0`` or ``--xla_gpu_load_autotune_results_from``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from .buffers import RedzoneBuffers
from .cache import PROCESS_CACHE, AutotuneCacheKey, ResultCache
from .config import AutotuneConfig, AutotuneError
from .fingerprint import canonical_text
from .results import AutotuneResult, TuningRecord
from .tuner import tune_candidates


@dataclass
class AutotuneStats:
    instructions: int = 0        # instructions the pickers asked about
    tuned: int = 0               # measured here
    cache_hits: int = 0          # answered from memory, a loaded file or the directory
    measurements: int = 0        # candidate runs timed
    failed_candidates: dict = field(default_factory=dict)   # FailureKind name -> count
    seconds: float = 0.0         # time spent measuring
    warnings: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"instructions": self.instructions, "tuned": self.tuned,
                "cache_hits": self.cache_hits, "measurements": self.measurements,
                "failed_candidates": dict(sorted(self.failed_candidates.items())),
                "tuning_ms": round(self.seconds * 1000.0, 3),
                "warnings": list(self.warnings)}


@dataclass
class AutotuneProgress:
    """Sent to the progress callback after each candidate and each instruction."""
    done: int                    # instructions finished
    total: int                   # instructions to tune in this pass run
    candidates: int              # candidates measured so far (this session)
    elapsed_s: float             # measuring time so far
    instruction: str
    compiling: int = 0           # instructions whose candidates are being compiled ahead


class AutotuneSession:
    def __init__(self, config: AutotuneConfig, provider=None, *, device_key: str = "",
                 cache: ResultCache | None = None,
                 progress: Callable[[AutotuneProgress], None] | None = None):
        if provider is None and not config.deviceless:
            raise ValueError("a session without a provider must be deviceless")
        self.config = config
        self.provider = provider
        self._device_key = device_key
        self.cache = cache if cache is not None else PROCESS_CACHE
        self.progress = progress
        self.stats = AutotuneStats()
        self.records: list[TuningRecord] = []
        self._loaded = False
        self._done = 0
        self._total = 0
        self._candidates = 0

    @classmethod
    def from_options(cls, options, provider=None, *, deviceless: bool = False,
                     device_key: str = "", **kw) -> "AutotuneSession":
        return cls(AutotuneConfig.from_options(options, deviceless=deviceless or provider is None),
                   provider, device_key=device_key, **kw)

    @property
    def device_key(self) -> str:
        if self.provider is not None:
            return self.provider.device_key()
        return self._device_key

    def kind_of(self, inst) -> str | None:
        if self.provider is not None:
            return self.provider.kind_of(inst)
        from .kinds import default_kind_of
        return default_kind_of(inst)

    def key_for(self, inst) -> AutotuneCacheKey:
        return AutotuneCacheKey(self.device_key, canonical_text(inst))

    def load_results(self) -> None:
        if not self._loaded and self.config.load_results_from:
            self.cache.load_from_file(self.config.load_results_from)
        self._loaded = True

    def begin(self, insts: list) -> None:
        """A picker starts on ``insts`` (the progress bar's total); the provider may
        prepare the candidates of those no cache answers, all at once (``prepare``: the
        GPU providers compile their kernels in parallel)."""
        self.load_results()
        self._done, self._total = 0, len(insts)
        prepare = getattr(self.provider, "prepare", None)
        if prepare is None or self.config.require_complete_aot_results:
            return
        misses, seen = [], set()
        for inst in insts:
            key = self.key_for(inst)
            if key not in seen and self.cache.lookup(key, self.config.cache_dir) is None:
                seen.add(key)
                misses.append(inst)
        if misses:
            t0 = time.perf_counter()
            if self.progress is not None:
                self.progress(AutotuneProgress(0, len(insts), self._candidates,
                                               self.stats.seconds, "", len(misses)))
            prepare(misses)
            self.stats.seconds += time.perf_counter() - t0

    def autotune(self, inst) -> AutotuneResult | None:
        """The chosen result for ``inst`` (from a cache or measured); raises
        :class:`AutotuneError` when every candidate failed or, deviceless, on a miss."""
        self.load_results()
        self.stats.instructions += 1
        key = self.key_for(inst)
        hit = self.cache.lookup(key, self.config.cache_dir)
        if hit is not None:
            self.stats.cache_hits += 1
            self._advance(inst)
            return hit
        where = f"%{inst.name} ({inst.custom_call_target or inst.opcode})"
        if self.config.require_complete_aot_results:
            raise AutotuneError(
                f"Complete XLA AOT autotuning results are required, but no AOT result was "
                f"found for {where} (--xla_gpu_require_complete_aot_autotune_results)")
        if self.provider is None:
            raise AutotuneError(
                f"deviceless compilation cannot autotune {where}: there is no device to "
                f"measure on and no result for it was loaded. Pass "
                f"--xla_gpu_autotune_level=0, or --xla_gpu_load_autotune_results_from=FILE "
                f"with results dumped (--xla_gpu_dump_autotune_results_to) on a machine "
                f"with the device (key {self.device_key!r})")
        record = self._measure(inst)
        if record.best is None:
            self._advance(inst)
            raise record.error
        best = self.cache.add(key, record.best, self.config.cache_dir, self.config.cache_mode)
        self._advance(inst)
        return best

    def _measure(self, inst) -> TuningRecord:
        provider = self.provider
        candidates = provider.candidates(inst)
        buffers = RedzoneBuffers.for_instruction(provider.memory, inst, self.config,
                                                 provider.kind_of(inst))
        t0 = time.perf_counter()

        def on_candidate(_cand):
            self._candidates += 1
            if self.progress is not None:
                self.progress(AutotuneProgress(self._done, self._total, self._candidates,
                                               self.stats.seconds + time.perf_counter() - t0,
                                               inst.name))
        try:
            record = tune_candidates(candidates, buffers, self.config, provider.measure,
                                     f"%{inst.name} ({inst.custom_call_target or inst.opcode})",
                                     on_candidate)
        finally:
            buffers.release()
            self.stats.seconds += time.perf_counter() - t0
        record.name = inst.name
        self.records.append(record)
        self.stats.tuned += 1
        self.stats.measurements += record.measurements
        for r in record.results:
            if r.failure is not None:
                name = r.failure.kind.name
                self.stats.failed_candidates[name] = self.stats.failed_candidates.get(name, 0) + 1
        return record

    def _advance(self, inst) -> None:
        self._done += 1
        if self.progress is not None:
            self.progress(AutotuneProgress(self._done, self._total, self._candidates,
                                           self.stats.seconds, inst.name))

    def warn(self, message: str) -> None:
        self.stats.warnings.append(message)

    def finish(self) -> None:
        """After a compilation: rewrite ``--xla_gpu_dump_autotune_results_to`` and
        ``--xla_gpu_dump_autotune_logs_to`` (every candidate measured so far)."""
        if self.config.dump_results_to:
            self.cache.dump_to_file(self.config.dump_results_to)
        if self.config.dump_logs_to:
            from hlo_opt.fileutil import write_atomic
            from .serialize import encode_logs, is_text_path
            path = self.config.dump_logs_to
            try:
                write_atomic(path, encode_logs(self.records, is_text_path(path)))
            except OSError as e:
                raise AutotuneError(f"--xla_gpu_dump_autotune_logs_to={path}: error: "
                                    f"{e.strerror}") from None


def session_for(module) -> AutotuneSession | None:
    """The session a module is compiled with (``module.config.autotune``), if any."""
    config = getattr(module, "config", None)
    return getattr(config, "autotune", None)
