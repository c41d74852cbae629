"""Every corpus and sample module parses and prints back byte-identically."""
from __future__ import annotations

import pytest

from hlo_opt.text.parser import parse_hlo, parse_hlo_modules
from tests.conftest import corpus_files, require_corpus, sample_files

# Corpus files the parser rejects on purpose (reason): keep empty unless justified.
EXPECTED_FAILURES: dict[str, str] = {}


def _roundtrip(text: str, name: str) -> None:
    modules = parse_hlo_modules(text, name)
    assert modules
    for m in modules:
        first = m.to_text()
        again = parse_hlo(first, name + ":printed")
        assert again.to_text() == first


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_roundtrip(path):
    if path.name in EXPECTED_FAILURES:
        pytest.xfail(EXPECTED_FAILURES[path.name])
    _roundtrip(path.read_text(), path.name)


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_sample_roundtrip(path):
    _roundtrip(path.read_text(), path.name)


def test_corpus_present_or_skipped():
    require_corpus()
    assert len(corpus_files()) >= 200
