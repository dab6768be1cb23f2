"""Chapter 06 (Part IV): position-agnostic pre-projection and content skip as frozen probes.

P4 (Shinde): modules in front of Q/K/V and a content skip around attention
(`nlbudget.preprojection`), trained on a frozen base, against LoRA at a matched trainable budget.

The chapter's three parts, one file each (the same in every chapter): `study` (its settings and
the experiment's phases), `claims` (its rules, reading stored figures only) and `page` (its
tables, figures and glue). Here they are one namespace, as the notebook uses them.
"""

from nlbudget.chapters.ch06_preprojection_probes.study import *  # noqa: F401,F403
from nlbudget.chapters.ch06_preprojection_probes.claims import *  # noqa: F401,F403
from nlbudget.chapters.ch06_preprojection_probes.page import *  # noqa: F401,F403
