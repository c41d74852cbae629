"""Shared fixtures: where the corpus and the sample modules live."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

try:  # every property test deterministic: derandomized, no example database
    from hypothesis import settings as _hypothesis_settings
    _hypothesis_settings.register_profile("deterministic", derandomize=True, database=None)
    _hypothesis_settings.load_profile("deterministic")
except ImportError:  # pragma: no cover - hypothesis is a test extra
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


def _gpu_present() -> bool:
    import shutil
    return shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()


def pytest_collection_modifyitems(config, items):
    """Tiers: a test over a corpus module is ``slow`` (``-m 'not slow'`` leaves the corpus
    out); a ``gpu`` test skips, saying why, where no NVIDIA GPU is present."""
    corpus = str(CORPUS)
    no_gpu = None
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(isinstance(v, Path) and str(v).startswith(corpus) for v in params.values()):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("gpu") is not None:
            if no_gpu is None:
                no_gpu = not _gpu_present()
            if no_gpu:
                item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU (none found)"))
