"""The exercise notebooks (`notebooks/exercises/NN_<stem>.ipynb`): where they are, what they
hold (`catalogue`), and the student edition.

An exercise is four cells: a statement (objective, difficulty, minutes), a stub tagged
`exercise` that raises `NotImplementedError`, a solution tagged `solution` (folded on the page
by `hide-input`) and a check (`nlbudget.teaching.checks`). The book executes every exercise notebook,
solutions included, after its chapter (its predictions read the chapter's results file);
`student_edition` writes copies without the solution cells, which stop at the first check.
"""

from __future__ import annotations

import json
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


def student_copy(nb):
    """The notebook without its solution cells (and without outputs)."""
    nb = nbformat.from_dict(json.loads(nbformat.writes(nb)))
    nb.cells = [c for c in nb.cells if SOLUTION_TAG not in c.metadata.get("tags", [])]
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    return nb


def student_edition(out: str | Path | None = None) -> list[Path]:
    """Write the student edition (every exercise notebook, solutions removed) into `out`
    (default `notebooks/student/`, the committed copies). Returns the files written."""
    out = Path(out or student_folder())
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for key in available():
        src = notebook(key)
        dst = out / src.name
        tmp = dst.with_name(f".{dst.name}.part")
        nbformat.write(student_copy(nbformat.read(src, as_version=4)), tmp)
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
_META = re.compile(r"\{admonition\} (?P<kind>Write|Prove|Decide|Predict, then check) · "
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
