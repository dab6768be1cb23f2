"""The three scales every chapter runs at, and validation of papermill parameters.

`smoke` takes seconds (tests), `ci` is the default book build (minutes on 2 CPU cores),
`paper` uses the papers' models and corpora (GPU and Hugging Face hub). Each chapter's
settings per profile live in its chapter module (`nlbudget.chapters`).
Every notebook's `parameters` cell holds `profile`, `seed`, `results_dir` and `device` (`auto`:
CUDA when present; see `devices`) and nothing else: the chapter's settings are written once, in
its module's `SETTINGS`. Any of them is overridden with papermill's `-p name value` (or
`nlbudget run -p name=value`); the next cell, `S = profiles.from_notebook("NN", globals())`,
reads the parameters and the overrides papermill injected and validates them, failing at once
and naming the valid choices.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from nlbudget import chapters, paths
from nlbudget.assets.devices import resolve
from nlbudget.errors import ParameterError

PROFILES = ("smoke", "ci", "full", "paper")
RUN_PARAMETERS = ("profile", "seed", "results_dir", "device")
#: Settings that take one of a few strings.
CHOICES = {"dtype": ("bfloat16", "float32"),
           "corpus": ("pydocs", "shakespeare", "wikitext-103"),
           "cross_corpus": ("pydocs", "shakespeare", "wikitext-103", "lambada"),
           "lastword": ("pydocs", "shakespeare", "lambada")}


#: Dtypes no chapter computes in on a CPU (`validate` refuses them there; a GPU may use them).
CPU_SLOW_DTYPES = ("bfloat16",)


@dataclass(frozen=True)
class Chapter:
    """A chapter, named by its module `nlbudget.chapters.chNN_<stem>`; the module (its settings,
    study and claims, and with them torch) is imported only when asked for."""

    key: str  # "01"
    stem: str  # "01_gated_mlp_symmetry", also the notebook's and the results file's name
    module: str  # "nlbudget.chapters.ch01_gated_mlp_symmetry"

    def load(self):
        """The chapter module."""
        return importlib.import_module(self.module)

    @property
    def settings(self) -> dict[str, dict]:
        """profile -> settings: the chapter module's `SETTINGS`, the only list of them."""
        return self.load().SETTINGS

    @property
    def list_choices(self) -> dict[str, tuple]:
        """Settings that hold a comma-separated list of choices (`LIST_CHOICES` of the module)."""
        return getattr(self.load(), "LIST_CHOICES", {})


#: The chapters in reading order (`nlbudget.chapters.MODULES`), without importing them.
CHAPTERS: dict[str, Chapter] = {
    name[2:4]: Chapter(name[2:4], name[2:], f"{chapters.__name__}.{name}")
    for name in chapters.MODULES}


def chapter(key: str) -> Chapter:
    """Look a chapter up by number ("01", "1") or stem."""
    k = str(key)
    for c in CHAPTERS.values():
        if k in (c.key, c.stem) or (k.isdigit() and int(k) == int(c.key)):
            return c
    valid = ", ".join(f"{c.key} ({c.stem})" for c in CHAPTERS.values())
    raise ParameterError(f"unknown chapter {key!r}; valid chapters: {valid}")


def notebook_path(key: str) -> Path:
    """Chapter `key`'s notebook (`notebooks/<stem>.ipynb`)."""
    ch = chapter(key)
    p = paths.shipped() / "notebooks" / f"{ch.stem}.ipynb"
    if not p.is_file():
        raise ParameterError(f"chapter {ch.stem} has no notebook at {p}")
    return p


def available_chapters() -> list[str]:
    """Keys of the chapters whose notebook exists, in book order."""
    nb = paths.shipped() / "notebooks"
    return [k for k, c in CHAPTERS.items() if (nb / f"{c.stem}.ipynb").is_file()]


def _check_type(name: str, value, default, zero_ok: bool = False):
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(value, bool) and isinstance(default, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ParameterError(
            f"parameter {name}={value!r} must be of type {type(default).__name__} "
            f"(profile default: {default!r})"
        )
    if isinstance(default, (int, float)) and not isinstance(default, bool) and (
            value < 0 or (value == 0 and not zero_ok)):
        raise ParameterError(f"parameter {name}={value!r} must be "
                             + ("≥ 0 (0 as the chapter's own profiles use it)" if zero_ok
                                else "positive"))


def validate(key: str, profile: str = "ci", seed: int = 0, results_dir: str | None = None,
             device: str = "auto", **overrides) -> dict:
    """Return the chapter's settings for `profile`, with `seed` and valid overrides applied.

    `device` comes back resolved (`auto` → `cuda` or `cpu`).
    Raises ParameterError for an unknown profile, a seed that is not a non-negative integer,
    a device that is not valid here, an unknown parameter name, or an override of the wrong
    type.
    """
    ch = chapter(key)
    if profile not in PROFILES:
        raise ParameterError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")
    settings = dict(ch.settings[profile])
    unknown = sorted(set(overrides) - set(settings))
    if unknown:
        valid = ", ".join([*RUN_PARAMETERS, *settings])
        raise ParameterError(
            f"unknown parameter(s) {', '.join(unknown)} for chapter {ch.stem}; valid: {valid}"
        )
    for name, value in overrides.items():
        if value is None:
            continue
        # 0 is valid where one of the chapter's own profiles uses it (a documented sentinel:
        # chapter 07's rf_width=0, the MLP's own width)
        _check_type(name, value, settings[name],
                    zero_ok=any(p.get(name) == 0 for p in ch.settings.values()))
        if name in CHOICES and value not in CHOICES[name]:
            raise ParameterError(f"parameter {name}={value!r} is not valid; valid: "
                                 f"{', '.join(CHOICES[name])}")
        if name in ch.list_choices:
            items = value.split(",")
            bad = [v for v in items if v not in ch.list_choices[name]]
            if bad or "linear" not in items or len(set(items)) != len(items):
                raise ParameterError(
                    f"parameter {name}={value!r} is not valid: a comma-separated list, without "
                    f"repeats, including 'linear', of: {', '.join(ch.list_choices[name])}")
        settings[name] = value
    dev = resolve(device)
    if settings.get("dtype") in CPU_SLOW_DTYPES and not dev.startswith("cuda"):
        raise ParameterError(
            f"dtype={settings['dtype']!r} on the CPU: bfloat16 is fast only on CPUs with native "
            f"bfloat16 units (AVX-512-BF16, AMX) and tens of times slower on the others "
            f"(benchmarks/cpu.py); use dtype='float32' on the CPU (bfloat16 is allowed with "
            f"device='cuda')")
    return {"chapter": ch.stem, "profile": profile, "seed": seed, "device": dev, **settings}


#: Names IPython defines in every kernel; none of them is a parameter.
_KERNEL_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def from_notebook(key: str, namespace: dict) -> dict:
    """`validate` for the cell after a notebook's parameters: the run parameters and every
    override papermill injected, read from the notebook's namespace (`globals()`). It runs
    before the notebook defines a variable of its own, so on the first run every public,
    non-module, non-callable name there is a parameter, and an unknown one fails, naming the
    valid ones. Run again in the same kernel (a reader's "run all"), the notebook's own
    variables are there too: then only the run parameters and the chapter's settings count."""
    given = {k: v for k, v in namespace.items()
             if not k.startswith("_") and k not in _KERNEL_NAMES
             and not callable(v) and type(v).__name__ != "module"}
    if "_nlbudget_parameters" in namespace:  # a rerun: the notebook's variables are not ours
        settings = set(chapter(key).settings["ci"])
        given = {k: v for k, v in given.items() if k in RUN_PARAMETERS or k in settings}
    namespace["_nlbudget_parameters"] = sorted(given)
    run = {k: given.pop(k) for k in RUN_PARAMETERS if k in given}
    return validate(key, **run, **given)


def parse_seed(text: str) -> int:
    """A seed given on the command line."""
    try:
        return int(text)
    except (TypeError, ValueError):
        raise ParameterError(f"seed must be a non-negative integer, got {text!r}") from None
