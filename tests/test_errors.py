"""Every bad input a clear error, nothing lost: each row of the table is one input a reader
might give the command line, and the message it must print (`nlbudget: error: …`, naming the
file, folder or value) with its exit status. The README's table is this one."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from nlbudget import cli, paths
from nlbudget.book import preflight, runner


def _results(root: Path, profile: str = "ci", figures=None, verdicts=None) -> Path:
    d = root / profile
    d.mkdir(parents=True, exist_ok=True)
    (d / "01_a.json").write_text(json.dumps({"figures": {"x": 1.0}} if figures is None
                                            else figures))
    (d / "01_a.verdicts.json").write_text(json.dumps({"claims": []} if verdicts is None
                                                     else verdicts))
    return d


def _corrupt(root: Path) -> Path:
    d = _results(root)
    (d / "01_a.json").write_text('{"figures": {"x": 1.0,')  # cut off mid-write
    return d / "01_a.json"


def _file(t: Path, name: str = "file", data: bytes = b"x") -> Path:
    (t / name).write_bytes(data)
    return t / name


def _two(t: Path, a_profile: str = "ci", corrupt_b: bool = False) -> list[str]:
    _results(t / "a", a_profile)
    _corrupt(t / "b") if corrupt_b else _results(t / "b")
    return ["compare", str(t / "a"), str(t / "b")]


def _with(t: Path, argv: list[str], **results) -> list[str]:
    _results(t, **results)
    return argv


def _not_text(t: Path) -> list[str]:
    _results(t)
    _file(t / "ci", "01_a.json", b"\xff\xfe\x00")
    return ["judge", "01", "--results-dir", str(t)]


# (name, setup(tmp) -> argv, what the message must say, exit status): the README's table
CASES = [
    ("compare: missing folders",
     lambda t: ["compare", str(t / "nonexistent1"), str(t / "nonexistent2")],
     ["the first results folder", "nonexistent1 does not exist"], 2),
    ("compare: a file, not a folder",
     lambda t: ["compare", str(_file(t)), str(t)],
     ["the first results folder", "is not a folder"], 2),
    ("compare: no results at the profile", lambda t: _two(t, a_profile="smoke"),
     ["the first results folder", "has no results at profile 'ci'"], 2),
    ("compare: a corrupted results file", lambda t: _two(t, corrupt_b=True),
     ["01_a.json: not a results file: invalid JSON at line 1", "rerun its chapter"], 2),
    ("ledger: a corrupted results file",
     lambda t: [_corrupt(t), "ledger", "--results-dir", str(t)][1:],
     ["01_a.json: not a results file: invalid JSON"], 2),
    ("ledger: a verdicts file without claims",
     lambda t: _with(t, ["ledger", "--results-dir", str(t)], verdicts={"verdicts": []}),
     ["01_a.verdicts.json: not a results file: it has no 'claims'"], 2),
    ("judge: a figures file without figures",
     lambda t: _with(t, ["judge", "01", "--results-dir", str(t)], figures={"claims": []}),
     ["01_a.json: not a results file: it has no 'figures'"], 2),
    ("judge: a results file that is not text", _not_text,
     ["01_a.json: not a results file: not UTF-8 text"], 2),
    ("run: a results folder that cannot be made",
     lambda t: ["run", "01", "--profile", "smoke", "--results-dir", str(_file(t) / "r")],
     ["results folder", "is not writable (Not a directory)"], 2),
    ("book: a build folder that cannot be made",
     lambda t: ["book", "--profile", "smoke", "--results-dir", str(t / "r"), "--build-dir",
                str(_file(t) / "build")],
     ["build folder", "is not writable (Not a directory)"], 2),
    ("run: an unknown profile", lambda t: ["run", "01", "--profile", "fast"],
     ["unknown profile 'fast'", "valid profiles: smoke, ci, full, paper"], 2),
    ("run: an unknown parameter",
     lambda t: ["run", "01", "--profile", "smoke", "--results-dir", str(t), "-p", "stepz=3"],
     ["stepz"], 2),
    ("run: an unknown chapter", lambda t: ["run", "99", "--profile", "smoke"], ["99"], 2),
    ("ledger: an unknown profile", lambda t: ["ledger", "--profile", "huge"],
     ["unknown profile 'huge'"], 2),
]


@pytest.mark.parametrize("name,setup,says,status", CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_is_one_clear_error(name, setup, says, status, tmp_path, capsys):
    argv = setup(tmp_path)
    assert cli.main(argv) == status
    err = capsys.readouterr().err
    assert err.startswith("nlbudget: error: ") and "Traceback" not in err, err
    for s in says:
        assert s in err, (s, err)


def test_compare_of_two_missing_folders_is_no_false_all_clear(tmp_path, capsys):
    """It once printed nothing and exited 0: "no differences"."""
    assert cli.main(["compare", str(tmp_path / "x"), str(tmp_path / "y")]) != 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permissions")
def test_a_read_only_results_folder_fails_before_the_chapter_runs(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert cli.main(["run", "01", "--profile", "smoke", "--results-dir", str(ro)]) == 2
    finally:
        ro.chmod(0o700)
    assert "is not writable" in capsys.readouterr().err


def test_writable_checks_by_writing(tmp_path):
    assert preflight.writable(tmp_path / "a" / "b", "results folder").is_dir()
    assert not list((tmp_path / "a" / "b").iterdir())  # the probe leaves nothing behind


def test_a_failing_notebook_names_its_cell_error_and_executed_copy(tmp_path):
    """A papermill failure is one line: the notebook, the cell, the error, and where the
    executed notebook with its traceback was kept (no executed copy where the good one goes)."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("y = x + 1"),
        nbformat.v4.new_code_cell("raise ValueError('the corpus is empty')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    src = tmp_path / "nb.ipynb"
    nbformat.write(nb, src)
    out = tmp_path / "out" / "nb.ipynb"
    with pytest.raises(runner.ChapterFailed) as e:
        runner._execute(src, out, {"x": 2}, timeout=120, progress=False)
    msg = str(e.value)
    assert "nb.ipynb failed in cell" in msg and "ValueError: the corpus is empty" in msg
    assert "raise ValueError" in msg
    kept = Path(msg.rsplit("traceback: ", 1)[1])
    assert kept.is_file() and not out.exists()
    assert "the corpus is empty" in kept.read_text()


def test_sigterm_stops_the_runners_and_kernels(tmp_path):
    """A SIGTERM to `nlbudget run` (a `timeout`, a cancelled job) stops its kernel too: no
    process it started is left computing."""
    psutil = pytest.importorskip("psutil")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import time\nwhile True:\n    time.sleep(0.1)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    src = tmp_path / "spin.ipynb"
    nbformat.write(nb, src)
    code = ("import sys; from pathlib import Path; from nlbudget.book import runner; "
            "runner.stop_on_signals(); "
            f"runner._execute(Path({str(src)!r}), Path({str(tmp_path / 'o.ipynb')!r}), {{}}, "
            "600, False)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                            env={**os.environ, "NLBUDGET_ROOT": str(paths.repo_root())})
    parent = psutil.Process(proc.pid)
    deadline = time.time() + 120
    kids = []
    while time.time() < deadline and not any(
            "ipykernel" in " ".join(k.cmdline()) for k in kids):
        time.sleep(0.5)
        try:
            kids = parent.children(recursive=True)
        except psutil.Error:
            break
    assert kids, "the kernel never started"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    _, alive = psutil.wait_procs(kids, timeout=15)
    assert not alive, [k.cmdline() for k in alive]


@pytest.mark.parametrize("windows", [False, True])
def test_an_interrupted_build_kills_each_runner_and_its_kernel(tmp_path, monkeypatch, windows):
    """`kill_tree`, which an interrupted build calls on every runner still going, leaves no
    process of the tree alive, on POSIX (its process group) and where `os.killpg` and
    `signal.SIGKILL` do not exist (Windows, simulated by removing `os.killpg`, which sends the
    call down psutil's path; psutil's own POSIX kill still needs SIGKILL, so that stays: the
    old code's `os.killpg(…, signal.SIGKILL)` raised AttributeError there)."""
    psutil = pytest.importorskip("psutil")
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
            "time.sleep(300)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    parent = psutil.Process(proc.pid)
    deadline = time.time() + 60
    while time.time() < deadline and not parent.children():
        time.sleep(0.1)
    kids = parent.children(recursive=True)
    assert kids, "the child never started"
    if windows:
        monkeypatch.delattr(os, "killpg")
    runner.kill_tree(proc)
    proc.wait(timeout=30)
    _, alive = psutil.wait_procs(kids, timeout=15)
    assert not alive, [k.cmdline() for k in alive]
