"""The instructor's kit: a meeting's slides built from the chapter as executed (`nlbudget
slides`), and a chapter's exercises as an otter-grader assignment that grades a solved notebook
full marks and an unsolved one zero (`nlbudget grading`)."""

import re

import nbformat
import pytest

from nlbudget import cli
from nlbudget.book import exercises
from nlbudget.teaching import grading, slides


# ------------------------------------------------------------------ slides

def test_plain_fills_glued_numbers_and_drops_myst():
    glued = {"zero": "1e-12"}
    text = slides.plain("(ch01-x)=\n## 5. Claim\n\nbelow {glue:md}`zero` — see {doc}`the notation "
                        "<../notation>` and {ref}`ex01-proof`.", glued)
    assert text == "## 5. Claim\n\nbelow 1e-12 — see the notation and ex01-proof."


def test_every_chapter_has_a_meeting_with_an_agenda_and_questions():
    for key in exercises.available():
        number, section = slides.meeting(key)
        assert 1 <= number <= 7 and "| minutes |" in section and "*Discussion.*" in section


@pytest.mark.exercises
def test_slides_01_build_from_the_executed_chapter(smoke, capsys):
    res, bld = smoke
    assert cli.main(["slides", "01", "--profile", "smoke", "--results-dir", str(res),
                     "--build-dir", str(bld)]) == 0
    out = bld / "smoke" / "slides" / "01_gated_mlp_symmetry.slides.html"
    html = out.read_text(encoding="utf-8")
    n = slides.summary(out)
    executed = nbformat.read(bld / "smoke" / "chapters" / "01_gated_mlp_symmetry.ipynb", 4)
    figures = sum("image/png" in o.get("data", {}) for c in executed.cells
                  if c.cell_type == "code" for o in c.outputs)
    assert "reveal" in html and n["figures"] == figures >= 1, n  # the chapter's own figures
    sections = sum(bool(re.search(r"^## ", c.source, re.M)) for c in executed.cells
                   if c.cell_type == "markdown")
    assert n["sections"] >= sections + 3  # title, agenda, every section, questions
    assert "Agenda" in html and "Questions" in html and "{glue" not in html
    code_cells = re.findall(r'class="jp-Cell jp-CodeCell[^"]*"', html)
    assert code_cells and all("jp-mod-noInput" in c for c in code_cells)  # no code shown
    assert "hl-ipython3" not in html
    assert "slides:" in capsys.readouterr().out


def test_slides_need_the_executed_chapter(tmp_path):
    from nlbudget.errors import ParameterError

    with pytest.raises(ParameterError, match="nlbudget run 01 --profile smoke"):
        slides.write("01", "smoke", tmp_path / "res", tmp_path / "build")


# ------------------------------------------------------------------ grading

def test_the_master_notebook_has_one_question_per_check():
    for key in exercises.available():
        nb = grading.master(key)
        raw = [c.source for c in nb.cells if c.cell_type == "raw"]
        assert raw[0].startswith("# ASSIGNMENT CONFIG")
        begun = [r for r in raw if r.startswith("# BEGIN QUESTION")]
        assert len(begun) == sum(e["parts"] for e in exercises.catalogue(key)), key
        assert raw.count("# END QUESTION") == len(begun)
        assert not any("checks.score()" in c.source for c in nb.cells)


def test_a_test_cell_runs_the_books_check_on_the_students_objects():
    cell = grading.test_cell("checks.predict_width_explodes(predict(), profile, results_dir)")
    assert "def test_predict_width_explodes(predict, profile, results_dir):" in cell
    assert "assert checks.passed('predict_width_explodes')" in cell
    assert cell.rstrip().endswith("# IGNORE")
    ns = {}
    exec(cell.rsplit("\n", 2)[0], ns)  # plain Python, without the master's own call
    import inspect

    params = inspect.signature(ns["test_predict_width_explodes"]).parameters
    assert list(params) == ["predict", "profile", "results_dir"]


@pytest.mark.exercises
def test_otter_grades_a_solved_notebook_full_and_an_unsolved_one_zero(tmp_path):
    pytest.importorskip("otter", reason="the teach extra (otter-grader) is not installed")
    out = grading.export("01", tmp_path / "assignment")
    assert out["student"].is_file() and out["solution"].is_file()
    student = nbformat.read(out["student"], 4)
    assert "NotImplementedError" in "".join(c.source for c in student.cells)
    assert not any("BEGIN SOLUTION" in c.source or "# SOLUTION" in c.source
                   for c in student.cells)
    n = len(grading.questions(out["autograder"]))
    assert n == sum(e["parts"] for e in exercises.catalogue("01"))
    solved = grading.grade(out["autograder"], out["solution"], tmp_path / "solved")
    assert solved["possible"] == n and solved["score"] == n, solved
    unsolved = grading.grade(out["autograder"], out["student"], tmp_path / "unsolved")
    assert unsolved["possible"] == n and unsolved["score"] == 0, unsolved
    # one exercise left undone: that question alone scores nothing
    part = nbformat.read(out["solution"], 4)
    stub = next(c.source for c in student.cells if "def symmetric_module" in c.source)
    for c in part.cells:
        if c.cell_type == "code" and "def symmetric_module" in c.source:  # its solution
            c.source = stub
    nbformat.write(part, tmp_path / "part.ipynb")
    partly = grading.grade(out["autograder"], tmp_path / "part.ipynb", tmp_path / "partly")
    assert partly["score"] == n - 1 and partly["tests"]["symmetric_module"] == 0, partly
