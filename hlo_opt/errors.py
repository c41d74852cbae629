"""The one family of errors a user can cause.

Every error a user can trigger (bad HLO text, unknown pass, bad flag, unsupported opcode
on a backend, missing GPU) derives from :class:`HloError`.  The CLI prints ``str(err)``
as one red message and exits non-zero; internal bugs still raise normally.
"""
from __future__ import annotations

import re

# How much of the user's input one message may quote, and how long a message may get: a
# module of megabytes must not turn into an error of gigabytes.
QUOTE_LIMIT = 200
MESSAGE_LIMIT = 20_000
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_control(text: str) -> str:
    """Control bytes (ESC, BEL, NUL, ...) as ``\\x1b``: never sent raw to a terminal."""
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` for an error message: control bytes escaped, at most ``limit`` characters
    of it (the rest counted, not shown)."""
    text = str(text)
    if len(text) > limit:
        text = text[:limit] + f"... ({len(text) - limit} more characters)"
    return escape_control(text)


def _bounded(message: str) -> str:
    message = escape_control(str(message))
    if len(message) > MESSAGE_LIMIT:
        message = (message[:MESSAGE_LIMIT]
                   + f"\n... (message cut: {len(message) - MESSAGE_LIMIT} more characters)")
    return message


class HloError(Exception):
    """Base of every user-facing error (messages are bounded and free of control bytes)."""

    def __init__(self, message: str):
        message = _bounded(message)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class HloParseError(HloError):
    """Bad HLO text: carries file, line, column and renders the line with a caret."""

    def __init__(self, what: str, filename: str = "<string>", line: int = 0, column: int = 0,
                 source_line: str | None = None):
        self.what = what
        self.filename = filename
        self.line = line
        self.column = column
        self.source_line = source_line
        text = f"{filename}:{line}:{column}: error: {what}"
        if source_line is not None:
            line = source_line.rstrip("\r\n")
            col = max(column - 1, 0)
            if len(line) > QUOTE_LIMIT:  # a window around the column of a long line
                start = max(0, col - QUOTE_LIMIT // 2)
                line = ("..." if start else "") + line[start:start + QUOTE_LIMIT] + "..."
                col = col - start + (3 if start else 0)
            # control bytes take 4 columns once escaped; tabs stay in the padding so the
            # caret lands under the column on any tab width
            pad = "".join(c if c == "\t" else " " * len(escape_control(c))
                          for c in line[:col])
            text += "\n" + escape_control(line) + "\n" + pad + "^"
        super().__init__(text)


class HloVerifyError(HloError):
    """The module is not well formed (shape inference or structural check failed)."""


class FlagError(HloError):
    """A bad --xla_* flag or XLA_FLAGS value."""


class PassError(HloError):
    """Unknown pass / pipeline, or a pass that left the module invalid."""


class UnsupportedError(HloError):
    """An opcode or attribute a backend cannot execute."""
