"""The disk cache of compiled objects.

Key: sha256 of the module text, the flags that change code generation, the renderer
version and the toolchain (llvmlite / LLVM versions, CPU name and features).  Directory:
``$HLO_OPT_CACHE_DIR`` or the user's cache dir (``$XDG_CACHE_HOME/hlo-opt`` or
``~/.cache/hlo-opt``), subfolder ``cpu``.  An entry is ``KEY.o`` (the object) and
``KEY.json`` (metadata with the object's sha256); both are written to a temporary file
and renamed, so a reader never sees half an entry.  A corrupt entry (bad json, missing
object, digest mismatch) is dropped and rebuilt.  After a write the folder is trimmed
to ``HLO_OPT_CACHE_MAX_BYTES`` (default 1 GiB), oldest entries first.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile

DEFAULT_MAX_BYTES = 1 << 30


def cache_dir() -> str:
    base = os.environ.get("HLO_OPT_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                               ".cache")
        base = os.path.join(xdg, "hlo-opt")
    return os.path.join(base, "cpu")


def make_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:40]


class ObjectCache:
    def __init__(self, directory: str | None = None, max_bytes: int | None = None):
        self.dir = directory or cache_dir()
        env = os.environ.get("HLO_OPT_CACHE_MAX_BYTES")
        self.max_bytes = max_bytes if max_bytes is not None else (
            int(env) if env and env.isdigit() else DEFAULT_MAX_BYTES)
        self.dropped = 0

    def _paths(self, key):
        return os.path.join(self.dir, key + ".o"), os.path.join(self.dir, key + ".json")

    def get(self, key):
        """(object bytes, metadata dict) or None; corrupt entries are removed."""
        obj_p, meta_p = self._paths(key)
        if not os.path.exists(meta_p):
            return None
        try:
            with open(meta_p, encoding="utf-8") as f:
                meta = json.load(f)
            with open(obj_p, "rb") as f:
                obj = f.read()
            if hashlib.sha256(obj).hexdigest() != meta.get("object_sha256"):
                raise ValueError("digest mismatch")
        except (OSError, ValueError, json.JSONDecodeError, AttributeError):
            self.drop(key)
            return None
        try:
            os.utime(meta_p)
        except OSError:
            pass
        return obj, meta

    def drop(self, key):
        self.dropped += 1
        for p in self._paths(key):
            try:
                os.remove(p)
            except OSError:
                pass

    def put(self, key, obj: bytes, meta: dict):
        try:
            os.makedirs(self.dir, exist_ok=True)
            meta = dict(meta, object_sha256=hashlib.sha256(obj).hexdigest())
            obj_p, meta_p = self._paths(key)
            self._atomic(obj_p, obj)
            self._atomic(meta_p, json.dumps(meta, sort_keys=True).encode())
            self.trim()
        except OSError:
            pass  # a cache that cannot be written is no error

    def _atomic(self, path, data: bytes):
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise

    def trim(self):
        entries = []
        total = 0
        for name in os.listdir(self.dir):
            p = os.path.join(self.dir, name)
            try:
                st = os.stat(p)
            except OSError:
                continue
            total += st.st_size
            if name.endswith(".json"):
                key = name[:-5]
                size = st.st_size
                try:
                    size += os.path.getsize(os.path.join(self.dir, key + ".o"))
                except OSError:
                    pass
                entries.append((st.st_mtime, key, size))
        if total <= self.max_bytes:
            return
        for _, key, size in sorted(entries):
            self.drop(key)
            self.dropped -= 1
            total -= size
            if total <= self.max_bytes:
                break
