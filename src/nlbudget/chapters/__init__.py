"""One module per chapter, in reading order: the chapter's settings per profile, its study
(the phases the notebook runs, each a few visible lines there) and its claims (one function per
ledger row, thresholds as named constants, the paper's sentence quoted in the docstring).

Where is chapter N's logic? In `nlbudget/chapters/chNN_<stem>.py`; the mechanism it studies
lives in the idea module it imports (`symbolic`, `bilinear`, `surrogates`, `gating`,
`universal`, `preprojection`), evaluation in `evaluation`, statistics in `verdicts.stats`, the
verdict rules' building blocks in `verdicts.claims`.

This file names the modules and imports none of them (`book.profiles` lists the chapters
without loading torch; a chapter's module loads when its settings or study are asked for).
"""

MODULES = ("ch01_gated_mlp_symmetry", "ch02_does_symmetry_matter", "ch03_linear_surrogates",
           "ch04_adaptive_gating", "ch05_fixed_universal", "ch06_preprojection_probes",
           "ch07_budget_atlas")
