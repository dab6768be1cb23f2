"""The three scales every chapter runs at, and validation of papermill parameters.

`smoke` takes seconds (tests), `ci` is the default book build (minutes on 2 CPU cores),
`paper` uses the papers' models and corpora (GPU and Hugging Face hub). Each chapter's
settings per profile live in its chapter module (`nlbudget.chapters`).
Every notebook's `parameters` cell holds `profile`, `seed`, `results_dir`, `device` (`auto`:
CUDA when present; see `devices`) and optional overrides of its chapter's settings (`None` =
the profile's value); the next cell calls `validate`, which fails at once, naming the valid
choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROFILES = ("smoke", "ci", "paper")
RUN_PARAMETERS = ("profile", "seed", "results_dir", "device")
#: Settings that take one of a few strings.
CHOICES = {"dtype": ("bfloat16", "float32"),
           "corpus": ("pydocs", "shakespeare", "wikitext-103"),
           "cross_corpus": ("pydocs", "shakespeare", "wikitext-103", "lambada"),
           "lastword": ("pydocs", "shakespeare", "lambada")}


#: Dtypes no chapter computes in on a CPU (`validate` refuses them there; a GPU may use them).
CPU_SLOW_DTYPES = ("bfloat16",)

#: Settings that hold a comma-separated list of choices (the gate kinds come from `gating`).
LIST_CHOICES: dict[str, tuple] = {}


class ParameterError(ValueError):
    """A bad notebook parameter; the message names what is valid."""


@dataclass(frozen=True)
class Chapter:
    key: str  # "01"
    stem: str  # "01_gated_mlp_symmetry", also the results file name
    part: str  # "I" .. "IV"
    title: str
    settings: dict[str, dict] = field(default_factory=dict)  # profile -> settings
    module: str = ""  # the chapter module: its settings, study and claims

    def load(self):
        """The chapter module (`nlbudget.chapters.chNN_*`)."""
        import importlib

        return importlib.import_module(self.module)


def _chapters() -> dict[str, Chapter]:
    from . import chapters
    from .gating import GATE_KINDS

    LIST_CHOICES["gates"] = GATE_KINDS
    return {m.KEY: Chapter(m.KEY, m.STEM, m.PART, m.TITLE, m.SETTINGS, m.__name__)
            for m in chapters.MODULES}


#: The chapters in reading order; each one's settings, study and claims live in its module
#: `nlbudget.chapters.chNN_<stem>`.
CHAPTERS: dict[str, Chapter] = _chapters()


def chapter(key: str) -> Chapter:
    """Look a chapter up by number ("01", "1") or stem."""
    k = str(key)
    for c in CHAPTERS.values():
        if k in (c.key, c.stem) or (k.isdigit() and int(k) == int(c.key)):
            return c
    valid = ", ".join(f"{c.key} ({c.stem})" for c in CHAPTERS.values())
    raise ParameterError(f"unknown chapter {key!r}; valid chapters: {valid}")


def _check_type(name: str, value, default):
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
    if isinstance(default, (int, float)) and not isinstance(default, bool) and value <= 0:
        raise ParameterError(f"parameter {name}={value!r} must be positive")


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
        _check_type(name, value, settings[name])
        if name in CHOICES and value not in CHOICES[name]:
            raise ParameterError(f"parameter {name}={value!r} is not valid; valid: "
                                 f"{', '.join(CHOICES[name])}")
        if name in LIST_CHOICES:
            items = value.split(",")
            bad = [v for v in items if v not in LIST_CHOICES[name]]
            if bad or "linear" not in items or len(set(items)) != len(items):
                raise ParameterError(
                    f"parameter {name}={value!r} is not valid: a comma-separated list, without "
                    f"repeats, including 'linear', of: {', '.join(LIST_CHOICES[name])}")
        settings[name] = value
    from .devices import resolve

    dev = resolve(device)
    if settings.get("dtype") in CPU_SLOW_DTYPES and not dev.startswith("cuda"):
        raise ParameterError(
            f"dtype={settings['dtype']!r} on the CPU: bfloat16 is fast only on CPUs with native "
            f"bfloat16 units (AVX-512-BF16, AMX) and tens of times slower on the others "
            f"(benchmarks/cpu.py); use dtype='float32' on the CPU (bfloat16 is allowed with "
            f"device='cuda')")
    return {"chapter": ch.stem, "profile": profile, "seed": seed, "device": dev, **settings}


def parse_seed(text: str) -> int:
    """A seed given on the command line."""
    try:
        return int(text)
    except (TypeError, ValueError):
        raise ParameterError(f"seed must be a non-negative integer, got {text!r}") from None
