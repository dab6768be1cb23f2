"""The exercise notebooks: their shape (fast), and, through papermill (marker `exercises`):
with solutions every check passes; in the student edition execution stops at the first
exercise with NotImplementedError."""

import re

import nbformat
import papermill as pm
import pytest

from nlbudget.teaching import checks
from nlbudget import paths
from nlbudget.book import exercises, launch, plan, profiles

KEYS = exercises.available()


def test_every_chapter_has_exercises():
    assert KEYS == profiles.available_chapters()


@pytest.mark.parametrize("key", KEYS)
def test_exercise_notebook_shape(key):
    path = exercises.notebook(key)
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "strip outputs"
    first = nb.cells[0]  # a hidden first cell installs the package where it is missing
    assert first.source == launch.install_cell_source(launch.repository_url())
    assert "remove-cell" in first.metadata["tags"]
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "profile = " in params[0].source
    cat = exercises.catalogue(key)
    assert 3 <= len(cat) <= 5, "3–5 exercises per chapter"
    assert any(e["kind"] == "Predict, then check" for e in cat)
    assert [e["number"] for e in cat] == [f"{int(key)}.{i}" for i in range(1, len(cat) + 1)]
    stubs = [c for c in code if exercises.EXERCISE_TAG in c.metadata.get("tags", [])]
    assert sum(e["parts"] for e in cat) == len(stubs) and all(e["parts"] >= 1 for e in cat)
    for e in cat:
        stub, solution, check = (nb.cells[i] for i in e["cells"])
        assert stub.metadata["tags"] == [exercises.EXERCISE_TAG]
        assert f'raise NotImplementedError("Exercise {e["number"]}' in stub.source
        assert set(solution.metadata["tags"]) == {exercises.SOLUTION_TAG, "hide-input"}
        assert solution.metadata["mystnb"]["code_prompt_show"] == \
            f"Show the solution to exercise {e['number']}"
        assert "NotImplementedError" not in solution.source
        assert check.source.startswith("checks.") and check.cell_type == "code"
        name = re.match(r"checks\.(\w+)\(", check.source).group(1)
        assert callable(getattr(checks, name))
        assert 1 <= e["level"] <= 3 and 1 <= e["minutes"] <= 30
    intro = next(c.source for c in nb.cells if c.cell_type == "markdown")
    total = int(re.search(r"\*\*Time:\*\* about\s+(\d+)\s+minutes", intro).group(1))
    assert total == sum(e["minutes"] for e in cat), "the intro's time is the exercises' sum"
    assert f"{{doc}}`../{profiles.chapter(key).stem}`" in intro
    # only what pip installs: no corpus or pretrained model is loaded
    text = "\n".join(c.source for c in code)
    assert not re.search(r"corpora\.|models\.load|pydocs|fetch", text)


def test_student_copy_drops_solutions_only():
    nb = nbformat.read(exercises.notebook("01"), as_version=4)
    st = exercises.student_copy(nb)
    sol = [c for c in nb.cells if exercises.SOLUTION_TAG in c.metadata.get("tags", [])]
    assert len(st.cells) == len(nb.cells) - len(sol) and sol
    assert not any(exercises.SOLUTION_TAG in c.metadata.get("tags", []) for c in st.cells)
    assert len(nb.cells) == len(nbformat.read(exercises.notebook("01"), as_version=4).cells)


def _edition_names() -> list[str]:
    return sorted([exercises.notebook(k).name for k in KEYS]
                  + [exercises.predict_name(k) for k in KEYS])


def test_committed_student_edition_is_the_exercises_without_solutions():
    """`notebooks/student/` (what the student book's launch buttons open) is exactly the
    student copy of every exercise notebook and its predict-first page: rerun `nlbudget
    student-edition` after an edit."""
    folder = exercises.student_folder()
    assert sorted(p.name for p in folder.glob("*.ipynb")) == _edition_names()
    for key in KEYS:
        src = nbformat.read(exercises.notebook(key), as_version=4)
        for name, nb in ((exercises.notebook(key).name, exercises.student_copy(src, key)),
                         (exercises.predict_name(key), exercises.predict_first(src, key))):
            got = nbformat.writes(nbformat.read(folder / name, as_version=4))
            assert got == nbformat.writes(nb), f"{name}: run `nlbudget student-edition`"


def test_every_prediction_moves_before_its_chapter():
    """In the student edition each *predict, then check* exercise is on the predict-first page
    (its stub and check, never its solution or a measured value), and the exercise page points
    there instead; every other exercise stays where it was."""
    for key in KEYS:
        src = nbformat.read(exercises.notebook(key), as_version=4)
        cat = exercises.catalogue(key)
        predicts = [e["number"] for e in cat if e["kind"] == exercises.PREDICT]
        assert predicts, key  # every chapter has one
        first = exercises.predict_first(src, key)
        text = "\n".join(c.source for c in first.cells)
        st = "\n".join(c.source for c in exercises.student_copy(src, key).cells)
        for e in cat:
            here = f"## Exercise {e['number']} —" in text
            assert here == (e["number"] in predicts), (key, e["number"])
            assert f"## Exercise {e['number']} —" in st, (key, e["number"])
        assert text.count("checks.predict_") == len(predicts) and "checks.start(" in text
        assert not any(exercises.SOLUTION_TAG in c.metadata.get("tags", [])
                       for c in first.cells)
        assert st.count("before reading the chapter") == len(predicts)
        assert "checks.predict_" not in st, key


def test_student_edition_command(tmp_path):
    from nlbudget import cli

    assert cli.main(["student-edition", "--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.glob("*.ipynb"))
    assert written == _edition_names()
    for p in tmp_path.glob("*.ipynb"):
        assert "hide-input" not in p.read_text()  # no solution (the only hide-input cells)


def test_a_bad_profile_stops_at_once():
    with pytest.raises(profiles.ParameterError, match="valid profiles: smoke, ci, full, paper"):
        checks.start("01", "quick")


@pytest.mark.exercises
def test_with_solutions_every_check_passes(smoke):
    res, bld = smoke
    for key in KEYS:
        out = exercises.executed(key, "smoke", bld)
        nb = nbformat.read(out, as_version=4)
        text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                       for o in c.outputs if o.output_type == "stream")
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
                  if o.output_type == "error"]
        assert not errors and "✗" not in text, key
        assert text.count("✓") == sum(e["parts"] for e in exercises.catalogue(key)), (key, text)
    # nothing changed: a second pass runs none of them
    assert {s.why for s in plan.make("smoke", 0, res, bld).exercises} == {"fresh"}


@pytest.mark.exercises
def test_student_edition_stops_at_the_first_exercise(smoke, tmp_path):
    """One student notebook through a kernel (it stops at its first exercise's stub); every
    other one read: its first code that raises is that exercise's stub, and nothing before it
    checks anything but the notebook's start."""
    res, _ = smoke
    paths_ = exercises.student_edition(tmp_path / "student")
    for path in paths_:
        key = path.name[:2]
        kinds = [(e["number"], e["kind"] == exercises.PREDICT) for e in exercises.catalogue(key)]
        first = next(n for n, p in kinds if p == path.name.endswith("-predict.ipynb"))
        code = [c.source for c in nbformat.read(path, as_version=4).cells
                if c.cell_type == "code"]
        stub = next(i for i, c in enumerate(code) if "raise NotImplementedError" in c)
        assert f"Exercise {first}:" in code[stub], key
        before = "\n".join(code[:stub])
        assert not re.search(r"checks\.(?!start\()\w+\(", before), key
    path = next(p for p in paths_ if p.name.endswith("-predict.ipynb"))  # runs out of the box
    first = next(e["number"] for e in exercises.catalogue(path.name[:2])
                 if e["kind"] == exercises.PREDICT)
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(path), str(tmp_path / f"out_{path.name}"),
                            parameters={"profile": "smoke", "results_dir": str(res)},
                            kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    assert e.value.ename == "NotImplementedError", (e.value.ename, e.value.evalue)
    assert f"Exercise {first}:" in e.value.evalue


@pytest.mark.exercises
def test_a_solution_that_prints_a_cross_fails_the_build_at_smoke_and_ci(tmp_path, monkeypatch):
    from nlbudget.book import runner

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('profile = "ci"\nresults_dir = None',
                                  metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell('print("✗ predicted False; the book measured True")')],
        metadata={"kernelspec": {"name": "python3", "language": "python",
                                 "display_name": "Python 3"}})
    src = tmp_path / "01_x.ipynb"
    nbformat.write(nb, src)
    monkeypatch.setattr(exercises, "notebook", lambda key: src)
    monkeypatch.setattr(exercises, "executed",
                        lambda key, profile, b: tmp_path / profile / "x.ipynb")
    with pytest.raises(RuntimeError, match="a solution's check failed:\n  ✗ predicted False"):
        runner.run_exercises("01", "ci", tmp_path, tmp_path)
    assert not (tmp_path / "ci" / "x.ipynb").exists()  # no executed copy to serve
    assert runner.run_exercises("01", "full", tmp_path, tmp_path).is_file()  # said, not fatal


def _meetings() -> dict[str, str]:
    """{chapter key: its meeting's section} of the instructors' page."""
    text = (paths.repo_root() / "book" / "instructors.md").read_text()
    parts = re.split(r"^## Meeting \d+ — ", text, flags=re.M)[1:]
    return {re.search(r"\(chapter (\d\d)\)", p.splitlines()[0]).group(1): p for p in parts}


def test_every_agenda_fits_its_minutes_and_its_exercises():
    """Each meeting's agenda adds up to 90 minutes; every exercise of its chapter is on it once,
    in a row at least as long as the exercises' boxes; discussion, stretch and their answer
    key are there — for every chapter, the seventh included."""
    from nlbudget.book import build

    meetings = _meetings()
    assert list(meetings) == [k for k, _ in build.MEETINGS] == KEYS
    for key, text in meetings.items():
        boxes = {e["number"]: e["minutes"] for e in exercises.catalogue(key)}
        rows = re.findall(r"^\| (\d+) \| (.+) \|$", text, re.M)
        assert sum(int(m) for m, _ in rows) == 90, key
        seen = []
        for minutes, activity in rows:
            named = []
            for a, b in re.findall(r"(\d\.\d)(?:–(\d\.\d))?", activity):
                lo, hi = a, b or a
                named += [n for n in boxes if lo <= n <= hi]
            seen += named
            assert int(minutes) >= sum(boxes[n] for n in named), (key, activity)
        assert sorted(seen) == sorted(boxes), (key, seen)
        for part in ("*Discussion.*", "*Stretch.*", "{admonition} Answer key"):
            assert part in text, (key, part)
