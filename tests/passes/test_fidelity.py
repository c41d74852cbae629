"""The fidelity FileCheck files (``tests/lit/fidelity_*.hlo``) as differential tests.

Each file's first RUN line names what runs (``--passes=a,b`` or ``--pipeline=NAME`` and any
``--xla_*`` flags).  Every module of the file goes through the harness with those: verifier
after each changing pass, canonical printing, interpreter before == after on seeded inputs.
Modules named ``keep_*`` / ``*_kept`` pin a change XLA declines (they must stay unchanged);
the others pin a change XLA makes (they must change).
"""
from __future__ import annotations

import re

import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.flags import DebugOptions, parse_flag_tokens
from hlo_opt.ir.config import HloModuleConfig
from passes.pipelines import build_pipeline
from tests.support.harness import check_pass
from tests.support.lit_chunks import LIT_DIR, chunks

CHUNKS = chunks("fidelity_*.hlo")


def _run_line(file: str) -> tuple[object, DebugOptions]:
    text = (LIT_DIR / file).read_text()
    run = re.search(r"^//\s*RUN:\s*hlo-opt\s+(.*?)(\||$)", text, re.M).group(1)
    tokens = run.split()
    flags = parse_flag_tokens([t for t in tokens if t.startswith("--xla_")], file)
    passes = next((t.split("=", 1)[1] for t in tokens if t.startswith("--passes=")), None)
    pipeline = next((t.split("=", 1)[1] for t in tokens if t.startswith("--pipeline=")), None)
    options = DebugOptions(**flags)
    what = build_pipeline(pipeline, HloModuleConfig(options)) if pipeline else passes
    return what, options


def _expect_unchanged(name: str) -> bool:
    return name.startswith("keep_") or name.endswith("_kept")


def test_there_are_fidelity_files():
    assert len({c.file for c in CHUNKS}) >= 5


@pytest.mark.parametrize("chunk", CHUNKS, ids=lambda c: c.id)
def test_fidelity_module(chunk):
    what, options = _run_line(chunk.file)
    result = check_pass(parse_hlo(chunk.text, chunk.file), what, seeds=(0, 1),
                        rtol=1e-4, atol=1e-5, options=options)
    assert result.changed != _expect_unchanged(chunk.name), \
        f"{chunk.name}: changed={result.changed}\n{result.after_text}"
