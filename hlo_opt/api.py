"""The library API scripts use: parse, load, verify, execute."""
from __future__ import annotations

import sys

from .errors import HloError
from .ir.module import HloModule
from .text.parser import parse_hlo as _parse_one, parse_hlo_modules


def parse_hlo(text: str, filename: str = "<string>") -> HloModule:
    """Parse HLO text holding one module (raises HloParseError with file:line:col)."""
    return _parse_one(text, filename)


def read_input(path: str) -> tuple[str, str]:
    """Read a path or '-' (stdin); return (text, display filename)."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except FileNotFoundError:
        raise HloError(f"{path}: error: no such file") from None
    except IsADirectoryError:
        raise HloError(f"{path}: error: is a directory, expected an HLO text file") from None
    except UnicodeDecodeError as e:
        raise HloError(f"{path}: error: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise HloError(f"{path}: error: {e.strerror}") from None


def load_modules_from_text(text: str, filename: str, split: bool = False) -> list[HloModule]:
    if split:
        return parse_hlo_modules(text, filename)
    return [_parse_one(text, filename)]


def load(path: str) -> HloModule:
    """Read and parse one HLO text file."""
    text, filename = read_input(path)
    return _parse_one(text, filename)


def load_all(path: str) -> list[HloModule]:
    """Read a file that may hold several modules split by ``// -----``."""
    text, filename = read_input(path)
    return parse_hlo_modules(text, filename)


def verify(module: HloModule) -> None:
    """Raise HloVerifyError when the module is not well formed."""
    from .verifier import verify_module
    verify_module(module)
