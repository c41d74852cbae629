"""The library API scripts use: parse, load, verify, execute."""
from __future__ import annotations

import sys

from typing import TYPE_CHECKING

from .errors import HloError, quote

if TYPE_CHECKING:  # the parser loads on first use: `hlo-opt --help` starts fast
    from .ir.module import HloModule


def _parse_one(text: str, filename: str = "<string>") -> "HloModule":
    from .text.parser import parse_hlo as parse
    return parse(text, filename)


def parse_hlo_modules(text: str, filename: str = "<string>") -> "list[HloModule]":
    from .text.parser import parse_hlo_modules as parse
    return parse(text, filename)


def parse_hlo(text: str, filename: str = "<string>") -> "HloModule":
    """Parse HLO text holding one module (raises HloParseError with file:line:col)."""
    return _parse_one(text, filename)


def read_input(path: str) -> tuple[str, str]:
    """Read a path or '-' (stdin); return (text, display filename)."""
    shown = quote(path, 120)
    if path == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
        if isinstance(data, str):
            return data, "<stdin>"
        try:
            return data.decode("utf-8"), "<stdin>"
        except UnicodeDecodeError as e:
            raise HloError(f"<stdin>: error: not UTF-8 text ({e.reason} at byte {e.start})") \
                from None
    if "\0" in path:
        raise HloError(f"{shown}: error: a file name cannot hold a NUL byte")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except FileNotFoundError:
        raise HloError(f"{shown}: error: no such file") from None
    except IsADirectoryError:
        raise HloError(f"{shown}: error: is a directory, expected an HLO text file") from None
    except UnicodeDecodeError as e:
        raise HloError(f"{shown}: error: not UTF-8 text ({e.reason} at byte {e.start})") \
            from None
    except OSError as e:
        raise HloError(f"{shown}: error: {e.strerror}") from None


def load_modules_from_text(text: str, filename: str, split: bool = False) -> "list[HloModule]":
    if split:
        modules = parse_hlo_modules(text, filename)
        if not modules:
            raise HloError(f"{filename}: error: no module in the input (only '// -----' "
                           "separators)")
        return modules
    return [_parse_one(text, filename)]


def load(path: str) -> "HloModule":
    """Read and parse one HLO text file."""
    text, filename = read_input(path)
    return _parse_one(text, filename)


def load_all(path: str) -> "list[HloModule]":
    """Read a file that may hold several modules split by ``// -----``."""
    text, filename = read_input(path)
    return parse_hlo_modules(text, filename)


def verify(module: HloModule) -> None:
    """Raise HloVerifyError when the module is not well formed."""
    from .verifier import verify_module
    verify_module(module)
