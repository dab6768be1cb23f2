"""Execute a chapter notebook with papermill, after checking its parameters."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import nbformat

from . import paths, profiles
from .profiles import ParameterError


def notebook_path(key: str) -> Path:
    ch = profiles.chapter(key)
    p = paths.shipped() / "notebooks" / f"{ch.stem}.ipynb"
    if not p.is_file():
        raise ParameterError(f"chapter {ch.stem} has no notebook at {p}")
    return p


def available_chapters() -> list[str]:
    """Keys of the chapters whose notebook exists, in book order."""
    nb = paths.shipped() / "notebooks"
    return [k for k, c in profiles.CHAPTERS.items() if (nb / f"{c.stem}.ipynb").is_file()]


def check_parameters(key: str, parameters: dict) -> dict:
    """Reject names the notebook's `parameters` cell does not declare, then validate values
    through `profiles.validate`. Returns the resolved settings."""
    import papermill as pm

    declared = pm.inspect_notebook(str(notebook_path(key)))
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)} for chapter "
                             f"{profiles.chapter(key).stem}; valid: {', '.join(declared)}")
    return profiles.validate(key, **parameters)


def run(key: str, profile: str = "ci", seed: int | str = 0, parameters: dict | None = None,
        results_dir: str | Path | None = None, build_dir: str | Path | None = None,
        timeout: int = 3600) -> Path:
    """Execute chapter `key` at `profile` into `<build>/<profile>/chapters/<stem>.ipynb`.

    The notebook writes its own results file (`<results_dir>/<profile>/<stem>.json`) in its
    last cell, so a failed run leaves the previous results file as it was.
    """
    import papermill as pm

    if isinstance(seed, str):
        seed = profiles.parse_seed(seed)
    params = {"profile": profile, "seed": seed, **(parameters or {})}
    check_parameters(key, params)  # fails before anything runs or is written
    params["results_dir"] = str(Path(results_dir or paths.results_dir()).resolve())
    ch = profiles.chapter(key)
    src = notebook_path(key)
    out_dir = Path(build_dir or paths.build_dir()) / profile / "chapters"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{ch.stem}.ipynb"
    tmp = out_dir / f".{ch.stem}.running.ipynb"
    quiet = bool(os.environ.get("CI")) or not sys.stderr.isatty()
    with kernel_environment():
        pm.execute_notebook(str(src), str(tmp), parameters=params, kernel_name="python3",
                            cwd=str(src.parent), execution_timeout=timeout,
                            progress_bar=not quiet, log_output=False)
    hide_injected_parameters(tmp)
    tmp.replace(out)
    return out


@contextlib.contextmanager
def kernel_environment(**extra: str):
    """The environment a notebook's kernel inherits while papermill runs it: the same checkout,
    and figures drawn inline even where MPLBACKEND=Agg is set (tox, tests), or pages lose
    plots; plus `extra`. Restored on exit."""
    env = {"NLBUDGET_ROOT": str(paths.repo_root()),
           "MPLBACKEND": "module://matplotlib_inline.backend_inline", **extra}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def hide_injected_parameters(path: Path) -> None:
    """Papermill's injected parameters stay in an executed notebook, off the page."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, path)
