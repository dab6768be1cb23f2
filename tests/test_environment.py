"""Dependencies: every direct import is declared, the lock pins every declared package, tox,
the workflow and environment.yml install with the lock, and the versions the results record
are the locked ones."""

import ast
import json
import os
import re
import subprocess
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
    (the `paper` extra), and `nbconvert`, which only `nlbudget slides` imports (the `teach`
    extra); the tests' imports are in the `test` extra."""
    src = set()
    for f in (ROOT / "src").rglob("*.py"):
        src |= _imports(f.read_text())
    for f in (ROOT / "notebooks").rglob("*.ipynb"):
        src |= _imports(_notebook_code(f))
    base = _declared()
    assert _distributions(src - {"datasets", "nbconvert"}) <= base, _distributions(src) - base
    assert "datasets" in _declared("paper") - base
    assert "nbconvert" in _declared("teach") - base  # `nlbudget slides`, the instructors'
    tests = set()
    for f in (ROOT / "tests").rglob("*.py"):
        tests |= _imports(f.read_text())
    tests -= {f.stem for f in (ROOT / "tests").glob("*.py")}  # the tests' own helpers
    assert _distributions(tests) <= _declared("test", "paper", "teach")


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
    """tox installs with the lock; environment.yml gives readers the book extra only, and
    environment-dev.yml contributors every extra; both at the lock, torch from the CPU index."""
    tox = (ROOT / "tox.ini").read_text()
    assert "PIP_CONSTRAINT = {env:NLBUDGET_CONSTRAINTS:{toxinidir}/constraints/lock.txt}" in tox
    for name, want in (("environment.yml", {"book"}),
                       ("environment-dev.yml", set(PROJECT["optional-dependencies"]))):
        env = yaml.safe_load((ROOT / name).read_text())
        assert "python=3.11" in env["dependencies"], name
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        assert "-c constraints/lock.txt" in pip, name
        assert "--index-url https://download.pytorch.org/whl/cpu" in pip, name
        extras = next(p for p in pip if p.startswith("-e ."))
        assert set(re.findall(r"\[(.*)\]", extras)[0].split(",")) == want, name


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


def test_the_lowest_constraints_are_the_floors():
    """constraints/lowest.txt pins every declared dependency (and extra) at its floor, and the
    workflow's `lowest` job installs with it on the lowest Python allowed."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    reqs = list(PROJECT["dependencies"]) + [r for e in PROJECT["optional-dependencies"].values()
                                            for r in e]
    floors = {}
    for r in map(Requirement, reqs):
        lows = [s.version for s in r.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{r} has no single floor"
        floors[_name(r.name)] = lows[0]
    text = (ROOT / "constraints" / "lowest.txt").read_text()
    pinned = dict(re.findall(r"^([\w.-]+)==(\S+)$", text, re.M))
    assert {_name(k): v for k, v in pinned.items()} == floors
    python = re.search(r">=([\d.]+)", PROJECT["requires-python"]).group(1)
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    setup = next(s for s in wf["jobs"]["lowest"]["steps"] if "setup-python" in s.get("uses", ""))
    assert str(setup["with"]["python-version"]) == python
    assert any("tox -e lowest" in s.get("run", "") for s in wf["jobs"]["lowest"]["steps"])
    assert SpecifierSet(PROJECT["requires-python"]).contains(python)


def test_the_floors_match_what_the_code_calls():
    """SciPy's `rng=` (bootstrap, permutation_test) arrived in 1.15; soupsieve of the lock needs
    Python 3.11.5."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    scipy = next(Requirement(r) for r in PROJECT["dependencies"] if r.startswith("scipy"))
    assert scipy.specifier.contains("1.15.0") and not scipy.specifier.contains("1.14.1")
    assert "rng=" in (ROOT / "src" / "nlbudget" / "verdicts" / "stats.py").read_text()
    assert Version(re.search(r">=([\d.]+)", PROJECT["requires-python"]).group(1)) >= Version("3.11.5")


def _resolve_lowest(constraints, d) -> dict:
    """pip's resolution (`--dry-run --report`: nothing installed) of what `tox -e lowest`
    installs, the project with its book, paper and test extras, under `constraints`; its
    report goes to `d`/report.json. Returns `subprocess.run`'s arguments (`resolved` runs
    them)."""
    return dict(args=[sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                      "--quiet", "--prefer-binary", "--report", str(d / "report.json"),
                      "--target", str(d / "t"), f"{ROOT}[book,paper,test]"],
                cwd=d, env={**os.environ, "PIP_CONSTRAINT": str(constraints),
                            "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


def _resolve_for(platform_tag: str, d, skip=()) -> dict:
    """Whether every package of the lock (but those in `skip`) has a binary wheel for another
    platform (pip `--dry-run --report --no-deps`: nothing is installed; without --no-deps pip
    would judge torch's Linux-only requirements by this machine's markers, not the target's).
    Returns `subprocess.run`'s arguments (`resolved` runs them)."""
    lines = [ln.split("#")[0].strip() for ln in
             (ROOT / "constraints" / "lock.txt").read_text().splitlines()]
    lines = [ln for ln in lines if _name(ln.split("==")[0]) not in skip]
    (d / "req.txt").write_text("\n".join(ln for ln in lines if ln) + "\n")
    return dict(args=[sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                      "--quiet", "--no-deps", "--report", str(d / "report.json"),
                      "--only-binary=:all:", "--platform", platform_tag, "--python-version",
                      "3.11.5", "--implementation", "cp", "--target", str(d / "t"), "-r",
                      str(d / "req.txt")],
                cwd=d, env={**os.environ, "PIP_CONSTRAINT": "",
                            "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


@pytest.fixture(scope="module")
def resolved(tmp_path_factory):
    """Every pip resolution this module's tests read, run side by side (each waits on the
    registry more than on the CPU; one after another they took 93 s of the suite):
    {name: (the finished process, its report as parsed JSON or None)}."""
    from concurrent.futures import ThreadPoolExecutor

    root = tmp_path_factory.mktemp("resolve")
    clash = root / "clash.txt"  # one floor below what another floor needs: must fail
    clash.write_text(re.sub(r"^safetensors==\S+$", "safetensors==0.4.0",
                            (ROOT / "constraints" / "lowest.txt").read_text(), flags=re.M))
    jobs = {"lowest": lambda d: _resolve_lowest(ROOT / "constraints" / "lowest.txt", d),
            "clash": lambda d: _resolve_lowest(clash, d),
            **{t: (lambda d, t=t: _resolve_for(t, d)) for t in (
                "macosx_14_0_arm64", "win_amd64", "macosx_13_0_arm64", "macosx_13_0_x86_64")},
            "intel-mac-without-torch": lambda d: _resolve_for("macosx_13_0_x86_64", d,
                                                              skip={"torch"})}

    def run(name):
        d = root / name
        d.mkdir()
        r = subprocess.run(**jobs[name](d), capture_output=True, text=True, timeout=900)
        report = d / "report.json"
        return r, json.loads(report.read_text()) if report.is_file() else None

    with ThreadPoolExecutor(4) as pool:
        return dict(zip(jobs, pool.map(run, jobs)))


@pytest.mark.assets
def test_the_lowest_floors_install_together(resolved):
    """The floors of constraints/lowest.txt resolve together (the `lowest` job can install),
    and what pip picks is the floor of every declared dependency. The floors this replaced
    (safetensors 0.4 under accelerate 1.0's >= 0.4.3) fail here; the same check on a file with
    one such clash fails too, so the test can say no."""
    r, report = resolved["lowest"]
    assert r.returncode == 0, r.stderr[-3000:]
    got = {_name(i["metadata"]["name"]): i["metadata"]["version"] for i in report["install"]}
    pinned = {_name(k): v for k, v in re.findall(
        r"^([\w.-]+)==(\S+)$", (ROOT / "constraints" / "lowest.txt").read_text(), re.M)}
    from packaging.version import Version
    for name in ("torch", "transformers", "tokenizers", "safetensors", "accelerate", "tqdm",
                 "datasets", "numpy", "scipy", "jupyter-book"):
        assert Version(got[name]) == Version(pinned[name]), (name, got[name], pinned[name])
    r, _ = resolved["clash"]
    assert r.returncode != 0 and "safetensors" in r.stderr, r.stderr[-2000:]


def test_the_floors_have_what_the_tests_load():
    """The tests load Gemma 3 (a stand-in of its architecture), which arrived in transformers
    4.50: the floor is that release."""
    from packaging.requirements import Requirement

    tr = next(Requirement(r) for r in PROJECT["dependencies"] if r.startswith("transformers"))
    assert tr.specifier.contains("4.50.0") and not tr.specifier.contains("4.49.0")
    others = [p for p in (ROOT / "tests").glob("*.py") if p.name != "test_environment.py"]
    assert "gemma3" in "".join(p.read_text() for p in others).lower()


@pytest.mark.assets
@pytest.mark.parametrize("platform_tag", ["macosx_14_0_arm64", "win_amd64"])
def test_the_lock_installs_on_the_platforms_the_readme_names(platform_tag, resolved):
    """The README says the lock has wheels for macOS arm64 ≥ 14 and Windows: pip resolves it
    for them (binary wheels only, from the registry)."""
    r, report = resolved[platform_tag]
    assert r.returncode == 0, r.stderr[-3000:]
    got = {_name(i["metadata"]["name"]): i["metadata"]["version"] for i in report["install"]}
    assert got["torch"] == _lock()["torch"]


@pytest.mark.assets
def test_the_lock_has_no_torch_for_macos_13(resolved):
    """…and that it has none for macOS 13 or Intel Macs, where the README's path is conda-forge's
    torch with the constraints unpinned."""
    for tag in ("macosx_13_0_arm64", "macosx_13_0_x86_64"):
        r, _ = resolved[tag]
        assert r.returncode != 0 and "torch" in r.stderr, (tag, r.stderr[-2000:])
    readme = (ROOT / "README.md").read_text()
    assert "NLBUDGET_CONSTRAINTS=/dev/null" in readme and "conda-forge" in readme


@pytest.mark.assets
def test_the_intel_mac_path_installs_everything_but_torch(resolved):
    """The README's path for macOS 13 and Intel Macs — torch from conda-forge, the rest with
    pip — holds for pip's part: every other locked package has a wheel (or is pure Python)
    for macOS 13 on x86_64."""
    r, report = resolved["intel-mac-without-torch"]
    assert r.returncode == 0, r.stderr[-3000:]
    got = {_name(i["metadata"]["name"]) for i in report["install"]}
    assert "torch" not in got and {"transformers", "papermill", "scipy"} <= got


def _install_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("nlbudget_install",
                                                  ROOT / "constraints" / "install.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tox_installs_through_the_cpu_index_script():
    """Every tox environment installs through constraints/install.py (the base [testenv]'s
    install_command, which no environment overrides)."""
    import configparser

    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "tox.ini")
    assert ini["testenv"]["install_command"].split()[:2] == [
        "python", "{toxinidir}/constraints/install.py"]
    assert not [s for s in ini.sections() if s != "testenv" and "install_command" in ini[s]]


def test_the_cpu_index_only_on_linux_without_a_driver(monkeypatch):
    inst = _install_module()
    none = {"which": lambda _: None}
    assert inst.wants_cpu_index({}, "linux", **none)
    assert not inst.wants_cpu_index({}, "linux", which=lambda _: "/usr/bin/nvidia-smi")
    assert not inst.wants_cpu_index({}, "darwin", **none)
    assert not inst.wants_cpu_index({}, "win32", **none)
    assert not inst.wants_cpu_index({"PIP_INDEX_URL": "https://mirror/simple"}, "linux", **none)
    assert not inst.wants_cpu_index({"NLBUDGET_TORCH_INDEX": "pypi"}, "linux", **none)
    for up in (True, False):  # added only where it answers (here, a closed network: not)
        monkeypatch.setattr(inst, "reachable", lambda url, timeout=5.0, up=up: up)
        cmd = inst.command(["-c", "x.txt", "torch==2.13.0"], {}, platform="linux", **none)
        assert cmd[1:4] == ["-m", "pip", "install"] and cmd[-3:] == ["-c", "x.txt", "torch==2.13.0"]
        assert (inst.CPU_INDEX in cmd) is up
    cmd = inst.command(["torch"], {}, platform="darwin", **none)
    assert inst.CPU_INDEX not in cmd


def test_a_cuda_build_without_a_gpu_is_warned_of():
    from nlbudget.book import preflight

    msg = preflight.cuda_build_without_gpu("12.8", gpu=False)
    assert "CUDA build" in msg and "download.pytorch.org/whl/cpu" in msg
    assert preflight.cuda_build_without_gpu(None, gpu=False) is None  # the CPU build
    assert preflight.cuda_build_without_gpu("12.8", gpu=True) is None


def test_the_quick_start_works_where_pep_668_applies():
    """The README's two commands use a virtual environment (pip into the system Python fails
    on Debian 12, Ubuntu 24.04 and Homebrew's Python) and say what they download."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    cmds = [ln for ln in block.splitlines() if ln.strip()]
    assert len(cmds) == 2, cmds
    assert "python3 -m venv" in cmds[0] and "tox -e book" in cmds[0]
    assert "tox -e tests" in cmds[1]
    assert "pip install" not in cmds[0].split("-m venv")[0]  # nothing into the system Python
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    for what in ("MB", "GB", "disk", "CPU build"):
        assert what in quick, what
