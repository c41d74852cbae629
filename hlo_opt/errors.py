"""The one family of errors a user can cause.

Every error a user can trigger (bad HLO text, unknown pass, bad flag, unsupported opcode
on a backend, missing GPU) derives from :class:`HloError`.  The CLI prints ``str(err)``
as one red message and exits non-zero; internal bugs still raise normally.
"""
from __future__ import annotations


class HloError(Exception):
    """Base of every user-facing error."""

    def __init__(self, message: str):
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
            # keep tabs in the padding so the caret lands under the column on any tab width
            pad = "".join(c if c == "\t" else " " for c in line[:max(column - 1, 0)])
            text += "\n" + line + "\n" + pad + "^"
        super().__init__(text)


class HloVerifyError(HloError):
    """The module is not well formed (shape inference or structural check failed)."""


class FlagError(HloError):
    """A bad --xla_* flag or XLA_FLAGS value."""


class PassError(HloError):
    """Unknown pass / pipeline, or a pass that left the module invalid."""


class UnsupportedError(HloError):
    """An opcode or attribute a backend cannot execute."""
