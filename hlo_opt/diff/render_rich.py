"""Coloured terminal output: the text renderer's lines through rich."""
from __future__ import annotations

import sys

from .render_text import Line

STYLES = {"removed": "red", "added": "green", "changed": "yellow", "moved": "magenta",
          "header": "bold", "hunk": "bold cyan", "dim": "dim", "title": "bold"}


def want_color(mode: str, stream=None) -> bool:
    """``auto``: colour only on a terminal (and not when NO_COLOR is set)."""
    import os
    if mode == "always":
        return True
    if mode == "never":
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def print_lines(lines: list[Line], color: bool, stream=None) -> None:
    stream = stream or sys.stdout
    if not color:
        stream.write("".join("".join(t for t, _ in line) + "\n" for line in lines))
        return
    from rich.console import Console
    from rich.text import Text
    console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True,
                      markup=False, emoji=False)
    for line in lines:
        text = Text()
        for segment, style in line:
            text.append(segment, style=STYLES.get(style) if style else None)
        console.print(text)
