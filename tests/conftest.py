import os

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
    from nlbudget.book import plan, runner

    root = tmp_path_factory.mktemp("smoke")
    res, bld = root / "results", root / "build"
    out = runner.run_plan(plan.make("smoke", 0, res, bld), log=print)
    assert set(out["chapters"].values()) == {"ran"} and set(out["exercises"].values()) == {"ran"}
    print(f"smoke chapters: {out['chapters_s']:.0f} s, exercise notebooks: "
          f"{out['exercises_s']:.0f} s")
    return res, bld
