"""Bad inputs met before any work starts, each as one clear error (`ParameterError`, which the
command line prints as `nlbudget: error: …`) naming the file, folder or value and what to do:
a results folder that is missing, a results file that is not one, a folder that cannot be
written. A chapter that would lose its results to a read-only folder never starts."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from nlbudget import paths
from nlbudget.errors import ParameterError


def folder(path: str | Path, what: str) -> Path:
    """`path` as an existing folder, or an error naming it."""
    p = Path(path)
    if not p.exists():
        raise ParameterError(f"{what} {p} does not exist")
    if not p.is_dir():
        raise ParameterError(f"{what} {p} is not a folder")
    return p


def results_file(path: Path) -> dict:
    """A results file's contents: a chapter's figures file (`<stem>.json`, with `figures`) or
    its verdicts file (`<stem>.verdicts.json`, with `claims`); anything else an error naming
    the file and how to mend it."""
    mend = "delete it and rerun its chapter (`nlbudget run NN --profile P`)"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ParameterError(f"{path}: not a results file: invalid JSON at line {e.lineno}, "
                             f"column {e.colno} ({e.msg}); {mend}") from None
    except UnicodeDecodeError as e:
        raise ParameterError(f"{path}: not a results file: not UTF-8 text ({e.reason}); "
                             f"{mend}") from None
    except OSError as e:
        raise ParameterError(f"{path}: cannot be read ({e.strerror})") from None
    key = ("digest" if path.name.endswith(".fresh.json") else
           "claims" if path.name.endswith(".verdicts.json") else "figures")
    if not isinstance(doc, dict) or key not in doc:
        raise ParameterError(f"{path}: not a results file: it has no {key!r}; {mend}")
    return doc


def results_folder(root: str | Path | None, profile: str, what: str = "results folder",
                   must_exist: bool = False) -> Path:
    """`root/profile` (default root: the checkout's `data/results`), every results file in it
    checked (`results_file`). A missing profile folder is an error only if `must_exist`."""
    base = folder(root, what) if root is not None else Path(paths.results_dir())
    p = base / profile
    if not p.is_dir():
        if must_exist:
            raise ParameterError(f"{what} {base} has no results at profile {profile!r} "
                                 f"(no folder {p})")
        return p
    for f in sorted(p.glob("*.json")):
        results_file(f)
    return p


def writable(path: str | Path, what: str) -> Path:
    """`path` as a folder this process can write to (made where missing), or an error naming
    it: checked before a chapter runs, not when its last cell writes its results."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=p, prefix=".nlbudget-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ParameterError(f"{what} {p} is not writable ({e.strerror or e}); choose another "
                             f"with --results-dir / --build-dir, or fix its permissions") from None
    return p


def run_folders(profile: str, results_dir=None, build_dir=None) -> None:
    """Before a chapter runs: its results folder (`<results_dir>/<profile>`) and its build
    folder are writable, and the results already there are readable (a chapter reads those of
    the chapters it builds on)."""
    writable(Path(results_dir or paths.results_dir()) / profile, "results folder")
    writable(Path(build_dir or paths.build_dir()) / profile, "build folder")
    results_folder(results_dir, profile)


def compared(first: str, second: str, profile: str) -> None:
    """`nlbudget compare`: both folders exist, hold results at `profile`, and every results
    file in them is one."""
    for name, root in (("first", first), ("second", second)):
        results_folder(root, profile, f"the {name} results folder", must_exist=True)



def cuda_build_without_gpu(cuda_version: str | None, gpu: bool) -> str | None:
    """The warning for a CUDA build of torch on a machine with no GPU (PyPI's Linux wheel:
    3-4 GB of nvidia-* wheels that never run here; the book computes on the CPU), with how to
    get the CPU build; None when torch is a CPU build or a GPU is there."""
    if not cuda_version or gpu:
        return None
    return (f"torch here is a CUDA build (CUDA {cuda_version}) and this machine has no GPU: "
            "the book runs on the CPU either way, but that build is 3-4 GB against ~190 MB. "
            "For the CPU build: pip install torch==<version> --index-url "
            "https://download.pytorch.org/whl/cpu (tox does this on Linux without an NVIDIA "
            "driver: constraints/install.py)")
