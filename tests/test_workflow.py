"""The GitHub workflow checks pull requests, caches what it should, installs the CPU build of
torch, publishes from main only, and runs only commands that exist."""

import configparser
import re
import shlex

import pytest
import yaml

from nlbudget import cli, paths

ROOT = paths.repo_root()
WF = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
TRIGGERS = WF.get("on", WF.get(True))  # YAML 1.1 reads a bare `on` as True


def _steps():
    for name, job in WF["jobs"].items():
        for step in job.get("steps", []):
            yield name, job, step


def _commands():
    for name, _, step in _steps():
        for line in step.get("run", "").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                yield name, line


def test_runs_on_pull_requests_and_main():
    assert "pull_request" in TRIGGERS
    assert TRIGGERS["push"]["branches"] == ["main"]


def test_tests_job_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "tox -e tests" in readme
    assert ("tests", ".ci/run") in set(_commands())
    assert "exec tox -e tests" in (ROOT / ".ci" / "run").read_text()


def test_every_tox_environment_it_runs_exists():
    ini = configparser.ConfigParser()
    ini.read(ROOT / "tox.ini")
    envs = {s.split(":", 1)[1] for s in ini.sections() if s.startswith("testenv:")}
    used = {m for _, c in _commands() for m in re.findall(r"tox -e (\w+)", c)}
    used |= set(re.findall(r"tox -e (\w+)", (ROOT / ".ci" / "run").read_text()))
    assert used and used <= envs, used - envs


def test_every_nlbudget_verb_it_runs_exists():
    ini = (ROOT / "tox.ini").read_text()
    calls = [c for _, c in _commands() if c.startswith("nlbudget ")]
    calls += re.findall(r"^commands = (nlbudget .*)$", ini, re.M)
    assert calls
    for c in calls:
        argv = shlex.split(re.sub(r"\{env:[A-Z_]+:([^}]*)\}", r"\1", c))[1:]
        with pytest.raises(SystemExit) as e:  # --help parses the verb and its options, then exits 0
            cli.main([argv[0], "--help"])
        assert e.value.code == 0, c


def test_torch_comes_from_the_cpu_index():
    env = WF["env"]
    assert env["PIP_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    assert "pypi.org" in env["PIP_EXTRA_INDEX_URL"]
    assert "torch==" in (ROOT / "constraints" / "cpu.txt").read_text()
    assert {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"} <= set(
        re.findall(r"^\s+(\S+)$", (ROOT / "tox.ini").read_text(), re.M))  # tox passes them on


def test_caches_assets_and_executed_chapters():
    caches = {step["with"]["key"].split("-")[0]: step["with"] for _, _, step in _steps()
              if step.get("uses", "").startswith("actions/cache")}
    assert {"assets", "chapters"} <= set(caches)
    assert caches["assets"]["path"].strip() == "data/cache"
    assert {"build/ci", "data/results/ci"} <= set(caches["chapters"]["path"].split())
    for key in ("assets", "chapters"):  # keys change with their inputs; older copies restore
        assert "hashFiles(" in caches[key]["key"] and caches[key]["restore-keys"]
    assert all(p in caches["chapters"]["key"] for p in ("notebooks/", "src/", "data/reference"))


def test_publishes_from_main_only():
    deploy = WF["jobs"]["deploy"]
    assert "refs/heads/main" in deploy["if"] and "push" in deploy["if"]
    uploads = [s for _, _, s in _steps() if "upload-pages-artifact" in s.get("uses", "")]
    assert uploads and all("refs/heads/main" in s["if"] for s in uploads)
    assert "pages" not in WF.get("permissions", {})  # only the deploy job may write Pages
