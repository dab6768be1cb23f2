import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """An empty asset cache, so tests never touch the real one."""
    monkeypatch.setenv("NLBUDGET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"
