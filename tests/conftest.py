import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

#: The smoke build, run in a child process: every chapter at smoke, then every exercise
#: notebook (solutions included), the way `nlbudget book` runs them (incrementally).
_SMOKE_BUILD = """
import json, sys
from pathlib import Path
from nlbudget.book import plan, runner
runner.stop_on_signals()
res, bld, out = map(Path, sys.argv[1:4])
done = runner.run_plan(plan.make("smoke", 0, res, bld), log=lambda s: print(s, flush=True),
                       cores=1)
out.write_text(json.dumps(done))
"""
_BUILD = pytest.StashKey[tuple]()  # (process, folder, log file) of the smoke build


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """An empty asset cache, so tests never touch the real one."""
    monkeypatch.setenv("NLBUDGET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _warm_the_shared_cache() -> None:
    """Fetch and de-quantize SmolLM2 and fetch the pinned corpora into the real cache before
    the smoke build starts beside the tests: the fetches write fixed `.part` names, so two
    processes filling a cold cache at once would spoil each other's files."""
    from nlbudget.assets import corpora, models

    models.load("smollm2-135m")
    for name in corpora.PINNED:
        corpora.fetch(name)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(session, config, items):
    """Where any collected test reads the smoke build (the `smoke` fixture), start that build
    now, in a child process beside the tests (the suite's longest step, minutes of kernels),
    and move the tests that read it to the end, so that the others run meanwhile."""
    readers = [i for i in items if "smoke" in getattr(i, "fixturenames", ())]
    if not readers or config.getoption("collectonly"):
        return
    items[:] = [i for i in items if i not in readers] + readers
    _warm_the_shared_cache()
    root = Path(tempfile.mkdtemp(prefix="nlbudget-smoke-"))
    log = open(root / "build.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SMOKE_BUILD, root / "results", root / "build", root / "out.json"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, **_ONE_THREAD})
    config.stash[_BUILD] = (proc, root, log)
    _share_the_cores(True)


#: One core each for the smoke build and the tests beside it: two processes each running
#: OpenMP on every core spin against each other (chapter 03 took 5 min instead of 1).
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_SAVED: dict = {}


def _share_the_cores(share: bool) -> None:
    """While the smoke build runs: this process, and what it starts, on one thread."""
    import torch

    if share:
        _SAVED.update(threads=torch.get_num_threads(),
                      env={k: os.environ.get(k) for k in _ONE_THREAD})
        os.environ.update(_ONE_THREAD)
        torch.set_num_threads(1)
    elif _SAVED:  # once: what was saved goes with it
        threads, env = _SAVED.pop("threads"), _SAVED.pop("env")
        torch.set_num_threads(threads)
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def pytest_runtest_setup(item):
    """The smoke build done before the tests beside it: they go back to every core."""
    build = item.config.stash.get(_BUILD, None)
    if build is not None and build[0].poll() is not None:
        _share_the_cores(False)


def pytest_unconfigure(config):
    """A smoke build still running when the session ends (interrupted, or no reader ran) is
    stopped with its kernels; its folder goes."""
    import shutil

    from nlbudget.book import runner

    if _BUILD not in config.stash:
        return
    proc, root, log = config.stash[_BUILD]
    if proc.poll() is None:
        runner.kill_tree(proc)
        proc.wait()
    log.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def smoke(request):
    """Every chapter at smoke, then every exercise notebook (solutions included), run the way
    `nlbudget book` runs them (incrementally), started at collection (above). Returns
    (results folder, build folder)."""
    proc, root, log = request.config.stash[_BUILD]
    rc = proc.wait()
    _share_the_cores(False)  # the tests that read it run after it, on every core
    log.flush()
    text = (root / "build.log").read_text()
    print(text)
    assert rc == 0, f"the smoke build failed (exit {rc}):\n{text[-4000:]}"
    out = json.loads((root / "out.json").read_text())
    assert set(out["chapters"].values()) == {"ran"} and set(out["exercises"].values()) == {"ran"}
    print(f"smoke chapters: {out['chapters_s']:.0f} s, exercise notebooks: "
          f"{out['exercises_s']:.0f} s")
    return root / "results", root / "build"
