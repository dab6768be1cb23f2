"""The exercise notebooks (`notebooks/exercises/NN_<stem>.ipynb`): where they are, what they
hold (`catalogue`), and the student edition.

An exercise is four cells: a statement (objective, difficulty, minutes), a stub tagged
`exercise` that raises `NotImplementedError`, a solution tagged `solution` (folded on the page
by `hide-input`) and a check (`nlbudget.teaching.checks`). The book executes every exercise notebook,
solutions included, after its chapter (its predictions read the chapter's results file);
`student_edition` writes copies without the solution cells, which stop at the first check.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

from nlbudget import paths
from nlbudget.book import profiles

SOLUTION_TAG, EXERCISE_TAG = "solution", "exercise"


def folder() -> Path:
    return paths.shipped() / "notebooks" / "exercises"


def student_folder() -> Path:
    """The student edition, committed beside the exercises (`notebooks/student/`): what the
    student book's launch buttons open. `nlbudget student-edition` rewrites it; a test keeps
    it equal to `student_copy` of every exercise notebook."""
    return paths.shipped() / "notebooks" / "student"


def notebook(key: str) -> Path:
    """The exercise notebook of chapter `key` (named as the chapter is)."""
    return folder() / f"{profiles.chapter(key).stem}.ipynb"


def available() -> list[str]:
    """Keys of the chapters that have an exercise notebook, in book order."""
    return [k for k in profiles.CHAPTERS if notebook(k).is_file()]


#: The kind of exercise the student edition asks before the chapter (`predict_first`).
PREDICT = "Predict, then check"


def predict_name(key: str) -> str:
    """The file name of chapter `key`'s predict-first page (`predict_first`)."""
    return f"{profiles.chapter(key).stem}-predict.ipynb"


def _sections(nb) -> tuple[list, list[tuple[str, list]], list]:
    """The notebook's cells as (the preamble before the first exercise, [(kind, the cells of
    one exercise: its heading to the next `## ` heading)], what follows the last one)."""
    pre, sections, post = [], [], []
    for c in nb.cells:
        head = c.cell_type == "markdown" and re.search(r"^## ", c.source, re.M)
        if head and _HEAD.search(c.source):
            meta = _META.search(c.source)
            sections.append((meta["kind"] if meta else "", [c]))
        elif head:
            post.append(c)
        elif post or not sections:
            (post if post else pre).append(c)
        else:
            sections[-1][1].append(c)
    return pre, sections, post


def _clean(nb):
    """A copy without solution cells and outputs."""
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if SOLUTION_TAG not in c.metadata.get("tags", [])]
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    return nb


def student_copy(nb, key: str | None = None):
    """The notebook without its solution cells (and without outputs). With `key`, its
    predictions are not here but on the page before the chapter (`predict_first`), each
    replaced by a pointer to it."""
    nb = _clean(nb)
    if key is None:
        return nb
    pre, sections, post = _sections(nb)
    cells = list(pre)
    for kind, part in sections:
        if kind == PREDICT:
            title = _HEAD.search(part[0].source)
            cells.append(nbformat.v4.new_markdown_cell(
                f"## Exercise {title['number']} — {title['title'].strip()}\n\n"
                f"You made this prediction before reading the chapter, on "
                f"{{doc}}`{predict_name(key)[:-6]}`; run its check there.",
                id=f"predicted-before-{title['number'].replace('.', '-')}"))
        else:
            cells.extend(part)
    nb.cells = cells + post
    return nb


def predict_first(nb, key: str):
    """Chapter `key`'s predict-first page for the student edition: the exercise notebook's
    preamble and its *predict, then check* exercises only, read before the chapter, so no page
    the student has read yet gives a prediction's answer; the check shows the measured value
    and why only after the answer (`teaching.machinery.check_prediction`)."""
    nb = _clean(nb)
    pre, sections, _ = _sections(nb)
    stem = profiles.chapter(key).stem
    intro = nbformat.v4.new_markdown_cell(
        f"# Predict first: before you read chapter {key}\n\n"
        f"Make these predictions before you open {{doc}}`../{stem}`: it shows the measured "
        f"values. Write each prediction, then run its check: ✓ shows the measured value and "
        f"why; ✗ says only that it is not what the book measured (think again, or "
        f"`checks.reveal()` to give up and read the answer). The other exercises of the chapter "
        f"follow it: {{doc}}`{stem}`.", id="predict-first")
    body = [c for kind, part in sections if kind == PREDICT for c in part]
    keep = [c for c in pre if not (c.cell_type == "markdown" and c.source.startswith("# "))]
    nb.cells = [*keep[:3], intro, *keep[3:], *body]
    return nb


def student_edition(out: str | Path | None = None) -> list[Path]:
    """Write the student edition into `out` (default `notebooks/student/`, the committed
    copies): every exercise notebook without solutions and with its predictions moved to a
    predict-first page (`predict_first`), which is written beside it. Returns the files
    written."""
    out = Path(out or student_folder())
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for key in available():
        src = nbformat.read(notebook(key), as_version=4)
        for name, nb in ((notebook(key).name, student_copy(src, key)),
                         (predict_name(key), predict_first(src, key))):
            dst = out / name
            tmp = dst.with_name(f".{dst.name}.part")
            nbformat.write(nb, tmp)
            tmp.replace(dst)
            written.append(dst)
    return written


def executed(key: str, profile: str, build_dir=None) -> Path:
    """Where the book build writes chapter `key`'s executed exercise notebook
    (`runner.run_exercises`)."""
    return (Path(build_dir or paths.build_dir()) / profile / "exercises"
            / f"{profiles.chapter(key).stem}.ipynb")


# ------------------------------------------------------------------ what a notebook holds

_HEAD = re.compile(r"^## Exercise (?P<number>\d+\.\d+) — (?P<title>.+)$", re.M)
_LABEL = re.compile(r"^\((?P<label>ex\d\d-[a-z0-9-]+)\)=$", re.M)
_META = re.compile(r"\{admonition\} (?P<kind>Write|Prove|Decide|Experiment|Predict, then check) · "
                   r"(?P<level>★+) · "
                   r"about (?P<minutes>\d+) minutes")


def catalogue(key: str) -> list[dict]:
    """The exercises of chapter `key`'s notebook, in order: number, title, label (for
    cross-references), kind, level (★ to ★★★), minutes, the indices of its (first) stub,
    solution and check cells, and `parts`: how many stubs it has (each with its own solution
    and check), counted up to the next `## ` heading."""
    nb = nbformat.read(notebook(key), as_version=4)
    out, current = [], None
    for i, c in enumerate(nb.cells):
        if current is not None and EXERCISE_TAG in c.metadata.get("tags", []):
            current["parts"] += 1
        head = _HEAD.search(c.source) if c.cell_type == "markdown" else None
        if not head:
            if c.cell_type == "markdown" and re.search(r"^## ", c.source, re.M):
                current = None  # another section ends the exercise
            continue
        meta, label = _META.search(c.source), _LABEL.search(c.source)
        if meta is None or label is None:
            raise ValueError(f"{notebook(key).name}: exercise {head['number']} needs a "
                             "'(exNN-name)=' label and a '{admonition} KIND · LEVEL · about N "
                             "minutes' line")
        out.append({"number": head["number"], "title": head["title"].strip(),
                    "label": label["label"],
                    "kind": meta["kind"], "level": len(meta["level"]),
                    "minutes": int(meta["minutes"]), "cells": (i + 1, i + 2, i + 3),
                    "parts": 0})
        current = out[-1]
    return out
