"""The exercise notebooks (`notebooks/exercises/NN_<stem>.ipynb`): running them for the book,
and the student edition.

An exercise is four cells: a statement (objective, difficulty, minutes), a stub tagged
`exercise` that raises `NotImplementedError`, a solution tagged `solution` (folded on the page
by `hide-input`) and a check (`nlbudget.checks`). The book executes every exercise notebook,
solutions included, after its chapter (its predictions read the chapter's results file);
`student_edition` writes copies without the solution cells, which stop at the first check.
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from . import incremental, paths, profiles, results, runner

SOLUTION_TAG, EXERCISE_TAG = "solution", "exercise"


def folder() -> Path:
    return paths.shipped() / "notebooks" / "exercises"


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
    (default `build/student/`). Returns the files written."""
    out = Path(out or paths.build_dir() / "student")
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


# ------------------------------------------------------------------ running them for the book

def _paths(key: str, profile: str, build_dir=None) -> tuple[Path, Path]:
    d = Path(build_dir or paths.build_dir()) / profile / "exercises"
    stem = profiles.chapter(key).stem
    return d / f"{stem}.ipynb", d / f"{stem}.fresh.json"


def executed(key: str, profile: str, build_dir=None) -> Path:
    """Where the book build writes chapter `key`'s executed exercise notebook."""
    return _paths(key, profile, build_dir)[0]


def inputs(key: str, profile: str, results_dir=None) -> dict:
    """What an executed exercise notebook depends on: the notebook, the library, the package
    versions and the chapter's results file (its predictions read it)."""
    stem = profiles.chapter(key).stem
    sha = incremental.file_sha
    return {"notebook": sha(notebook(key)), "library": incremental.library_digest(key),
            "versions": incremental.versions(), "profile": profile,
            "results": sha(results.results_path(stem, profile, results_dir))}


def fresh(key: str, profile: str, results_dir=None, build_dir=None) -> bool:
    out, rec = _paths(key, profile, build_dir)
    try:
        saved = json.loads(rec.read_text())
    except (OSError, ValueError):
        return False
    now = incremental.digest(inputs(key, profile, results_dir))
    return (out.is_file() and saved.get("digest") == now
            and saved.get("executed") == incremental.file_sha(out))


def execute(key: str, profile: str, results_dir=None, build_dir=None,
            timeout: int = 600) -> Path:
    """Execute chapter `key`'s exercise notebook (solutions included) with papermill into
    `<build>/<profile>/exercises/`; atomic: a failed run leaves no executed copy."""
    import papermill as pm

    out, rec = _paths(key, profile, build_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    rec.unlink(missing_ok=True)
    inp = inputs(key, profile, results_dir)
    tmp = out.with_name(f".{out.stem}.running.ipynb")
    res = str(Path(results_dir or paths.results_dir()).resolve())
    pm.execute_notebook(str(notebook(key)), str(tmp), kernel_name="python3",
                        parameters={"profile": profile, "results_dir": res},
                        cwd=str(notebook(key).parent), execution_timeout=timeout,
                        progress_bar=False, log_output=False)
    runner.hide_injected_parameters(tmp)
    tmp.replace(out)
    results.atomic_write_text(rec, json.dumps({"digest": incremental.digest(inp),
                                               "inputs": inp,
                                               "executed": incremental.file_sha(out)}))
    return out


def run_all(profile: str, results_dir=None, build_dir=None, force: bool = False,
            log=incremental.say, cores: int | None = None) -> dict:
    """Execute the exercise notebooks that are not fresh, as many at a time as there are cores
    (each a few seconds of one-thread work). Returns {key: 'ran' | 'fresh'}."""
    todo = [k for k in available() if force or not fresh(k, profile, results_dir, build_dir)]
    out = {k: "fresh" for k in available() if k not in todo}
    if not todo:
        log("[nlbudget] exercises: fresh, skipped")
        return out
    t = time.perf_counter()
    with runner.kernel_environment(OMP_NUM_THREADS="1"), \
            ThreadPoolExecutor(max_workers=cores or os.cpu_count() or 1) as pool:
        list(pool.map(lambda k: execute(k, profile, results_dir, build_dir), todo))
    out.update(dict.fromkeys(todo, "ran"))
    log(f"[nlbudget] exercises: {len(todo)} notebook(s) executed in "
        f"{time.perf_counter() - t:.0f} s")
    return out


# ------------------------------------------------------------------ what a notebook holds

_HEAD = re.compile(r"^## Exercise (?P<number>\d+\.\d+) — (?P<title>.+)$", re.M)
_LABEL = re.compile(r"^\((?P<label>ex\d\d-[a-z0-9-]+)\)=$", re.M)
_META = re.compile(r"\{admonition\} (?P<kind>Write|Predict, then check) · (?P<level>★+) · "
                   r"about (?P<minutes>\d+) minutes")


def catalogue(key: str) -> list[dict]:
    """The exercises of chapter `key`'s notebook, in order: number, title, label (for
    cross-references), kind, level (★ to ★★★), minutes, and the indices of its stub,
    solution and check cells."""
    nb = nbformat.read(notebook(key), as_version=4)
    out = []
    for i, c in enumerate(nb.cells):
        head = _HEAD.search(c.source) if c.cell_type == "markdown" else None
        if not head:
            continue
        meta, label = _META.search(c.source), _LABEL.search(c.source)
        if meta is None or label is None:
            raise ValueError(f"{notebook(key).name}: exercise {head['number']} needs a "
                             "'(exNN-name)=' label and a '{admonition} KIND · LEVEL · about N "
                             "minutes' line")
        out.append({"number": head["number"], "title": head["title"].strip(),
                    "label": label["label"],
                    "kind": meta["kind"], "level": len(meta["level"]),
                    "minutes": int(meta["minutes"]), "cells": (i + 1, i + 2, i + 3)})
    return out
