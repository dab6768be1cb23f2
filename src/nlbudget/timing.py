"""Where a chapter's time goes: named phases, recorded into its results file.

A chapter's study wraps its expensive steps in `phase("name")`; `results.finish` stores
`timings()` (seconds per phase, in the order first entered, plus the time since this module
was imported, which is the chapter's kernel from its first import on). The "how to rerun"
page and `benchmarks/chapter_times.py` read them back.
"""

from __future__ import annotations

import functools
import time
from contextlib import contextmanager

_START = time.perf_counter()
_PHASES: dict[str, float] = {}
_STACK: list[str] = []


@contextmanager
def phase(name: str):
    """Time the body under `name` (nested phases are named `outer/inner`; repeated names add up)."""
    full = "/".join([*_STACK, name])
    _PHASES.setdefault(full, 0.0)  # listed in the order first entered
    _STACK.append(name)
    t = time.perf_counter()
    try:
        yield
    finally:
        _STACK.pop()
        _PHASES[full] = _PHASES.get(full, 0.0) + time.perf_counter() - t


class laps:
    """Split a function's time without re-indenting it: `lap = laps()`, then `lap("step")`
    after each step records the time since the previous lap (as a phase nested in the
    current one)."""

    def __init__(self):
        self.t = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        full = "/".join([*_STACK, name])
        _PHASES[full] = _PHASES.get(full, 0.0) + now - self.t
        self.t = now


def timed(name: str):
    """Decorator form of `phase`."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*a, **k):
            with phase(name):
                return fn(*a, **k)
        return inner
    return wrap


def timings() -> dict:
    """{"phases": {name: seconds}, "total_s": seconds since import}; nested phases included
    (their time is also inside their parent's)."""
    return {"phases": {k: round(v, 2) for k, v in _PHASES.items()},
            "total_s": round(time.perf_counter() - _START, 2)}


def reset() -> None:
    global _START
    _PHASES.clear()
    _STACK.clear()
    _START = time.perf_counter()
