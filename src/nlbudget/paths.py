"""Where the repository, the shipped files, the asset cache, the results and the build live.

In a checkout (or an editable install) everything is under the repository. A package installed
from a wheel carries the files the chapters read — the notebooks, `data/claims.csv`,
`data/reference/`, `data/corpora/` and the committed results — under `nlbudget/_shipped/`
(see `setup.py`), and writes its cache, results and build under the working directory.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def repo_root() -> Path:
    """The checkout this code runs in: `NLBUDGET_ROOT`, else the nearest parent (of the
    working directory, then of this file) holding both `pyproject.toml` and `notebooks/`."""
    if os.environ.get("NLBUDGET_ROOT"):
        return Path(os.environ["NLBUDGET_ROOT"]).resolve()
    for start in (Path.cwd(), Path(__file__).resolve()):
        for p in (start, *start.parents):
            if (p / "pyproject.toml").is_file() and (p / "notebooks").is_dir():
                return p
    return Path.cwd().resolve()


def shipped() -> Path:
    """The folder holding `notebooks/` and `data/` as the repository lays them out: the
    checkout where there is one, else the copy a wheel carries (`nlbudget/_shipped`)."""
    root = repo_root()
    if (root / "notebooks").is_dir() and (root / "data" / "claims.csv").is_file():
        return root
    packaged = Path(__file__).resolve().parent / "_shipped"
    return packaged if packaged.is_dir() else root


def cache_dir() -> Path:
    """Ignored cache for fetched models, corpora and checkpoints (`NLBUDGET_CACHE`)."""
    p = Path(os.environ.get("NLBUDGET_CACHE") or repo_root() / "data" / "cache")
    p.mkdir(parents=True, exist_ok=True)
    return p


def results_dir() -> Path:
    """`data/results/<profile>/<chapter>.json` lives under this folder (`NLBUDGET_RESULTS`)."""
    return Path(os.environ.get("NLBUDGET_RESULTS") or repo_root() / "data" / "results")


def build_dir() -> Path:
    """Executed chapters and the rendered book (`NLBUDGET_BUILD`)."""
    return Path(os.environ.get("NLBUDGET_BUILD") or repo_root() / "build")


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` so that readers see the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
