"""P3's no-fly lists (tex lines 19, 270–286, 624): "per-token routing lists built on one corpus
show zero correlation (r < 0.05) when tested on another", and few tokens keep their status —
on the author's stored no-fly file, read on its points; and the book's question whether they
lose it beyond regression to the mean."""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from nlbudget.assets.reference import reference
from nlbudget.verdicts import controls, stats
from nlbudget.verdicts.claims import (AUTHORS, INCONCLUSIVE, NEGATIVE, NOT_REPRODUCED, NOT_RUN,
                                      REPRODUCED, TRANSFER, Claim, Decision, _decision, all_of,
                                      decided, evidence)

#: The paper's own bound, as it writes it: "r < 0.05" (tex lines 19, 624) — no transfer is a
#: correlation below it; the paper counts its negative cross-domain r (−0.062) as none (tex
#: line 286). The two-sided |r| < 0.05 is reported beside it, not judged.
R_BOUND = 0.05

NAMES = {"wikitext-train": "same domain (WikiText-103 train)", "lambada": "cross-domain (LAMBADA)"}


def below_bound(r: float, what: str) -> Decision:
    """One correlation, a point: below R_BOUND (no transfer) or not."""
    return _decision(REPRODUCED if r < R_BOUND else NOT_REPRODUCED,
                     f"{what}: r = {r:+.3f} {'<' if r < R_BOUND else '≥'} {R_BOUND} (point "
                     "estimate, as the author reports it)", NEGATIVE)


def author_nofly_cross() -> dict:
    """The stored no-fly tokens (p3_nofly.csv, GPT-2 Medium L12), r per test corpus from their
    points; each corpus a setting (`all_of`)."""
    t = reference("nofly")
    r = {c: (float(sps.pearsonr(g.build_mean, g.test_mean)[0]), len(g))
         for c, g in t.groupby("test_corpus")}
    two = [NAMES.get(c, c) for c, (x, _) in r.items() if abs(x) >= R_BOUND]
    return evidence(
        AUTHORS, all_of({NAMES.get(c, c): below_bound(x, f"{n} tokens found again")
                         for c, (x, n) in r.items()}), reads="points",
        measured="; ".join(f"{NAMES.get(c, c)}: r = {x:+.3f} over {n} tokens found again"
                           for c, (x, n) in r.items())
        + (f"; read two-sided (|r| < {R_BOUND}, not the paper's words) {', '.join(two)} would "
           "fall outside" if two else ""),
        setting="the P3 author's nofly_cross_corpus_gpt2-medium.json (pbalogh/half-the-"
        "nonlinearity, data/, CC BY 4.0), transcribed in data/reference/p3_nofly.csv: each "
        "no-fly token's mean δ on both corpora, r computed from them (the text's 0.041 and "
        "−0.062, tex lines 280–281)",
        control=controls.none_needed("the author's measured lists"))


#: A no-fly token's mean δ must exceed this (P3: "mean delta exceeded 0.05 across ≥ 10
#: observations").
NOFLY_DELTA = 0.05

#: "Does not transfer" beyond noise (the book's question): the share of no-fly tokens whose mean
#: δ stays above NOFLY_DELTA on new text must lie this far below the share a stable token would
#: keep — the book's margin, stated before the data.
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
            f"{lo:.0%}–{hi:.0%}) against the cut {cut:.1%}: {reference:.1%} for stable tokens "
            f"less the book's {RETENTION_MARGIN:.0%}")
    return Decision(REPRODUCED if hi < cut else NOT_REPRODUCED if lo > cut else INCONCLUSIVE,
                    text)


#: "Few keep it" (tex lines 280–286 give shares, no bound): the book's reading, stated before
#: the data — fewer than half of the tokens found again are still no-fly.
FEW = 0.5


def few_keep(still: int, found: int, what: str, points: bool) -> Decision:
    """Fewer than FEW of `found` tokens still no-fly: on the author's points as reported, or on
    the Clopper–Pearson interval of the book's own count."""
    share, lo, hi = stats.proportion_interval(still, found)
    text = f"{what}: {still} of {found} still no-fly ({share:.1%}"
    if points:
        return _decision(REPRODUCED if share < FEW else NOT_REPRODUCED, text + ", point "
                         f"estimate as the author reports it) against the book's {FEW:.0%}",
                         NEGATIVE)
    return _decision(REPRODUCED if hi < FEW else NOT_REPRODUCED if lo >= FEW else INCONCLUSIVE,
                     text + f", CI {lo:.0%}–{hi:.0%}) against the book's {FEW:.0%}", NEGATIVE)


def claim_nofly_retention(F, S) -> Claim:
    """P3 Table 'Cross-corpus stability of No-Fly lists': "only 31.5 % of No-Fly tokens retain
    their status, and 26.8 % flip to negative delta" (WikiText-103 train; LAMBADA 22 %). The
    author's stored lists are read on their points, each corpus a setting (`all_of`): fewer than
    FEW still no-fly. Whether that is more than regression to the mean — a list selected for
    high δ loses status on any new text, however stable each token — is the book's own question
    (`claim_nofly_regression`)."""
    ref = reference("nofly")
    decs, texts = {}, []
    for corpus, rows in ref.groupby("test_corpus", sort=False):
        still, flip = int(rows.still_nofly.sum()), int((rows.test_mean < 0).sum())
        decs[NAMES.get(corpus, corpus)] = few_keep(still, len(rows), "tokens found again", True)
        texts.append(f"{NAMES.get(corpus, corpus)}: {len(rows)} of {rows.n_nofly.iloc[0]} found "
                     f"again; still no-fly (mean δ > {NOFLY_DELTA} and > 60 % of δ positive) "
                     f"{still} ({still / len(rows):.1%}), flipped to δ < 0 {flip} "
                     f"({flip / len(rows):.1%})")
    authors = evidence(AUTHORS, all_of(decs), measured="; ".join(texts), reads="points",
                       setting=AUTHOR_NOFLY + "; GPT-2 Medium L12, built on WikiText-103 test",
                       control=controls.none_needed("the author's measured lists"))
    name = next(iter(F["pretrained"]))
    nf = F["nofly"][name]
    own = all_of({k: few_keep(v["still_nofly"], v["found"], k, False)
                  for k, v in nf["by_target"].items() if v.get("found")
                  and isinstance(v.get("still_nofly"), int)}) if any(
        v.get("found") for v in nf["by_target"].values()) else Decision(
        INCONCLUSIVE, "no no-fly token found again")
    return decided(
        "P3.nofly-retention", own, tested=TRANSFER, authors=authors,
        positive=controls.none_needed("a count of measured lists"),
        setting=f"{name} L{nf['layer']}: {S['corpus']} against its test split and "
        f"{S['cross_corpus']}, not WikiText / LAMBADA on GPT-2 Medium",
        measured=f"{name}: " + "; ".join(
            f"{k}: {v['found']} found again, {v.get('still_nofly', 'n/a')} still no-fly, "
            f"{v.get('flipped', 'n/a')} flipped" for k, v in nf["by_target"].items()),
        control=f"the book's reading of 'few': fewer than {FEW:.0%} still no-fly",
        needs="more no-fly windows (≈ 200 at one layer)", author_data=authors["measured"],
        note="retention below 100 % is expected of any selected list (regression to the mean): "
        "whether these lists lose more is row BOOK.P3.nofly-beyond-regression")


def claim_nofly_regression(F, S) -> Claim:
    """The book's question, from P3's no-fly table: do the tokens lose their status beyond what
    regression to the mean predicts? Each corpus (a setting, `all_of`) against the share a
    *stable* token would keep (`stable_retention`), which the author's per-token file allows
    (the build mean, s.d. and count of every token). The statistic is the book's, not a number
    the author reports, so it is read on its interval (`retention_decision`: Clopper–Pearson
    over the list's tokens), not on its point. The book's transfer, SmolLM2's list, has no
    per-token record: not run."""
    ref = reference("nofly")
    decs = {NAMES.get(c, c): retention_decision(int((rows.test_mean > NOFLY_DELTA).sum()),
                                                len(rows), stable_retention(rows), c)
            for c, rows in ref.groupby("test_corpus", sort=False)}
    dec = all_of(decs)
    authors = evidence(AUTHORS, dec, measured=dec.reason, reads="intervals",
                       setting=AUTHOR_NOFLY + "; GPT-2 Medium L12, built on WikiText-103 test; "
                       "one list each, its kept share read on its interval over tokens",
                       control=controls.none_needed("the author's measured lists, judged "
                                                    "against the stable-token reference"))
    return decided(
        "BOOK.P3.nofly-beyond-regression", Decision(NOT_RUN, "no per-token record of the "
        "book's own list to compute the stable-token reference"), tested=TRANSFER,
        authors=authors, kind="book", positive=controls.none_needed("a re-analysis of measured "
                                                                    "lists"),
        measured="not measured on the book's model (no per-token record); the author's lists: "
        + dec.reason,
        control=f"the share a stable token would keep (selection-corrected), less the book's "
        f"{RETENTION_MARGIN:.0%}",
        needs="a list long enough for each kept share's interval to clear the cut (an "
        "undecided corpus: more no-fly tokens found again); the book's own list: a per-token "
        "record",
        note="the reference's own uncertainty (each corrected mean is an estimate) is covered "
        "only by the margin")
