"""Read the FileCheck test files of a pass as data: one chunk per ``// -----`` module.

Each chunk may name the rewrite it demonstrates with ``// RULE: <label>`` lines (the
label of a rule in the pass's rule table) and carries the module text.  Pass tests use
this to run every lit input through the differential harness and to check that every
rule of a table has a FileCheck test that fires it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LIT_DIR = Path(__file__).resolve().parent.parent / "lit"
_SPLIT = re.compile(r"^[ \t]*//[ \t]*-----[ \t]*$", re.M)


@dataclass
class Chunk:
    file: str
    name: str
    rules: list[str]
    text: str

    @property
    def id(self) -> str:
        return f"{self.file}:{self.name}"


def chunks(pattern: str) -> list[Chunk]:
    out = []
    for path in sorted(LIT_DIR.glob(pattern)):
        for part in _SPLIT.split(path.read_text()):
            m = re.search(r"^HloModule\s+([\w.\-]+)", part, re.M)
            if not m:
                continue
            rules = [r.strip() for r in re.findall(r"^//\s*RULE:\s*(.+)$", part, re.M)]
            out.append(Chunk(path.name, m.group(1), rules, part))
    return out
