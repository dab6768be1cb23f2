"""P3's gate sizes on the author's files: do larger gates (up to 24K parameters) add anything
over the minimal d+1 classifier (tex line 319)? Read on every stored sweep that compares them
(data/reference/p3_gate_sizes.csv)."""

from __future__ import annotations

from nlbudget.assets.reference import reference
from nlbudget.chapters.ch04_adaptive_gating.authors import AUTHOR_FILES
from nlbudget.verdicts import controls
from nlbudget.verdicts.claims import (AUTHORS, INCONCLUSIVE, NEGATIVE, NOT_REPRODUCED, NOT_RUN,
                                      POSITIVE, REPRODUCED, Decision, all_of, evidence)


#: Every stored sweep that compares gate sizes is a setting (`all_of`): the sentence is stated
#: generally (tex lines 46, 319). Pythia-2.8B, where the text itself says "the b=1 bottleneck
#: gate wins at 15 of 31 layers" (tex line 204), is one of them.
#: "Up to 24K parameters" (tex line 319) to the text's precision: a larger gate counts up to
#: (not including) 25,000 parameters; larger ones lie outside the sentence and are reported.
UP_TO = 25_000

#: Why GPT-2 Medium, the model the text's gating section is about, is no setting here.
NO_MEDIUM = ("GPT-2 Medium: no stored file compares its gate sizes (its sweeps hold one "
             "architecture), so it is no setting here; the text itself says the b=1 gate "
             "'wins at 15 of 31 layers' of Pythia-2.8B (tex line 204)")


def author_larger_gates(max_cost: float) -> dict:
    """P3's "larger gates (up to 24K parameters) provide no benefit over the minimal
    (d+1)-parameter classifier" (tex line 319) on every stored sweep that compares gate sizes
    (data/reference/p3_gate_sizes.csv: GPT-2 small's gate-size sweep — the sentence's "up to
    24K" — and its 12-layer sweep, the GPT-2 Large and Pythia-2.8B scale sweeps), read on
    their points. A larger gate is any with more parameters than the d+1 gate, as the text
    counts them (tex line 204 sets the 769-parameter gate against the 12,313-parameter one). A
    gate is judged by both things it does — the perplexity it costs and the tokens it routes —
    so a larger gate *benefits* where it costs more than `max_cost` (P3's negligible, < 1 %
    perplexity, tex lines 19, 213) less than the d+1 gate at its layer while routing at least as
    many tokens; one that costs more than that less but routes fewer is a trade the files
    cannot price (one operating point a gate, no cost-at-equal-routing curve); within the
    margin its cost is no benefit (the text gives routing no margin). A benefit can show only
    at a layer whose d+1 gate itself costs more than `max_cost` (a positive control: else no
    gate can be that much cheaper); a sweep with no such layer cannot answer (not run). Per
    sweep: any benefit, not reproduced; none and no trade, reproduced; else inconclusive.
    `all_of` over the sweeps; gates of UP_TO parameters or more lie outside the sentence."""
    t = reference("gate_sizes")
    decs, texts = {}, []
    for model, m in t.groupby("model", sort=False):
        lin = m[m.architecture == "linear"].set_index("layer")
        big = m[m.params > m.layer.map(lin.params)]
        out, big = big[big.params >= UP_TO], big[big.params < UP_TO]
        room = big.layer.map(lin.delta_pct).to_numpy() > 100 * max_cost
        gain = lin.delta_pct.reindex(big.layer).to_numpy() - big.delta_pct.to_numpy()
        more = big.routed_pct.to_numpy() - lin.routed_pct.reindex(big.layer).to_numpy()
        beyond = gain > 100 * max_cost
        won, trade = int((beyond & (more >= 0)).sum()), int((beyond & (more < 0)).sum())
        free = int(((gain >= 0) & (more > 0)).sum())
        text = (f"{won} of {int(room.sum())} larger gates at layers whose d+1 gate costs more "
                f"than {max_cost:.0%} (the book's margin, after P3's negligible < 1 %, tex line "
                "19) cost that much less than the d+1 gate while routing at least as many "
                f"tokens, {trade} cost that much less by routing fewer (point estimates, one "
                "run each)")
        decs[model] = (Decision(NOT_RUN, f"cannot show a benefit: its d+1 gate costs at most "
                                f"{lin.delta_pct.max():+.2f} % at every layer, within the "
                                "margin") if not room.any() else
                       Decision(NOT_REPRODUCED if won else INCONCLUSIVE if trade else
                                REPRODUCED, text, POSITIVE if won else "" if trade else NEGATIVE))
        best = big[beyond & (more >= 0)]
        texts.append(f"{model} ({big.source.iloc[0]}, {big.layer.nunique()} layers, gates of "
                     f"up to {big.params.max():,} parameters; {int(room.sum())} at layers where "
                     f"a benefit can show): {won} benefit, {trade} trade, "
                     f"{len(big) - won - trade} within {max_cost:.0%}; {free} route more tokens "
                     "at no higher cost (reported: the text gives routing no margin)"
                     + (" (" + ", ".join(f"L{r.layer} {r.gate}, {r.architecture}, "
                                         f"{r.params:,} parameters" for r in best.itertuples())
                        + ")" if won else "")
                     + (f"; {len(out)} gates of ≥ {UP_TO:,} parameters, outside the sentence"
                        if len(out) else ""))
    texts.append(NO_MEDIUM)
    return evidence(
        AUTHORS, all_of(decs), reads="points", measured="; ".join(texts),
        setting=AUTHOR_FILES + " (tiny_gate_results.json: GPT-2 small — the author's script "
        "loads `gpt2`, d = 768 — layers 2 and 11, ReLU-bottleneck gates of 1–32 units, each the "
        "best of three trainings; compound_gate_results.json: GPT-2 small's four gates at 12 "
        "layers; scale_test_*.json: the paper's four gates at every layer — linear (d+1), b=1 a "
        "ReLU bottleneck, b=3 and b=6 'PCA to 6/12 dims + logistic', tex lines 119–122)",
        control=controls.none_needed("the author's trained gates"))


#: What the reading leaves open.
SCALE_SWEEPS = ("a gate that routes fewer tokens costs less for that alone: the files hold one "
                "operating point a gate and no cost-at-equal-routing curve, so a larger gate "
                "that is cheaper only by routing fewer tokens is counted as a trade, neither "
                "a benefit nor none")
