"""The exercises' checking machinery: a student's function against the library's own on
seeded cases (`check_function`), a prediction against the chapter's results file
(`check_prediction`), and the score an instructor grades by. Each chapter's checks live in
`teaching.chNN`; `teaching.checks` gathers them for the notebooks."""

from __future__ import annotations

import functools
import math

import torch

from nlbudget import paths
from nlbudget.book import profiles
from nlbudget.verdicts import results


class CheckFailed(AssertionError):
    """The student's function disagrees with the reference; the message says where."""


# ------------------------------------------------------------------ machinery

def _show(v, width: int = 160) -> str:
    if isinstance(v, torch.Tensor):
        flat = v.detach().flatten()[:6].tolist()
        s = f"tensor of shape {tuple(v.shape)}, {v.dtype}: first values {flat}"
    else:
        s = repr(v)
    return s if len(s) <= width else s[:width] + "…"


def _difference(got, want, atol: float, rtol: float):
    """None when `got` matches `want`, else (what differs, largest difference or None)."""
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor, got {type(got).__name__}", None
        if got.shape != want.shape:
            return f"shape {tuple(got.shape)} instead of {tuple(want.shape)}", None
        if want.dtype == torch.bool or got.dtype == torch.bool:
            bad = int((got.bool() != want.bool()).sum())
            return (f"{bad} of {want.numel()} entries differ", None) if bad else None
        diff = (got.double() - want.double()).abs()
        tol = atol + rtol * want.double().abs()
        if not torch.isfinite(got.double()).all():
            return "non-finite values", None
        if bool((diff > tol).any()):
            return "values differ", float(diff.max())
        return None
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"expected {len(want)} results, got {_show(got)}", None
        for i, (g, w) in enumerate(zip(got, want)):
            d = _difference(g, w, atol, rtol)
            if d is not None:
                return f"result {i}: {d[0]}", d[1]
        return None
    if isinstance(want, bool):
        return None if got == want else ("differs", None)
    if isinstance(want, (int, float)):
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return f"expected a number, got {type(got).__name__}", None
        if not math.isclose(got, want, rel_tol=rtol, abs_tol=atol):
            return "values differ", abs(got - want)
        return None
    return None if got == want else ("differs", None)


def _call(name: str, desc: str, student, *args):
    """The student's function on one case; a stub's NotImplementedError passes through (the
    exercise is still to do), any other error becomes a `CheckFailed` naming the case."""
    try:
        return student(*args)
    except NotImplementedError:
        raise
    except Exception as e:
        raise CheckFailed(f"✗ {name}: your function raised {type(e).__name__} for {desc}: "
                          f"{e}") from e


def check_function(name: str, student, reference, cases: list[tuple[str, tuple]],
                   atol: float = 1e-6, rtol: float = 1e-5, hints=()) -> None:
    """Call `student(*args)` and `reference(*args)` for every (description, args) case.
    Prints a success line or raises `CheckFailed` (nothing is returned, so a notebook's check
    cell shows only the line). `hints`: (a known wrong answer, called like the reference; what
    to say) — where the student's result is that wrong answer's, the message says so."""
    for desc, args in cases:
        want = reference(*args)
        got = _call(name, desc, student, *args)
        d = _difference(got, want, atol, rtol)
        if d is not None:
            what, largest = d
            msg = [f"✗ {name}: wrong for {desc}", f"  what differs: {what}",
                   f"  expected: {_show(want)}", f"  got:      {_show(got)}"]
            if largest is not None:
                msg.append(f"  largest difference: {largest:.3g} (tolerance {atol:g} + "
                           f"{rtol:g}·|expected|)")
            msg += [f"  hint: {h}" for wrong, h in hints if _same(got, wrong, args, atol, rtol)]
            raise CheckFailed("\n".join(msg))
    print(f"✓ {name}: matches the library on all {len(cases)} seeded cases")


def _same(got, wrong, args, atol, rtol) -> bool:
    """Whether `got` is what the known wrong answer `wrong` gives on `args` (to a looser
    tolerance than the check's: the same mistake, computed another way, still counts)."""
    try:
        return _difference(got, wrong(*args), max(atol, 1e-6), max(rtol, 1e-4)) is None
    except Exception:  # a wrong answer that cannot even run on this case
        return False


def check_prediction(name: str, predicted, measured, profile: str, detail: str = "",
                     right: bool | None = None, why: str = "") -> bool:
    """Compare a prediction with what the build measured (equal, unless `right` says).
    Right: ✓ with the measured value, `detail` and `why` (the reason, shown only now). Wrong:
    ✗ without the answer — think again and rerun the check, or `reveal()` to give up and read
    it (the check then counts as failed). Returns whether it was right."""
    ok = bool((predicted == measured) if right is None else right)
    _LAST.append(name)
    if ok:
        print(f"✓ {name}: you predicted {predicted!r}; the book measured {measured!r} "
              f"(profile {profile}). {detail}".rstrip())
        _show_why(why)
    else:
        _ANSWERS[name] = (measured, profile, detail, why)
        print(f"✗ {name}: you predicted {predicted!r}, which is not what the book measured "
              f"(profile {profile}). Think again and rerun this check, or run "
              f"`checks.reveal()` to give up and see the answer and why.")
    return ok and name not in _GIVEN_UP


#: The answers of the predictions that were wrong, kept for `reveal`: {name: (measured,
#: profile, detail, why)}; and the ones revealed, which no later answer turns right.
_ANSWERS: dict[str, tuple] = {}
_GIVEN_UP: set[str] = set()


def _show_why(why: str) -> None:
    """The reason, as Markdown where a notebook shows it (its math typeset), else as text."""
    if not why:
        return
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display

        if get_ipython() is not None:
            display(Markdown(f"**Why.** {why}"))
            return
    except ImportError:
        pass
    print(f"Why. {why}")


def reveal(name: str | None = None) -> None:
    """Give up on a wrong prediction (the last one, or `name`): its answer and why. The
    prediction then counts as failed in `score`, whatever is answered after."""
    if not _ANSWERS:
        print("nothing to reveal: no prediction has been wrong yet")
        return
    name = name or next(reversed(_ANSWERS))
    measured, profile, detail, why = _ANSWERS[name]
    _GIVEN_UP.add(name)
    for check in [k for k, v in _PREDICTIONS.items() if v == name]:
        _SCORE[check] = False
    print(f"{name}: the book measured {measured!r} (profile {profile}). {detail}".rstrip())
    _show_why(why)


#: This notebook's checks so far: {check: passed}. `start` clears it, `score` reports it.
_SCORE: dict[str, bool] = {}


#: The prediction (`check_prediction`'s name) each prediction check reported: {check: name}.
_PREDICTIONS: dict[str, str] = {}
_LAST: list[str] = []  # the names `check_prediction` reported during the current check


def _scored(check):
    """Record a check's outcome: passed unless it raised `CheckFailed` or reported a wrong
    prediction (a stub's NotImplementedError records nothing: the exercise is not done)."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        _LAST.clear()
        try:
            out = check(*args, **kwargs)
        except CheckFailed:
            _SCORE[check.__name__] = False
            raise
        _SCORE[check.__name__] = out is not False
        if _LAST:
            _PREDICTIONS[check.__name__] = _LAST[-1]
    return run


def score() -> tuple[int, int]:
    """For auto-grading: how many of this notebook's checks have passed, of those run (a check
    that raises stops a notebook: grade cell by cell, or execute with nbclient's
    `allow_errors=True`). Prints one line; returns (passed, run)."""
    passed = sum(_SCORE.values())
    failed = sorted(k for k, v in _SCORE.items() if not v)
    print(f"score: {passed} of {len(_SCORE)} checks passed"
          + (f" (not yet: {', '.join(failed)})" if failed else ""))
    return passed, len(_SCORE)


def passed(check: str) -> bool:
    """Whether the named check (its function's name, e.g. "width") passed when it last ran in
    this notebook: what an autograder's test asserts after running it."""
    return _SCORE.get(check, False)


def data(fn):
    """Mark a teaching module's function as data an exercise works on, not a check (`checks`
    exposes it as it is, unscored)."""
    fn.is_data = True
    return fn


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed), dtype=dtype)


def _valid(key: str, profile: str) -> None:
    profiles.chapter(key)
    if profile not in profiles.PROFILES:
        raise profiles.ParameterError(f"unknown profile {profile!r}; valid profiles: "
                                      f"{', '.join(profiles.PROFILES)}")


def start(key: str, profile: str) -> None:
    """An exercise notebook's first cell: a known chapter and profile (or a message that names
    the valid ones), and a fresh `score`."""
    _valid(key, profile)
    for kept in (_SCORE, _ANSWERS, _PREDICTIONS, _GIVEN_UP):
        kept.clear()


def chapter_results(key: str, profile: str, results_dir=None) -> dict:
    """The chapter's results file at `profile` (the figures a prediction is checked against).
    Fails at once for an unknown profile. Where this build has none (a student's notebook
    opened on Colab or in a fresh clone: only `full` results are committed), the committed
    `full` results, saying so; where neither exists, says which command writes it."""
    _valid(key, profile)
    stem = profiles.chapter(key).stem
    if results_dir is None and not results.results_path(stem, profile).is_file():
        committed = paths.shipped() / "data" / "results"
        if profile != "full" and results.results_path(stem, "full", committed).is_file():
            print(f"(no {profile} results of chapter {key} here: checking against the book's "
                  f"committed full results)")
            return results.read(stem, "full", committed)
    return results.read(stem, profile, results_dir)
