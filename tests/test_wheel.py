"""The package as a reader installs it elsewhere: the wheel, installed non-editable (alone,
`--no-deps`, into a folder ahead of this environment's packages, which stand in for the
dependencies it declares), runs chapter 01 at smoke from a folder outside the repository, from
the wheel's own copy of the notebooks and data. What it declares is read from its metadata:
the base dependencies are what the chapters import, and no more."""

import json
import os
import re
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


def test_the_wheel_declares_only_what_the_chapters_need(wheel):
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    lines = zipfile.ZipFile(wheel).read(meta).decode().splitlines()
    base = {re.split(r"[<>=!~ ;\[]", ln.split(":", 1)[1].strip())[0].lower()
            for ln in lines if ln.startswith("Requires-Dist:") and "extra ==" not in ln}
    assert {"torch", "transformers", "papermill", "sympy", "pandas", "matplotlib"} <= base
    assert not base & {"datasets", "jupyter-book", "pytest", "hypothesis"}, base  # extras only


def test_installed_wheel_runs_a_chapter_outside_the_repository(wheel, tmp_path):
    site = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
          str(wheel)])
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NLBUDGET_", "PYTHONPATH"))}
    env.update(PYTHONPATH=str(site), NLBUDGET_CACHE=str(paths.cache_dir()))
    where = _run([sys.executable, "-c", "import nlbudget; print(nlbudget.__file__)"], cwd=work,
                 env=env).stdout
    assert str(site) in where and str(ROOT / "src") not in where  # the wheel's copy, not ours
    _run([sys.executable, "-m", "nlbudget.cli", "run", "01", "--profile", "smoke"], cwd=work,
         env=env, timeout=900)
    doc = json.loads((work / "data" / "results" / "smoke" / "01_gated_mlp_symmetry.json")
                     .read_text())
    assert doc["figures"] and doc["profile"] == "smoke"
    verdicts = json.loads((work / "data" / "results" / "smoke"
                           / "01_gated_mlp_symmetry.verdicts.json").read_text())
    assert verdicts["claims"]  # the chapter ran to its end and judged its claims
    assert (work / "build" / "smoke" / "chapters" / "01_gated_mlp_symmetry.ipynb").is_file()
