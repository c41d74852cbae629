"""Shared fixtures: where the corpus and the sample modules live."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

try:  # every property test is deterministic: derandomized, no example database between runs
    from hypothesis import settings as _hypothesis_settings
    _hypothesis_settings.register_profile("hlo-opt", derandomize=True, database=None,
                                          deadline=None)
    _hypothesis_settings.load_profile("hlo-opt")
except ImportError:  # (hypothesis is a test extra)
    pass

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_modules"
CORPUS = Path(os.environ.get("HLO_OPT_CORPUS", ROOT.parent / "shared" / "corpus" / "xla"))


def corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.iterdir() if p.suffix in (".hlo", ".txt"))


def sample_files() -> list[Path]:
    return sorted(SAMPLES.glob("*.hlo"))


def require_corpus():
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (it lives in ../shared; CI has it)")
