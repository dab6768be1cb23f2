"""Chapter 04's reading of the P3 author's result files (transcribed in `data/reference/`), and
the claim that rests on them alone: do the tokens of a no-fly list keep their status on new text
more rarely than tokens whose need for nonlinearity were a fixed property would?"""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from nlbudget.assets.reference import finetune_runs, reference
from nlbudget.verdicts import controls, stats
from nlbudget.verdicts.claims import (AUTHORS, INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED,
                                      TRANSFER, Claim, Decision, by_parts, decided, evidence,
                                      over_runs)

#: A no-fly token's mean δ must exceed this (P3: "mean delta exceeded 0.05 across ≥ 10
#: observations").
NOFLY_DELTA = 0.05

#: "Does not transfer" beyond noise: the share of no-fly tokens whose mean δ stays above
#: NOFLY_DELTA on new text must lie this far below the share a stable token would keep.
RETENTION_MARGIN = 0.05

AUTHOR_NOFLY = ("the P3 author's nofly_cross_corpus_gpt2-medium.json (pbalogh/half-the-"
                "nonlinearity, data/, CC BY 4.0), transcribed in data/reference/p3_nofly.csv")


def selection_corrected_mean(mean: float, sd: float, n: int, threshold: float) -> float:
    """The winner's-curse correction of a mean that was *selected* for exceeding `threshold`:
    the conditional maximum-likelihood estimate of the true mean μ given the observed mean and
    that it was kept only because it exceeded the threshold (the normal likelihood of the mean,
    standard error sd/√n, divided by the chance of passing the cut: Zhong & Prentice 2008).
    Never above the observed mean; far below it where the mean barely passed a noisy cut."""
    from scipy import optimize

    se = max(sd, 1e-12) / np.sqrt(max(n, 1))

    def nll(mu):
        return -(sps.norm.logpdf(mean, mu, se) - sps.norm.logsf(threshold, mu, se))

    return float(optimize.minimize_scalar(nll, bounds=(mean - 20 * se, mean),
                                          method="bounded").x)


def stable_retention(rows) -> float:
    """The share of a list's tokens that would keep a mean δ above NOFLY_DELTA on new text if
    each token's δ were a fixed property: its true mean, corrected for having been selected
    for exceeding the cut (`selection_corrected_mean`, from its build mean, s.d. and
    count), seen through the new text's noise (its s.d. over √count there). The
    conditional estimate over-corrects: on simulated stable lists the reference falls 4–11
    points below their true retention (a test), so a list found below it has lost more than
    regression to the mean explains. The author's second criterion (over 60 % of δ positive)
    is left out: retention is counted on the mean alone."""
    p = []
    for r in rows.itertuples():
        mu = selection_corrected_mean(r.build_mean, r.build_std, r.build_n, NOFLY_DELTA)
        se = max(r.test_std, 1e-12) / np.sqrt(r.test_n)
        p.append(sps.norm.sf(NOFLY_DELTA, mu, se))
    return float(np.mean(p))


def retention_decision(kept: int, found: int, reference: float, what: str) -> Decision:
    """Reproduced when the kept share's Clopper–Pearson interval lies below the stable
    reference less RETENTION_MARGIN; not reproduced when it lies above it (tokens keep their
    status as a fixed property would); else inconclusive."""
    share, lo, hi = stats.proportion_interval(kept, found)
    cut = reference - RETENTION_MARGIN
    text = (f"{what}: {kept} of {found} keep mean δ > {NOFLY_DELTA} ({share:.0%}, CI "
            f"{lo:.0%}–{hi:.0%}) against {reference:.0%} for stable tokens")
    return Decision(REPRODUCED if hi < cut else NOT_REPRODUCED if lo > cut else INCONCLUSIVE,
                    text)


def claim_nofly_retention(F, S) -> Claim:
    """P3 Table 'Cross-corpus stability of No-Fly lists': "only 31.5 % of No-Fly tokens retain
    their status, and 26.8 % flip to negative delta" (WikiText-103 train; LAMBADA 22 %). Retention
    alone is no evidence: a list selected for high mean δ on one corpus regresses to the mean on
    any other, however stable each token is. So each corpus is a part judged against the share
    a *stable* token would keep (`stable_retention`), which the author's per-token file allows
    (the build mean, s.d. and count of every token). The book's transfer, SmolLM2's list, has
    no per-token record: its few tokens found again are shown beside it."""
    ref = reference("nofly")
    parts, texts = {}, []
    for corpus, rows in ref.groupby("test_corpus", sort=False):
        kept = int((rows.test_mean > NOFLY_DELTA).sum())
        parts[corpus] = retention_decision(kept, len(rows), stable_retention(rows), corpus)
        still, flip = int(rows.still_nofly.sum()), int((rows.test_mean < 0).sum())
        texts.append(f"{corpus}: {len(rows)} of {rows.n_nofly.iloc[0]} found again; still "
                     f"no-fly (mean δ > {NOFLY_DELTA} and > 60 % of δ positive) {still} "
                     f"({still / len(rows):.1%}), flipped to δ < 0 {flip} ({flip / len(rows):.1%})")
    dec, verdicts = by_parts(parts)
    authors = evidence(AUTHORS, dec, measured="; ".join(texts) + "; " + dec.reason,
                       setting=AUTHOR_NOFLY + "; GPT-2 Medium L12, built on WikiText-103 test",
                       control=controls.none_needed("the author's measured lists, judged "
                                                    "against the stable-token reference"))
    name = next(iter(F["pretrained"]))
    nf = F["nofly"][name]
    found = {k: (v["found"], v.get("still_nofly", "n/a"), v.get("flipped", "n/a"))
             for k, v in nf["by_target"].items()}
    own = Decision(INCONCLUSIVE, "no per-token record of the list to compute the stable-token "
                   "reference, and " + ", ".join(f"{f} found again on {k}" for k, (f, _, _)
                                                 in found.items()))
    return decided(
        "P3.nofly-retention", own, parts=verdicts, tested=TRANSFER, authors=authors,
        positive=controls.none_needed("a re-analysis of measured lists"),
        setting=f"{name} L{nf['layer']}: {S['corpus']} against its test split and "
        f"{S['cross_corpus']}, not WikiText / LAMBADA on GPT-2 Medium",
        measured=f"{name}: " + "; ".join(f"{k}: {f} found again, {s} still no-fly, {fl} flipped"
                                          for k, (f, s, fl) in found.items()),
        control=f"the share a stable token would keep (selection-corrected), less "
        f"{RETENTION_MARGIN:.0%}",
        needs="more no-fly windows (≈ 200 at one layer) and a per-token record of the list",
        author_data="WikiText-103 train: 47 of 149 still no-fly (31.5 %), 40 flipped (26.8 %); "
        "LAMBADA: 22 of 100 (22 %)",
        note="retention below 100 % is expected of any selected list (regression to the mean); "
        "only retention below the stable-token reference says the status does not transfer. The "
        "reference's own uncertainty (each corrected mean is an estimate) is covered only by "
        "the margin")


#: P3 §5.3: the two-phase gated model's WikiText perplexity, as the text reports it.
PAPER_TWO_PHASE = 19.00


def author_two_phase(setting: str) -> dict:
    """The author's stored two-phase gated run against the fine-tuning control: the control's
    lead over the gated model, one run each (never decides)."""
    runs = finetune_runs("two-phase gated", "10 11 12 13")
    ctl, gated = finetune_runs("control").iloc[0], runs.iloc[0]
    other = finetune_runs("two-phase gated").query("layers != '10 11 12 13'")
    stored = (runs.final_wiki_ppl - PAPER_TWO_PHASE).abs().min() < 0.01
    return evidence(
        AUTHORS, over_runs(ctl.final_wiki_ppl / runs.final_wiki_ppl - 1, "control / gated − 1"),
        measured=f"the control ({ctl.source}) {ctl.final_wiki_ppl:.2f} PPL at {ctl.steps:,} "
        f"steps; the text's two-phase run (L10–L13, {gated.source}, stored as its deltas) "
        f"{gated.final_wiki_ppl:.2f} at {gated.steps:,} steps — the text's "
        f"{PAPER_TWO_PHASE:.2f} is {'a' if stored else 'no'} stored run; the control ends "
        f"{'below' if ctl.final_wiki_ppl < gated.final_wiki_ppl else 'above'} it with fewer "
        "steps (the text compares with the control's step-400 value, −14.8 %); "
        + "; ".join(f"another stored run, layers {r.layers}: {r.final_wiki_ppl:.2f}"
                    for r in other.itertuples()) + "; one run each", setting=setting,
        reads="points", control=controls.none_needed("the author's trained models"))
