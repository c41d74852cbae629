import pytest

from hlo_opt.autotune import PROCESS_CACHE


@pytest.fixture(autouse=True)
def _fresh_process_cache():
    """The in-memory cache is per process: every test starts from an empty one."""
    PROCESS_CACHE.clear()
    yield
    PROCESS_CACHE.clear()
