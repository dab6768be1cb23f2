"""Chapter 02 (Part I, the experiment the paper never ran): does breaking the exchange
symmetry matter?

Three tests: the MLP forms of `nlbudget.bilinear` at equal parameters in small language models
and on modular addition (every form sees the same batches for a seed, so forms are compared in
pairs over seeds), and the asymmetry of SmolLM2's trained gates against random gated MLPs of the
same shapes and weight scales on the same inputs.

The chapter's three parts, one file each (the same in every chapter): `study` (its settings and
the experiment's phases), `claims` (its rules, reading stored figures only) and `page` (its
tables, figures and glue). Here they are one namespace, as the notebook uses them.
"""

from nlbudget.chapters.ch02_does_symmetry_matter.study import *  # noqa: F401,F403
from nlbudget.chapters.ch02_does_symmetry_matter.claims import *  # noqa: F401,F403
from nlbudget.chapters.ch02_does_symmetry_matter.page import *  # noqa: F401,F403
