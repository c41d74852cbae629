"""Where tuning results are kept between instructions, compilations and processes.

* in memory, per process, keyed by (device, canonical instruction text, version), as
  XLA's ``autotune_cache``;
* ``--xla_gpu_dump_autotune_results_to`` / ``--xla_gpu_load_autotune_results_from``: the
  whole cache as one ``AutotuneResults`` proto, text when the name ends in ``.txt`` /
  ``.textproto`` (or ``.prototxt`` / ``.pbtxt``), binary otherwise;
* ``--xla_gpu_per_fusion_autotune_cache_dir``: one ``<base64(sha256(key))>.textproto``
  per result; read on a miss, written on a new result unless the mode is READ; written
  through a temporary file in ``DIR/tmp`` and a rename, so readers never see half a file.
"""
from __future__ import annotations

import base64
import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass

from .config import CACHE_MODE_READ, AutotuneError
from .results import AutotuneResult
from .serialize import (decode_results, encode_results, is_text_path, result_from_text,
                        result_to_text)

KEY_VERSION = 1


@dataclass(frozen=True)
class AutotuneCacheKey:
    device: str
    hlo: str
    version: int = KEY_VERSION

    def to_string(self) -> str:
        return f"<key model='{self.device}', hlo='{self.hlo}', version={self.version}>"

    def file_name(self) -> str:
        digest = hashlib.sha256(self.to_string().encode("utf-8")).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=") + ".textproto"


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    file_hits: int = 0
    file_writes: int = 0


class ResultCache:
    """The in-memory cache plus the optional per-fusion directory."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict[AutotuneCacheKey, AutotuneResult] = {}
        self._loaded: set[str] = set()
        self.stats = CacheStats()

    # -- in memory --
    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._loaded.clear()
            self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: AutotuneCacheKey) -> AutotuneResult | None:
        return self._entries.get(key)

    def lookup(self, key: AutotuneCacheKey, cache_dir: str = "") -> AutotuneResult | None:
        """Memory first, then the directory (a directory hit is copied into memory)."""
        with self._lock:
            hit = self._entries.get(key)
        if hit is None and cache_dir:
            hit = self._read_file(key, cache_dir)
            if hit is not None:
                self.stats.file_hits += 1
                with self._lock:
                    self._entries.setdefault(key, hit)
        if hit is None:
            self.stats.misses += 1
        else:
            self.stats.hits += 1
        return hit

    def add(self, key: AutotuneCacheKey, result: AutotuneResult, cache_dir: str = "",
            mode: str = "") -> AutotuneResult:
        """Insert unless present; returns what the cache holds.  A new entry also goes to
        the directory unless ``mode`` is READ."""
        with self._lock:
            existing = self._entries.get(key)
            if existing is not None:
                return existing
            self._entries[key] = result
        if cache_dir and mode != CACHE_MODE_READ:
            self._write_file(key, result, cache_dir)
        return result

    # -- per-fusion directory --
    def _read_file(self, key: AutotuneCacheKey, cache_dir: str) -> AutotuneResult | None:
        path = os.path.join(cache_dir, key.file_name())
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise AutotuneError(f"{path}: error: cannot read autotune cache entry: "
                                f"{e.strerror}") from None
        return result_from_text(text, path)

    def _write_file(self, key: AutotuneCacheKey, result: AutotuneResult, cache_dir: str):
        path = os.path.join(cache_dir, key.file_name())
        tmp_dir = os.path.join(cache_dir, "tmp")
        try:
            os.makedirs(tmp_dir, exist_ok=True)
            # a name no other writer (thread or process) can pick: XLA's per-process
            # counter alone would let two processes clobber each other's temp files
            fd, tmp = tempfile.mkstemp(dir=tmp_dir, prefix="tmp_per_fusion_cache_",
                                       suffix=".textproto")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(result_to_text(result))
            os.replace(tmp, path)
        except OSError as e:
            raise AutotuneError(f"--xla_gpu_per_fusion_autotune_cache_dir={cache_dir}: error: "
                                f"cannot write {path}: {e.strerror}") from None
        self.stats.file_writes += 1

    # -- results files --
    def serialize(self, as_text: bool) -> bytes:
        with self._lock:
            entries = [(k.device, k.hlo, r) for k, r in self._entries.items()]
        return encode_results(entries, as_text)

    def dump_to_file(self, path: str) -> None:
        from hlo_opt.fileutil import write_atomic
        try:
            write_atomic(path, self.serialize(is_text_path(path)))
        except OSError as e:
            raise AutotuneError(f"--xla_gpu_dump_autotune_results_to={path}: error: "
                                f"{e.strerror}") from None

    def load_from_file(self, path: str) -> int:
        """Load once per process and path; a loaded entry replaces one already present
        (XLA: "the new algorithm is chosen").  Returns how many entries were read."""
        real = os.path.realpath(path)
        if real in self._loaded:
            return 0
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise AutotuneError(f"--xla_gpu_load_autotune_results_from={path}: error: "
                                "Autotune results file does not exist") from None
        except OSError as e:
            raise AutotuneError(f"--xla_gpu_load_autotune_results_from={path}: error: "
                                f"{e.strerror}") from None
        entries = decode_results(data, is_text_path(path), path)
        with self._lock:
            for device, hlo, result in entries:
                self._entries[AutotuneCacheKey(device, hlo)] = result
            self._loaded.add(real)
        return len(entries)


PROCESS_CACHE = ResultCache()
