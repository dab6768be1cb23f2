"""Chapter 01 (Part I, derivations): gated MLPs as symmetry-broken rank-1 bilinear attention.

The study proves each step of P1's chain with sympy (`nlbudget.symbolic`) and checks it on
the torch modules of `nlbudget.bilinear`. Every proof has a negative control: the same checker
must reject a perturbed statement, and every numerical "zero" is set against a case that must
not be zero.

The chapter's three parts, one file each (the same in every chapter): `study` (its settings and
the experiment's phases), `claims` (its rules, reading stored figures only) and `page` (its
tables, figures and glue). Here they are one namespace, as the notebook uses them.
"""

from nlbudget.chapters.ch01_gated_mlp_symmetry.study import *  # noqa: F401,F403
from nlbudget.chapters.ch01_gated_mlp_symmetry.claims import *  # noqa: F401,F403
from nlbudget.chapters.ch01_gated_mlp_symmetry.page import *  # noqa: F401,F403
