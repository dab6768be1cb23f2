import os
import time

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """An empty asset cache, so tests never touch the real one."""
    monkeypatch.setenv("NLBUDGET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """Every chapter at smoke, then every exercise notebook (solutions included), run the way
    `nlbudget book` runs them (incrementally). Returns (results folder, build folder)."""
    from nlbudget import exercises, incremental

    root = tmp_path_factory.mktemp("smoke")
    res, bld = root / "results", root / "build"
    t = time.perf_counter()
    out = incremental.run_chapters("smoke", 0, res, bld, log=print)
    assert set(out.values()) == {"ran"}
    print(f"smoke chapters: {time.perf_counter() - t:.0f} s")
    t = time.perf_counter()
    assert set(exercises.run_all("smoke", res, bld, log=print).values()) == {"ran"}
    print(f"exercise notebooks: {time.perf_counter() - t:.0f} s")
    return res, bld
