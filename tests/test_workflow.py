"""The GitHub workflow runs on GitHub's hosted runners with Python from setup-python and no OS
packages, checks pull requests, caches what it should under one key per job and purpose (pip's
downloads included), installs the CPU build of torch, publishes from main only without ever
cancelling a deployment, and runs only commands that exist."""

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
    assert any(job == "tests" and c.split()[0] == ".ci/run" for job, c in _commands())
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
    assert re.search(r"^torch==[\d.]+\s", (ROOT / "constraints" / "lock.txt").read_text(), re.M)
    assert {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"} <= set(
        re.findall(r"^\s+(\S+)$", (ROOT / "tox.ini").read_text(), re.M))  # tox passes them on


def test_hosted_ubuntu_runner_and_python_from_setup_python():
    for name, job in WF["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest", name
    for name in ("tests", "book"):
        setup = [s for s in WF["jobs"][name]["steps"]
                 if s.get("uses", "").startswith("actions/setup-python@")]
        assert len(setup) == 1, name
        assert str(setup[0]["with"]["python-version"]) == "3.11"
        steps = WF["jobs"][name]["steps"]
        first_run = next(i for i, s in enumerate(steps) if "run" in s)
        assert steps.index(setup[0]) < first_run, "Python is set up before anything runs"


def test_no_os_packages_anywhere():
    """No apt-get (or any other OS package manager) in the workflow, .ci/run, tox, or the code
    the build and the tests run."""
    banned = re.compile(r"\b(apt-get|apt|dpkg|dpkg-deb|brew|yum|dnf|conda)\s+(install|update|download|-x)")
    texts = {".github/workflows/book.yml": (ROOT / ".github/workflows/book.yml").read_text(),
             ".ci/run": (ROOT / ".ci" / "run").read_text(),
             "tox.ini": (ROOT / "tox.ini").read_text()}
    for f in [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
              *(ROOT / "benchmarks").rglob("*.py")]:
        texts[str(f.relative_to(ROOT))] = f.read_text()
    hits = {k: m.group(0) for k, v in texts.items() if (m := banned.search(v))}
    assert not hits, hits
    # and not even a mention of apt-get in what runs: the workflow, .ci/run, tox, the library
    assert not [k for k, v in texts.items() if "apt-get" in v and not k.startswith("tests/")]
    assert not [k for k, v in texts.items() if "sudo " in v and not k.startswith("tests/")]
    for name, line in _commands():
        assert not line.startswith(("apt", "sudo")), (name, line)


def test_pip_cache_keyed_by_the_lock():
    for name in ("tests", "book"):
        setup = next(s for s in WF["jobs"][name]["steps"]
                     if s.get("uses", "").startswith("actions/setup-python@"))
        assert setup["with"]["cache"] == "pip", name
        assert "constraints/lock.txt" in setup["with"]["cache-dependency-path"], name


def _caches():
    for name, _, step in _steps():
        if step.get("uses", "").startswith("actions/cache"):
            yield name, step["with"]


def test_one_cache_key_per_job_and_purpose():
    caches = list(_caches())
    prefixes = [w["key"].split("${{")[0] for _, w in caches]
    assert len(set(prefixes)) == len(prefixes), prefixes  # no two steps save under one key
    by_job = {}
    for name, w in caches:
        by_job.setdefault(name, []).append(w)
        assert w["restore-keys"].strip() == w["key"].split("${{")[0], w  # restores its own only
        assert "hashFiles(" in w["key"]
    assets = {name: [w for w in ws if w["path"].strip() == "data/cache"] for name, ws in by_job.items()}
    assert all(len(a) == 1 for a in assets.values()) and set(assets) == {"tests", "book"}
    assert all(name in a[0]["key"] for name, a in assets.items())  # the job names its key


def test_caches_executed_chapters_by_their_inputs():
    chapters = [w for name, w in _caches() if name == "book" and "build/ci" in w["path"]]
    assert len(chapters) == 1
    assert {"build/ci", "data/results/ci"} <= set(chapters[0]["path"].split())
    assert all(p in chapters[0]["key"] for p in ("notebooks/", "src/", "data/reference",
                                                  "data/corpora", "constraints/"))


def test_publishes_from_main_only():
    deploy = WF["jobs"]["deploy"]
    assert "refs/heads/main" in deploy["if"] and "push" in deploy["if"]
    uploads = [s for _, _, s in _steps() if "upload-pages-artifact" in s.get("uses", "")]
    assert uploads and all("refs/heads/main" in s["if"] for s in uploads)
    assert "pages" not in WF.get("permissions", {})  # only the deploy job may write Pages


def test_pages_deployments_are_never_cancelled():
    """Only pull-request runs cancel older runs; the deploy job queues in its own group with
    cancel-in-progress false, so a push to main never stops a deployment half way."""
    top = WF["concurrency"]
    cancel = str(top.get("cancel-in-progress", False))
    assert cancel in ("False", "false") or cancel == "${{ github.event_name == 'pull_request' }}"
    deploy = WF["jobs"]["deploy"]["concurrency"]
    assert deploy["cancel-in-progress"] is False and deploy["group"] != top["group"]


def test_actions_are_pinned_by_commit_sha_to_node24_majors():
    """Every action is pinned by a full commit SHA with its release tag beside it (what
    dependabot updates), at a major that runs on Node 24."""
    node24 = {"actions/checkout": 5, "actions/setup-python": 6, "actions/cache": 5,
              "actions/upload-artifact": 6, "actions/upload-pages-artifact": 5,
              "actions/deploy-pages": 5}  # the first major of each on Node 24 (or composite)
    lines = [ln.strip() for ln in (ROOT / ".github/workflows/book.yml").read_text().splitlines()
             if re.match(r"\s*(- )?uses:", ln)]
    assert len(lines) >= 10
    for ln in lines:
        m = re.fullmatch(r"(?:- )?uses: ([\w./-]+)@([0-9a-f]{40}) # v(\d+)\.\d+\.\d+", ln)
        assert m, f"not pinned by SHA with its tag: {ln}"
        assert m.group(1) in node24 and int(m.group(3)) >= node24[m.group(1)], ln
    bot = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    assert {u["package-ecosystem"] for u in bot["updates"]} == {"github-actions", "pip"}


def test_every_cache_key_reads_files_that_exist():
    """A hashFiles pattern that matches nothing hashes to '' and the key stops following the
    code (the asset caches once hashed modules that had moved)."""
    pats = re.findall(r"hashFiles\(([^)]*)\)", (ROOT / ".github/workflows/book.yml").read_text())
    assert pats
    for group in pats:
        for pat in re.findall(r"'([^']+)'", group):
            assert list(ROOT.glob(pat)), f"hashFiles pattern matches no file: {pat}"


def _uploads(job: str) -> list[dict]:
    return [s for s in WF["jobs"][job]["steps"]
            if s.get("uses", "").startswith("actions/upload-artifact@")]


def test_a_failed_run_keeps_its_notebooks_results_and_logs():
    for job, must in (("tests", {"tests.log"}),
                      ("book", {"book.log", "build/ci/**/*.ipynb", "data/results/ci"})):
        kept = [s for s in _uploads(job) if s.get("if") == "always()"]
        assert kept, f"{job}: nothing uploaded when it fails"
        assert must <= set(kept[0]["with"]["path"].split()), job
    logged = [s["run"] for _, _, s in _steps() if "tee " in s.get("run", "")]
    assert any(".ci/run" in r and "tests.log" in r for r in logged)
    assert any("tox -e book" in r and "book.log" in r for r in logged)


def test_a_pull_request_gets_its_built_pages():
    html = [s for s in _uploads("book") if s["with"]["path"] == "build/ci/site/_build/html"]
    assert html and "pull_request" in html[0]["if"]


def test_a_weekly_cold_build_checks_the_links():
    assert [s["cron"] for s in TRIGGERS["schedule"]]
    check = [s for s in WF["jobs"]["book"]["steps"] if "--builder linkcheck" in s.get("run", "")]
    assert check and "schedule" in check[0]["if"]
    # the scheduled build starts cold: no cache restored
    for s in WF["jobs"]["book"]["steps"]:
        if s.get("uses", "").startswith("actions/cache@"):
            assert s["if"] == "github.event_name != 'schedule'", s


def test_the_lowest_versions_job_runs_the_unit_tests():
    job = WF["jobs"]["lowest"]
    assert any("tox -e lowest" in s.get("run", "") for s in job["steps"])
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "tox.ini")
    env = ini["testenv:lowest"]
    assert "constraints/lowest.txt" in env["set_env"]
    assert "not notebooks" in env["commands"]


def test_the_readme_says_pages_must_be_switched_to_actions():
    assert "GitHub Actions" in (ROOT / "README.md").read_text()


# GitHub runs a `run:` step with `bash -e {0}` unless a shell is named; `shell: bash` means
# `bash --noprofile --norc -eo pipefail {0}`. Only the latter fails a step whose piped command
# fails (`.ci/run 2>&1 | tee log`).
PIPEFAIL_SHELLS = {"bash"}


def _effective_shell(wf, job, step):
    """The shell a step runs in: the step's own, else the job's defaults, else the workflow's,
    else GitHub's default (None: `bash -e`, no pipefail)."""
    for scope in (step, job.get("defaults", {}).get("run", {}),
                  wf.get("defaults", {}).get("run", {})):
        if "shell" in scope:
            return scope["shell"]
    return None


def _unguarded_pipes(wf):
    """Steps that pipe a command (a `|` that is not `||`) in a shell without pipefail and with no
    `set -o pipefail` of their own before the pipe."""
    bad = []
    for name, job in wf["jobs"].items():
        for step in job.get("steps", []):
            script = step.get("run", "")
            if not re.search(r"(?<!\|)\|(?!\|)", script):
                continue
            shell = _effective_shell(wf, job, step)
            if shell in PIPEFAIL_SHELLS:
                continue
            before = script[:re.search(r"(?<!\|)\|(?!\|)", script).start()]
            if re.search(r"set -[a-z]*o pipefail|set -o pipefail", before):
                continue
            bad.append((name, step.get("name", script.splitlines()[0])))
    return bad


def test_every_piped_step_fails_when_its_command_fails():
    assert any("|" in s.get("run", "") for _, _, s in _steps())  # the workflow does pipe
    assert not _unguarded_pipes(WF), _unguarded_pipes(WF)


def test_the_pipe_check_finds_a_pipe_without_pipefail():
    """The check above can fail: the workflow as it was (no shell named) is caught, and so is a
    step that names `sh` or overrides the workflow's bash."""
    old = {"jobs": {"tests": {"steps": [{"name": "t", "run": ".ci/run 2>&1 | tee tests.log"}]}}}
    assert _unguarded_pipes(old) == [("tests", "t")]
    overridden = {"defaults": {"run": {"shell": "bash"}},
                  "jobs": {"tests": {"steps": [{"name": "t", "shell": "sh", "run": "a | tee b"}]}}}
    assert _unguarded_pipes(overridden) == [("tests", "t")]
    guarded = {"jobs": {"j": {"steps": [{"name": "g", "run": "set -o pipefail\na | tee b"}]}}}
    assert _unguarded_pipes(guarded) == []
    assert _unguarded_pipes({"jobs": {"j": {"steps": [{"run": "a || b"}]}}}) == []
