"""`nlbudget grading NN`: a chapter's exercises as an otter-grader assignment, so that a course
can hand out the student notebook, collect it, and grade it with `otter run` (or on
Gradescope with the autograder zip).

The exercises notebook becomes otter-assign's master notebook: the set-up cells as they are;
each exercise part (stub, solution, check) a question of one point whose solution cell shows
the student the stub, followed by the book's check cell as it is (the student's feedback,
hints included), and whose one hidden test runs the same check on the student's objects when
grading — a function check passes when it does not raise, a prediction when it was right. Nothing is
re-implemented: otter runs `nlbudget.teaching.checks`, the same checks as the notebooks."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat

from nlbudget.book import exercises, profiles
from nlbudget.errors import ParameterError



def _left_out(source: str) -> bool:
    """The exercises notebook's score cell and its heading: otter scores instead."""
    return "checks.score()" in source or source.lstrip().startswith("## Your score")


def _raw(text: str):
    return nbformat.v4.new_raw_cell(text)


def _arguments(call: str) -> list[str]:
    """The notebook's names a check cell passes to its check (`checks.width(width)` → width;
    `checks.predict_x(predict(), profile, results_dir)` → predict, profile, results_dir)."""
    node = ast.parse(call.strip()).body[0].value
    names = [n.id for a in node.args for n in ast.walk(a) if isinstance(n, ast.Name)]
    return list(dict.fromkeys(names))


def _check_name(call: str) -> str:
    """The check a check cell calls: `checks.width(width)` → width."""
    return call.strip().split("(", 1)[0].split(".", 1)[1]


def test_cell(call: str) -> str:
    """An exception-based otter test that runs the check of `call` on the student's objects:
    it fails when the check raises (a wrong function, a stub) or reports a wrong prediction."""
    name, args = _check_name(call), ", ".join(_arguments(call))
    return (f'""" # BEGIN TEST CONFIG\npoints: 1\nhidden: true\n""" # END TEST CONFIG\n'
            f"def test_{name}({args}):\n"
            f"    from nlbudget.teaching import checks\n\n"
            f"    {call.strip()}\n"
            f"    assert checks.passed({name!r}), \"the check did not pass\"\n\n"
            f"test_{name}({args})  # IGNORE\n")


def solution_cell(stub: str, solution: str) -> str:
    """The solution, with the stub as what the student sees (otter's prompt block)."""
    if "'''" in stub:
        raise ValueError("a stub with ''' cannot be an otter prompt")
    return (f"''' # BEGIN PROMPT\n{stub.strip()}\n'''; # END PROMPT\n"
            f"# BEGIN SOLUTION NO PROMPT\n{solution.strip()}\n# END SOLUTION\n")


def master(key: str) -> nbformat.NotebookNode:
    """Chapter `key`'s exercises as otter-assign's master notebook (one question per check)."""
    key = profiles.chapter(key).key
    nb = nbformat.read(exercises.notebook(key), as_version=4)
    config = {"name": f"nlbudget-{key}", "init_cell": False, "check_all_cell": False,
              "export_cell": False, "run_tests": False, "generate": True,
              "tests": {"ok_format": False}}
    cells = [_raw("# ASSIGNMENT CONFIG\n" + json.dumps(config))]
    tag = lambda c: c.metadata.get("tags", [])  # noqa: E731
    i, n = 0, len(nb.cells)
    while i < n:
        c = nb.cells[i]
        if _left_out(c.source):
            i += 1
            continue
        if exercises.EXERCISE_TAG in tag(c):
            solution, check = nb.cells[i + 1], nb.cells[i + 2]
            if exercises.SOLUTION_TAG not in tag(solution) or not check.source.startswith(
                    "checks."):
                raise ValueError(f"{exercises.notebook(key).name}: cell {i} is a stub without "
                                 "its solution and check after it")
            name = _check_name(check.source)
            cells += [_raw(f"# BEGIN QUESTION\nname: {name}\npoints: 1"), _raw("# BEGIN SOLUTION"),
                      nbformat.v4.new_code_cell(solution_cell(c.source, solution.source)),
                      _raw("# END SOLUTION"), _raw("# BEGIN TESTS"), nbformat.v4.new_code_cell(test_cell(check.source)),
                      _raw("# END TESTS"), _raw("# END QUESTION"), check]
            i += 3
            continue
        cells.append(c)
        i += 1
    return nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)


def _otter(*args: str, cwd: Path) -> str:
    try:
        p = subprocess.run([sys.executable, "-m", "otter", *args], cwd=cwd, text=True,
                           capture_output=True)
    except FileNotFoundError as e:  # pragma: no cover - the interpreter itself is missing
        raise ParameterError(str(e)) from e
    if p.returncode:
        if "No module named otter" in p.stderr:
            raise ParameterError("otter-grader is not installed: `pip install -e .[teach]`")
        raise RuntimeError(f"otter {args[0]} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def export(key: str, out: Path) -> dict[str, Path]:
    """Write chapter `key`'s assignment under `out` with `otter assign`: the master notebook,
    the student notebook (`student/`), the solutions and the autograder zip (`autograder/`)."""
    key = profiles.chapter(key).key
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stem = exercises.notebook(key).stem
    src = out / "master" / f"{stem}.ipynb"
    src.parent.mkdir(exist_ok=True)
    nbformat.write(master(key), src)
    _otter("assign", str(src), str(out / "dist"), cwd=src.parent)
    zips = sorted((out / "dist" / "autograder").glob("*.zip"))
    if not zips:
        raise RuntimeError(f"otter assign wrote no autograder zip under {out / 'dist'}")
    return {"master": src, "student": out / "dist" / "student" / f"{stem}.ipynb",
            "solution": out / "dist" / "autograder" / f"{stem}.ipynb", "autograder": zips[-1]}


def grade(autograder: Path, notebook: Path, out: Path) -> dict:
    """Grade one submitted notebook with `otter run` (locally, no container). Returns
    {"score": points, "possible": points, "tests": {name: points}}."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    _otter("run", "-a", str(Path(autograder).resolve()), "-o", str(out),
           str(Path(notebook).resolve()), cwd=out)
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    graded = [t for t in doc.get("tests", []) if t.get("max_score")]  # not otter's summary
    return {"score": sum(t.get("score", 0) for t in graded),
            "possible": sum(t["max_score"] for t in graded),
            "tests": {t["name"]: t.get("score", 0) for t in graded}}


def questions(autograder: Path) -> list[str]:
    """The questions an autograder zip grades (its test files' names)."""
    with zipfile.ZipFile(autograder) as z:
        return sorted(Path(n).stem for n in z.namelist() if n.startswith("tests/")
                      and n.endswith(".py"))
