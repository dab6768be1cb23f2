"""Chapter 07 (Part V): the nonlinearity budget of one model — every layer of SmolLM2-135M
under the four papers' lenses.

Read from the chapters' results at the same profile: the P3 lenses (chapter 03's windows:
linear-surrogate cost and R², measured again here through the shared memo; chapter 04's gate
against random routing of as many tokens), P1's (chapter 02: the trained gate↔up exchange
asymmetry against a random gated MLP's) and P4's (chapter 06: the cost of switching off the
trained content skip). Measured here, P2's lens (`nlbudget.random_features`): the MLP replaced
by a frozen random nonlinearity of its own width with only the read-out fitted, against the
linear surrogate on the same tokens.

Then the budget (`nlbudget.budget`): per layer full MLP, gated (P3's d+1 router) or linear,
chosen greedily on select windows to remove as many MLP FLOPs as a perplexity cost of 1 % or
5 % allows, measured as a combined model, checked on held-out windows and timed against the
original model.

The chapter's three parts, one file each (the same in every chapter): `study` (its settings and
the experiment's phases), `claims` (its rules, reading stored figures only) and `page` (its
tables, figures and glue). Here they are one namespace, as the notebook uses them.
"""

from nlbudget.chapters.ch07_budget_atlas.study import *  # noqa: F401,F403
from nlbudget.chapters.ch07_budget_atlas.claims import *  # noqa: F401,F403
from nlbudget.chapters.ch07_budget_atlas.page import *  # noqa: F401,F403
