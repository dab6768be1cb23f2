"""Chapter 05 (Part III): fixed universal transformers, programmed through the embedding.

P2 (Liu, Andoni & Hsu): the book's own exact {0,1} attention-matching construction
(`nlbudget.universal.SparseUT`), random universality by gradient search, and embedding-only
training of frozen sparse / random transformers on Dyck-1 and k-hop induction (`tasks`).

The chapter's three parts, one file each (the same in every chapter): `study` (its settings and
the experiment's phases), `claims` (its rules, reading stored figures only) and `page` (its
tables, figures and glue). Here they are one namespace, as the notebook uses them.
"""

from nlbudget.chapters.ch05_fixed_universal.study import *  # noqa: F401,F403
from nlbudget.chapters.ch05_fixed_universal.claims import *  # noqa: F401,F403
from nlbudget.chapters.ch05_fixed_universal.page import *  # noqa: F401,F403
