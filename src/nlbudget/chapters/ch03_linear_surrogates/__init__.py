"""Chapter 03 (Part II.a): linear surrogates — how much of each MLP is linear.

P3 §3.1 and §5 ("Half the Nonlinearity Is Wasted"): a ridge surrogate per MLP layer
(`nlbudget.surrogates`), its perplexity cost, the matched sequential/parallel pair trained
here, and progressive linearization against an equal-compute fine-tuning control.

The chapter's three parts, one file each (the same in every chapter): `study` (its settings and
the experiment's phases), `claims` (its rules, reading stored figures only) and `page` (its
tables, figures and glue). Here they are one namespace, as the notebook uses them.
"""

from nlbudget.chapters.ch03_linear_surrogates.study import *  # noqa: F401,F403
from nlbudget.chapters.ch03_linear_surrogates.claims import *  # noqa: F401,F403
from nlbudget.chapters.ch03_linear_surrogates.page import *  # noqa: F401,F403
