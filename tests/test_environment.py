"""Dependencies: every direct import is declared, the lock pins every declared package, tox,
the workflow and environment.yml install with the lock, and the versions the results record
are the locked ones."""

import ast
import json
import os
import re
import sys
import tomllib
from importlib import metadata

import pytest
import yaml

from nlbudget import paths
from nlbudget.verdicts import results

ROOT = paths.repo_root()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LOCK = ROOT / "constraints" / "lock.txt"


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _lock() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"not an exact pin: {line}"
            pins[_name(name)] = version.strip()
    return pins


def _imports(source: str) -> set[str]:
    out = set()
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Import):
            out |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            out.add(n.module.split(".")[0])
    return out - set(sys.stdlib_module_names) - {"nlbudget"}


def _notebook_code(path) -> str:
    cells = json.loads(path.read_text())["cells"]
    lines = [ln for c in cells if c["cell_type"] == "code" for ln in "".join(c["source"]).splitlines()
             if not ln.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def _distributions(modules: set[str]) -> set[str]:
    dists = metadata.packages_distributions()
    missing = [m for m in modules if m not in dists]
    assert not missing, f"imported but not installed: {missing}"
    return {_name(d) for m in modules for d in dists[m]}


def _declared(*extras: str) -> set[str]:
    reqs = list(PROJECT["dependencies"])
    for e in extras:
        reqs += PROJECT["optional-dependencies"][e]
    return {_name(r) for r in reqs}


def test_every_direct_import_is_declared():
    """What the library and the chapters import is in `dependencies` (so `pip install nlbudget`
    alone runs them), except `datasets`, which only the paper profile's hub corpora import
    (the `paper` extra); the tests' imports are in the `test` extra."""
    src = set()
    for f in (ROOT / "src").rglob("*.py"):
        src |= _imports(f.read_text())
    for f in (ROOT / "notebooks").rglob("*.ipynb"):
        src |= _imports(_notebook_code(f))
    base = _declared()
    assert _distributions(src - {"datasets"}) <= base, _distributions(src) - base
    assert "datasets" in _declared("paper") - base
    tests = set()
    for f in (ROOT / "tests").rglob("*.py"):
        tests |= _imports(f.read_text())
    assert _distributions(tests) <= _declared("test", "paper")


def test_base_dependencies_are_what_the_chapters_need_and_no_more():
    """The base list holds no book toolchain, test tool or paper-only package; every base
    package is imported by the library or the chapters, or is one transformers needs for the
    GGUF model (gguf, accelerate) or papermill needs to run a chapter (ipykernel)."""
    base = _declared()
    assert not base & {"jupyter-book", "sphinx-mathjax-offline", "pytest", "hypothesis",
                       "datasets", "pyyaml"}
    src = set()
    for f in (ROOT / "src").rglob("*.py"):
        src |= _imports(f.read_text())
    for f in (ROOT / "notebooks").rglob("*.ipynb"):
        src |= _imports(_notebook_code(f))
    used = _distributions(src) | {"gguf", "accelerate", "ipykernel"}
    assert base <= used, base - used


def test_user_named_dependencies_are_declared():
    assert {"torch", "transformers", "papermill", "matplotlib", "pandas", "sympy"} <= _declared()
    assert "jupyter-book" in _declared("book")


def test_the_lock_pins_every_declared_package_within_its_bounds():
    from packaging.requirements import Requirement

    lock = _lock()
    reqs = list(PROJECT["dependencies"]) + [r for e in PROJECT["optional-dependencies"].values()
                                            for r in e]
    for r in map(Requirement, reqs):
        name = _name(r.name)
        assert name in lock, f"{name} is not locked"
        assert r.specifier.contains(lock[name], prereleases=True), (name, lock[name], r)
    assert "+" not in lock["torch"]  # one pin for the CPU and the CUDA builds


def test_tox_workflow_and_environment_install_with_the_lock():
    tox = (ROOT / "tox.ini").read_text()
    assert "PIP_CONSTRAINT = {env:NLBUDGET_CONSTRAINTS:{toxinidir}/constraints/lock.txt}" in tox
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-c constraints/lock.txt" in pip
    extras = next(p for p in pip if p.startswith("-e ."))
    assert set(re.findall(r"\[(.*)\]", extras)[0].split(",")) == set(
        PROJECT["optional-dependencies"])


@pytest.mark.skipif(bool(os.environ.get("NLBUDGET_CONSTRAINTS")),
                    reason="installed with other constraints than the lock")
def test_installed_and_recorded_versions_are_the_locked_ones():
    """The environment the tests (and the book) run in is the lock: every locked package that is
    installed has the locked version, and so does every version a results file records, for
    the results this build wrote and the committed ones."""
    lock = _lock()
    for dist in metadata.distributions():
        name = _name(dist.metadata["Name"])
        if name in lock:
            assert dist.version.split("+")[0] == lock[name], (name, dist.version, lock[name])
    recorded = {"now": results.package_versions()}
    for f in sorted(paths.results_dir().glob("*/*.json")):
        if results.is_figures_file(f):  # not a record of its inputs, nor its verdicts
            recorded[str(f)] = json.loads(f.read_text())["environment"]["packages"]
    for where, versions in recorded.items():
        for name, version in versions.items():
            if version is not None and _name(name) in lock:
                assert version.split("+")[0] == lock[_name(name)], (where, name, version)
