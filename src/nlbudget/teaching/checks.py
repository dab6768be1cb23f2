"""Checks for the exercise notebooks (`notebooks/exercises/`): a student's function against
the library's own, on seeded cases.

A function check calls the student's function and the reference on the same inputs; it prints
one line (✓) when every case agrees, and otherwise raises `CheckFailed`, naming the case, what
was expected, what came back and the largest difference. A stub that still raises
`NotImplementedError` is not caught: the notebook stops there.

A prediction check compares a prediction with the chapter's results file (what this build
measured). A prediction is a claim about data, not code: a right one is reported (✓) with the
measured value and why; a wrong one (✗) without them — think again, or `reveal()` to give up
and read them; it raises only for a prediction of the wrong form.
"""


from __future__ import annotations

from nlbudget.teaching import ch01, ch02, ch03, ch04, ch05, ch06, ch07
from nlbudget.teaching.machinery import (CheckFailed, _scored, chapter_results,  # noqa: F401
                                         check_function, check_prediction, passed,
                                         reveal, score, start)

#: Every chapter's checks, by name, each recording its outcome for `score`.
CHAPTERS = (ch01, ch02, ch03, ch04, ch05, ch06, ch07)
for _module in CHAPTERS:
    for _name, _fn in vars(_module).items():
        if (callable(_fn) and getattr(_fn, "__module__", None) == _module.__name__
                and not _name.startswith("_")):
            globals()[_name] = _fn if getattr(_fn, "is_data", False) else _scored(_fn)
