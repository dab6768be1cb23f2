"""Where the repository, the asset cache, the results and the build live."""

from __future__ import annotations

import os
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
