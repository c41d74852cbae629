"""Writing files safely: never half-written, never replacing what a path points at.

``write_atomic`` (dumps and assets the tool owns): a temporary file in the same directory
(a short name, whatever the length of the target's), then a rename over the target.

``write_output`` (a path the user named: ``-o``, ``--stats``, ``--outputs``): the same for
regular files; a symbolic link is followed and its target replaced (the link stays); a
FIFO, a terminal or another special file is written through, as a shell redirection
would; a directory is refused.  Any failure is an :class:`HloError` naming the path.
"""
from __future__ import annotations

import os
import stat
import tempfile

from .errors import HloError, quote


def write_atomic(path: str, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (raises OSError)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    # the temporary name stays short: a target of 255 bytes must not make it longer
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as f:
            f.write(data)
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_output(path: str, data: str | bytes) -> str:
    """Write a user-named output; returns the path written.  Raises HloError."""
    shown = quote(path, 120)
    try:
        if "\0" in path:
            raise HloError(f"{shown}: error: a file name cannot hold a NUL byte")
        target = os.path.realpath(path) if os.path.islink(path) else path
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise HloError(f"{shown}: error: is a directory")
        if st is not None and not stat.S_ISREG(st.st_mode):
            # a FIFO, terminal, /dev/null...: write through, as '>' would
            mode = "wb" if isinstance(data, bytes) else "w"
            with open(target, mode, **({} if isinstance(data, bytes)
                                       else {"encoding": "utf-8"})) as f:
                f.write(data)
            return target
        write_atomic(target, data)
        return target
    except OSError as e:
        reason = e.strerror or str(e)
        raise HloError(f"{shown}: error: cannot write ({reason})") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def source_fingerprint(*packages) -> str:
    """sha256 over the ``.py`` files under ``packages`` (directories): caches keyed with
    it are never reused by other code (an upgrade, a local edit)."""
    import hashlib
    h = hashlib.sha256()
    for top in packages:
        for root, dirs, files in sorted(os.walk(top)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(".py"):
                    with open(os.path.join(root, f), "rb") as fh:
                        h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()[:16]
