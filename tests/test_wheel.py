"""The package as a reader installs it elsewhere: a wheel, installed non-editable (with the
dependencies it declares, at the locked versions) into a fresh virtual environment, runs
chapter 01 and chapter 03 at smoke from a folder outside the repository. The notebooks, the
corpus and the reference data come with the wheel; the model is fetched from PyPI (or read from
the asset cache, `NLBUDGET_CACHE`)."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from nlbudget import paths

ROOT = paths.repo_root()
pytestmark = pytest.mark.notebooks


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)])
    (whl,) = out.glob("nlbudget-*.whl")
    return whl


def test_the_wheel_carries_what_the_chapters_read(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = "nlbudget/_shipped/"
    for need in ("notebooks/01_gated_mlp_symmetry.ipynb", "notebooks/03_linear_surrogates.ipynb",
                 "notebooks/exercises/01_gated_mlp_symmetry.ipynb", "data/claims.csv",
                 "data/corpora/pydocs.json.xz", "data/corpora/pydocs-LICENSE.rst.txt",
                 "data/reference/p3_all_linear_costs.csv"):
        assert shipped + need in names, need
    assert not any(n.startswith(shipped + "data/cache") or "/results/ci/" in n
                   or "/results/smoke/" in n for n in names)  # no caches, no build outputs


def test_installed_wheel_runs_chapters_outside_the_repository(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NLBUDGET_ROOT", "PYTHONPATH"))}
    env["PIP_CONSTRAINT"] = env.get("PIP_CONSTRAINT") or str(ROOT / "constraints" / "lock.txt")
    _run([str(py), "-m", "pip", "install", "-q", str(wheel)], env=env)  # base dependencies only
    work = tmp_path / "elsewhere"
    work.mkdir()
    env["NLBUDGET_CACHE"] = str(paths.cache_dir())  # the model, if already fetched
    where = _run([str(py), "-c", "import nlbudget, sys; print(nlbudget.__file__); "
                  "import importlib.util as u; sys.exit(u.find_spec('datasets') is not None)"],
                 cwd=work, env=env).stdout
    assert str(venv) in where and str(ROOT / "src") not in where  # the wheel's copy, not ours
    for key in ("01", "03"):
        _run([str(venv / "bin" / "nlbudget"), "run", key, "--profile", "smoke"], cwd=work,
             env=env, timeout=900)
    for stem in ("01_gated_mlp_symmetry", "03_linear_surrogates"):
        doc = json.loads((work / "data" / "results" / "smoke" / f"{stem}.json").read_text())
        assert doc["claims"], stem  # the chapter ran to its end and judged its claims
        assert (work / "build" / "smoke" / "chapters" / f"{stem}.ipynb").is_file()
