"""P3's δ distribution on the author's files: "90 % of MLP computations are near-linear
(|δ| < 0.05)" (tex line 522) against the δ percentiles of GPT-2 Medium's residual-stream
clusters (data/reference/p3_residual_clusters.csv; tex lines 292–305)."""

from __future__ import annotations

from nlbudget.assets.reference import reference
from nlbudget.chapters.ch04_adaptive_gating.authors import AUTHOR_FILES
from nlbudget.verdicts import controls
from nlbudget.verdicts.claims import (AUTHORS, NEGATIVE, NOT_REPRODUCED, NOT_RUN, POSITIVE,
                                      REPRODUCED, Decision, all_of, by_parts, evidence)

#: |δ| below this is near-linear (tex line 522).
NEAR = 0.05

#: The row's two parts, as the text states them: the 90 % (tex line 522), and the skew (tex
#: line 315: "heavily right-skewed … median 0.003 … 95th percentile 0.45"), which the book
#: reads as the top tenth of tokens carrying over half of the positive δ (the book's "most").
NEAR_PART = "90 % of tokens near-linear (|δ| < 0.05, tex line 522)"
TAIL_PART = ("heavily skewed, a thin tail (tex line 315; read as the top tenth carrying over "
             "half of δ, the book's threshold)")


def far_share_at_least(t) -> float:
    """A lower bound on the share of a layer's tokens with |δ| ≥ NEAR from its clusters'
    percentiles alone: where a cluster's 10th percentile of δ lies at or below −NEAR, at least
    a tenth of its tokens do; where its 90th lies at or above NEAR, at least a tenth more."""
    tenths = 0.1 * ((t.p10_delta <= -NEAR).astype(int) + (t.p90_delta >= NEAR).astype(int))
    return float((t.n * tenths).sum() / t.n.sum())


def author_delta_skew(near_linear: float) -> dict:
    """The author's stored δ, read on its points in the parts the row states: (near-linear)
    at most 1 − `far_share_at_least` of each clustered layer's tokens can be near-linear, which
    must reach `near_linear` at every stored layer (all_of over layers); (tail) no stored file
    holds per-token δ, so the share the top tenth carries cannot be read (not run)."""
    t = reference("residual_clusters")
    decs, texts = {}, []
    for layer, g in t.groupby("layer"):
        most = 1 - far_share_at_least(g)
        decs[f"L{layer}"] = Decision(
            REPRODUCED if most >= near_linear else NOT_REPRODUCED,
            f"at most {most:.1%} of {int(g.n.sum()):,} tokens near-linear against the text's "
            f"{near_linear:.0%}", POSITIVE if most >= near_linear else NEGATIVE)
        texts.append(f"L{layer}: ≥ {1 - most:.1%} of tokens at |δ| ≥ {NEAR} (cluster medians "
                     f"{g.median_delta.min():+.3f} to {g.median_delta.max():+.3f}, 10th "
                     f"percentiles {g.p10_delta.min():+.2f} to {g.p10_delta.max():+.2f})")
    l12 = t[t.layer == 12]
    parts = {NEAR_PART: all_of(decs),
             TAIL_PART: Decision(NOT_RUN, "the text's L12 median 0.003 and 95th percentile 0.45 "
                                 "(tex line 315) are in no stored file, nor is any per-token δ "
                                 "(the top tenth's share cannot be read); the stored L12 "
                                 f"clusters' 10th percentiles lie at {l12.p10_delta.max():+.2f} "
                                 f"or below, their 90th at {l12.p90_delta.median():+.2f} "
                                 "(median over clusters): a spread on both sides of 0, "
                                 "reported, not judged")}
    return evidence(
        AUTHORS, by_parts(parts)[0], reads="points",
        measured="GPT-2 Medium, 20 residual-stream clusters a layer: " + "; ".join(texts)
        + " (a bound from the clusters' percentiles; one run)",
        setting=AUTHOR_FILES + " (residual_clusters_gpt2-medium.json: δ percentiles of 20 "
        "clusters at L1, L12, L23, 15,000 tokens each; the text's L12 median 0.003 and 95th "
        "percentile 0.45, tex line 315, are in no stored file)",
        control=controls.none_needed("the author's measured δ"))
