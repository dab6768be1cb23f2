"""Chapter 04 (Part II.b): adaptive gating — which tokens need the MLP?

P3 §3.2–3.4, §4 and §5.3: d+1 logistic gates (`nlbudget.gating`) that route tokens to a layer's
ridge surrogate, against random routing of as many tokens; token versus context; no-fly lists;
compound gating; two-phase gated linearization against an equal-compute control.

The chapter's three parts, one file each (the same in every chapter): `study` (its settings and
the experiment's phases), `claims` (its rules, reading stored figures only) and `page` (its
tables, figures and glue). Here they are one namespace, as the notebook uses them.
"""

from nlbudget.chapters.ch04_adaptive_gating.study import *  # noqa: F401,F403
from nlbudget.chapters.ch04_adaptive_gating.claims import *  # noqa: F401,F403
from nlbudget.chapters.ch04_adaptive_gating.page import *  # noqa: F401,F403
