"""Chapter 03's reading of the P3 author's files (transcribed in `data/reference/`): the
per-layer sweeps as the author reports them (points, with the paper's own denominators; the
rank tests over layers they are read with, which read the transfer's layers too), and the
fine-tuning runs (`p3_finetune.csv`) beside the pair's progressive runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nlbudget.assets.reference import finetune_runs, reference
from nlbudget.chapters.ch03_linear_surrogates.study import author_costs
from nlbudget.verdicts import controls
from nlbudget.verdicts.claims import (AUTHORS, INCONCLUSIVE, NEGATIVE, NOT_REPRODUCED, NOT_RUN,
                                      POSITIVE, REPRODUCED, Decision, _decision, all_of,
                                      by_parts, evidence)
from nlbudget.verdicts.readings import points_above, points_share

#: P3 §4.9 (Table 'beefy', tex line 479): L10–L13 linear, 2,000 steps, −10.2 % against the
#: original model.
PAPER_BEEFY, PAPER_BEEFY_STEPS = -0.102, 2000

#: Cited with the author's fine-tuning runs.
AUTHOR_FINETUNE = ("the P3 author's result files (pbalogh/half-the-nonlinearity, data/, CC BY "
                   "4.0), transcribed in data/reference/p3_finetune.csv; one run per budget")


def _runs_text(runs) -> str:
    return ", ".join(f"{r.steps:,} steps {r.final_wiki_ppl:.2f} ({r.rel:+.1%}, {r.source})"
                     for r in runs.itertuples())


#: The two parts of "progressive linearization" as the text states them (tex line 51).
ONE_BY_ONE = "5 layers linearized one by one at zero cost, 50 steps each (tex line 51)"
TOGETHER = ("4 layers linearized together, then fine-tuned on diverse data, better than the "
            "original (tex lines 51, 462, 484)")


def author_progressive(margin: float) -> dict:
    """The claim's two sentences on the author's files: (5 layers at 50 steps each) L10–L14
    linear at zero cost — in no stored file: not run; (4 layers beat the original) the stored
    4-layer runs (L10–L13 linear, then fine-tuned) better than the original GPT-2 Medium by
    more than `margin` (the text: "beats baseline by 10.2 %", tex line 484), read on their points (one run per budget, as the author
    reports them: a consistency check, whichever way it points). The text's PAPER_BEEFY at
    PAPER_BEEFY_STEPS is said to be, or not to be, a stored run."""
    four = finetune_runs("linearized", "10 11 12 13")
    more = finetune_runs("linearized").query("layers != '10 11 12 13'")
    small = finetune_runs("linearized", "10 11 12 13", small=True).query(
        "corpus.str.startswith('small')", engine="python")
    decs = {f"{steps:,} steps": points_above(-runs.rel - margin, 0.0, f"−relative PPL − margin "
                                             f"(better by more than the book's {margin:.0%}; the "
                                             "paper states none)", unit="run")
            for steps, runs in four.groupby("steps")}
    # stored when a run matches the text to its precision (a tenth of a percent point)
    stored = any(r.steps == PAPER_BEEFY_STEPS and abs(r.rel - PAPER_BEEFY) < 0.0005
                 for r in four.itertuples())
    measured = (f"GPT-2 Medium WikiText PPL, original {four.baseline_wiki_ppl.iloc[0]:.2f}; "
                "L10–L13 linear: " + _runs_text(four) + "; more layers: " + "; ".join(
                    f"L{r.layers.split()[0]}–L{r.layers.split()[-1]} {r.steps:,} steps "
                    f"{r.rel:+.1%}" for r in more.itertuples())
                + f" — the text's {PAPER_BEEFY:+.1%} at {PAPER_BEEFY_STEPS:,} steps is "
                f"{'a' if stored else 'no'} stored run (the nearest: the 2,000-step run of "
                "generalization_full_linear_gpt2-medium.json); left out, the run on the "
                "247K-token corpus (tex line 484): " + _runs_text(small))
    dec = by_parts({ONE_BY_ONE: Decision(
        NOT_RUN, "L10–L14 at 50 steps each (tex lines 426–445) is in no stored file"),
        TOGETHER: all_of(decs)})[0]
    return evidence(AUTHORS, dec, setting=AUTHOR_FINETUNE, measured=measured,
                    reads="points", control=controls.none_needed("the author's trained models"))


def author_progressive_control(min_behind: float) -> dict:
    """The author's 4-layer linearized run against the fine-tuning control at the same
    2,000 steps, by the book's rule (linearized / control − 1 beyond `min_behind`), read on
    the points (one run each, as the author reports them: a consistency check)."""
    lin = finetune_runs("linearized", "10 11 12 13")
    ctl = finetune_runs("control")
    both = lin.merge(ctl[["steps", "final_wiki_ppl"]], on="steps", suffixes=("", "_control"))
    gap = both.final_wiki_ppl / both.final_wiki_ppl_control - 1 - min_behind
    decs = {f"{steps:,} steps": points_above(g, 0.0, f"linearized / control − 1 − margin "
                                             f"({min_behind:.0%}: the book's, after P3's "
                                             "negligible, tex line "
                                             "19)", unit="run")
            for steps, g in gap.groupby(both.steps)}
    measured = ("GPT-2 Medium WikiText PPL: control (no layer linear, the 117.9M-token corpus) "
                + _runs_text(ctl) + "; L10–L13 linear (" + ", ".join(lin.corpus.unique())
                + ") " + _runs_text(lin))
    return evidence(AUTHORS, all_of(decs), setting=AUTHOR_FINETUNE, measured=measured,
                    reads="points", control=controls.none_needed("the author's trained models"))


#: "Not a linearization artifact" (tex line 486): linearizing alone changes LAMBADA perplexity
#: by less than this — the perplexity change P3 calls negligible ("< 1 % perplexity cost", tex
#: line 19).
ARTIFACT_MARGIN = 0.01


def _layers(layers: str) -> str:
    """"10 11 12 13" as L10–L13; a list with gaps as it is."""
    ls = [int(x) for x in str(layers).split()]
    return (f"L{ls[0]}–L{ls[-1]}" if ls == list(range(ls[0], ls[-1] + 1))
            else "L" + ", L".join(map(str, ls)))


def author_lambada() -> dict:
    """P3's LAMBADA sentences (tex lines 486, 503) on the author's full-corpus runs, as the
    author reports them (points): (degrades) every run with linear or gated layers degrades
    LAMBADA after fine-tuning; (not a linearization artifact) after fine-tuning, the
    linearized run degrades LAMBADA no more than the control fine-tuned the same steps without
    linearization, within ARTIFACT_MARGIN (the text's reason, tex line 486: "the expected
    distribution shift from fine-tuning ... not a linearization artifact"; one run each). The
    cost right after linearizing, before fine-tuning (tex line 473), is reported beside it."""
    runs = pd.concat([finetune_runs("linearized"), finetune_runs("two-phase gated")])
    ctl = finetune_runs("control").iloc[0]
    lin = finetune_runs("linearized", "10 11 12 13").query(f"steps == {ctl.steps}").iloc[0]
    post = finetune_runs("linearized", "10 11 12 13").dropna(
        subset=["post_linearization_lambada_ppl"])
    at_once = float(post.post_linearization_lambada_ppl.iloc[0] / post.baseline_lambada_ppl.iloc[0]
                    - 1)
    small = finetune_runs("linearized", small=True).query("corpus.str.startswith('small')",
                                                          engine="python")
    said = int((~runs.corpus.astype(str).str.contains("not stated")).sum())
    degrades = points_above(runs.lambada_delta_pct / 100, 0.0, "LAMBADA change of every stored "
                            "run with linear or gated layers not on the 247K-token corpus (its "
                            f"corpus recorded for {said} of {len(runs)}; the 247K-token run, "
                            "another corpus, left out: LAMBADA " + ", ".join(
                                f"{x:+.1f} %" for x in small.lambada_delta_pct) + ")", unit="runs")
    extra = (1 + lin.lambada_delta_pct / 100) / (1 + ctl.lambada_delta_pct / 100) - 1
    artifact = _decision(REPRODUCED if extra < ARTIFACT_MARGIN else NOT_REPRODUCED,
                         f"after {ctl.steps:,} fine-tuning steps the linearized L10–L13 run's "
                         f"LAMBADA is {extra:+.1%} beyond the control's (one run each, points; "
                         "the linearized run's corpus is not recorded in its file) against the "
                         f"{ARTIFACT_MARGIN:.0%} the fine-tuning shift alone would leave (the "
                         "book's margin, after P3's negligible, tex line 19); before "
                         f"fine-tuning linearizing cost {at_once:+.1%} (tex line 473, reported)",
                         NEGATIVE)
    dec, _ = by_parts({"degrades": degrades, "not a linearization artifact": artifact})
    measured = ("GPT-2 Medium LAMBADA PPL change: " + "; ".join(
        f"{r.run} {_layers(r.layers)}, {r.steps:,} steps {r.lambada_delta_pct:+.1f} %"
        for r in runs.itertuples())
        + f"; right after linearizing L10–L13, before fine-tuning: {at_once:+.1%}; the control "
        f"(no layer linear, {ctl.steps:,} steps) {ctl.lambada_delta_pct:+.1f} %, the linearized "
        f"{lin.steps:,}-step run {extra:+.1%} beyond it (one run each); the text's +38.6 % is no "
        f"stored run, the nearest {lin.lambada_delta_pct:+.1f} %")
    return evidence(AUTHORS, dec, setting=AUTHOR_FINETUNE, measured=measured, reads="points",
                    control=controls.none_needed("the author's trained models"))


#: GPT-2 Large: "no layer exceeding 3.7 % all-linear cost" (tex lines 379, 637).
LARGE_MAX = 0.037


#: Cited with every re-analysis of the author's files.
AUTHOR_FILES = ("the P3 author's result files (pbalogh/half-the-nonlinearity, data/, CC BY 4.0), "
                "transcribed in data/reference/p3_all_linear_costs.csv; read on the author's "
                "point estimates: the files' per-layer 'intervals' are the linearized model's "
                "own spread over documents divided by the baseline's point (unpaired, about "
                "±5 points wide whatever the cost), not intervals of the cost, and no file "
                "holds the paired per-document losses an interval would need")


#: The layers the paper counts (tex line 161, Table 'models': GPT-2 Medium "1–23 (all
#: non-embedding)" — 23 layers, layer 0 left out; line 372 "Medium with all 23 layers"); other
#: models: every layer of the author's sweep.
PAPER_LAYERS = {"gpt2-medium": range(1, 24)}


#: "70 % of layers" (tex line 31) to the precision the paper states it (a whole percent): a
#: share of at least 69.5 % reads as 70 %.
CHEAP_SHARE_AS_STATED = 0.695


def author_layers(model: str, counted: bool = False):
    """The author's per-layer all-linear costs of `model`; `counted`: only the layers the
    paper counts (`PAPER_LAYERS`)."""
    ref = author_costs()
    t = ref[ref.model == model].sort_values("layer")
    return t[t.layer.isin(PAPER_LAYERS[model])] if counted and model in PAPER_LAYERS else t


#: GPT-2 Medium's sweep on the paper's own evaluation split: 12,000 tokens (tex line 127), the
#: baseline 34.76 PPL the text quotes (tex line 357) — `bootstrap_ci_gpt2_medium_12k.json`,
#: transcribed in data/reference/p3_gpt2_medium_12k.csv. `p3_all_linear_costs.csv` holds the
#: author's larger evaluation of the same model (35,839 tokens, baseline 35.10).
EVAL_12K = ("the paper's evaluation (12,000 tokens, tex line 127; baseline "
            "{base:.2f} PPL, tex line 357)")


def author_cheap_share(edge: float):
    """"70 % of GPT-2 Medium's layers cost under `edge`" on the author's files, on the layers
    the paper counts: the paper's own 12,000-token evaluation and the author's larger one, each
    read on its points (one sweep each), both required (`all_of`: two evaluations of one
    claim). Returns (Decision, measured text)."""
    t12 = reference("gpt2_medium_12k")
    t12 = t12[t12.layer.isin(PAPER_LAYERS["gpt2-medium"])]
    big = author_layers("gpt2-medium", counted=True)
    name12 = EVAL_12K.format(base=float(t12.baseline_ppl.iloc[0]))
    name50 = f"the author's larger evaluation (baseline {float(big.baseline_ppl.iloc[0]):.2f} PPL)"
    dec = all_of({name: points_share(t.cost_pct / 100, edge, CHEAP_SHARE_AS_STATED,
                                     "all-linear cost", claims=NEGATIVE)
                  for name, t in ((name12, t12), (name50, big))})
    mid = {k: t[t.layer.between(2, 15)].cost_pct for k, t in (("12k", t12), ("large", big))}
    measured = (f"GPT-2 Medium, the author's all-linear costs of the {len(t12)} layers the paper "
                f"counts (L1–L23, tex line 161): {name12}: "
                f"{int((t12.cost_pct < edge * 100).sum())} below 3 % (layers 2–15 "
                f"{mid['12k'].min():.2f}–{mid['12k'].max():.2f} %); {name50}: "
                f"{int((big.cost_pct < edge * 100).sum())} below 3 % (layers 2–15 "
                f"{mid['large'].min():.2f}–{mid['large'].max():.2f} %); the text: 70 %, layers "
                f"2–15 1.6–2.5 % (a share is read to the whole percent the text states: "
                f"{CHEAP_SHARE_AS_STATED:.1%} and above reads as 70 %)")
    others = [m for m in author_costs().model.unique() if m.startswith("pythia")]
    measured += ("; the other sweeps, outside the sentence (tex line 31: 'In GPT-2 Medium'), "
                 "reported: " + ", ".join(
                     f"{m} {int((t.cost_pct < edge * 100).sum())} of {len(t)}"
                     for m, t in ((m, author_layers(m)) for m in others)) + " layers below 3 %")
    return dec, measured


def _max_cost_points(points: dict) -> Decision:
    top = max(points, key=points.get)
    text = (f"point estimates only (the file holds no interval): the largest, layer {top}, "
            f"{points[top]:+.2%}")
    return Decision(REPRODUCED if points[top] <= LARGE_MAX else NOT_REPRODUCED,
                    text + (" ≤ " if points[top] <= LARGE_MAX else " > ") + f"{LARGE_MAX:.1%}")


def max_cost(ivs: dict) -> Decision:
    """"No layer exceeds LARGE_MAX": not reproduced if some layer's interval lies above it,
    reproduced if every layer's lies below it, else inconclusive. A file that holds point
    estimates only (the author's GPT-2 Large sweep) is read on its points, and says so."""
    if all(not (np.isfinite(lo) and np.isfinite(hi)) for lo, hi in ivs.values()):
        pts = {l: lo for l, (lo, _) in ivs.items()}
        return _max_cost_points(pts)
    above = [l for l, (lo, _) in ivs.items() if lo > LARGE_MAX]
    if above:
        return Decision(NOT_REPRODUCED, f"layers {above} lie above {LARGE_MAX:.1%} beyond the "
                        "uncertainty")
    if all(hi < LARGE_MAX for _, hi in ivs.values()):
        return Decision(REPRODUCED, f"every layer's interval lies below {LARGE_MAX:.1%}")
    cross = [l for l, (_, hi) in ivs.items() if hi >= LARGE_MAX]
    return Decision(INCONCLUSIVE, f"the intervals of layers {cross} cross {LARGE_MAX:.1%}")


def ranks_above(high, low, text: str) -> Decision:
    """Does the group `high` rank above `low` over layers? One-sided Mann–Whitney rank tests
    both ways at U_ALPHA (ranks: one catastrophic layer counts as one layer, as the paper's
    medians do): reproduced when it ranks above, not reproduced when below, else
    inconclusive; `text` names the groups."""
    from scipy import stats as sps
    up = sps.mannwhitneyu(high, low, alternative="greater").pvalue
    down = sps.mannwhitneyu(high, low, alternative="less").pvalue
    text += f": one-sided rank p {up:.3g} (costlier), {down:.3g} (cheaper)"
    return (Decision(REPRODUCED, text, POSITIVE) if up < U_ALPHA else
            Decision(NOT_REPRODUCED, text, NEGATIVE) if down < U_ALPHA else
            Decision(INCONCLUSIVE, text))


def costlier_by_rank(high, low, gap: float) -> Decision:
    """Per-layer point estimates of two models: is the first costlier than the second by more
    than `gap` (`ranks_above` of high − gap against low)?"""
    return ranks_above(np.asarray(high) - gap, low,
                       f"{len(high)} against {len(low)} layers, shifted by {gap:g}")


#: The author's models paired at comparable size (tex line 372): GPT-2 Medium (355M) with
#: Pythia-410M, GPT-2 Large (774M) with Pythia-1B; each pair is a setting (`all_of`).
SIZE_PAIRS = (("pythia-410m", "gpt2-medium"), ("pythia-1b", "gpt2-large"))


def author_pythia_costlier(gap: float) -> dict:
    """P3's "Pythia models show higher linearization costs" on the author's per-layer costs:
    each Pythia (parallel) against the GPT-2 (sequential) of comparable size (tex line 372),
    layer 0 left out, ranked with the shift `gap` (`costlier_by_rank`), every pair a setting.
    Observational: the models differ in data, tokenizer and training too."""
    cost = {m: author_layers(m).query("layer > 0").cost_pct.to_numpy() / 100
            for pair in SIZE_PAIRS for m in pair}
    return evidence(
        AUTHORS, all_of({f"{py} vs {g2}": costlier_by_rank(cost[py], cost[g2], gap)
                         for py, g2 in SIZE_PAIRS}),
        measured="the author's per-layer all-linear costs, layer 0 left out, each Pythia "
        "(parallel) against the GPT-2 (sequential) of comparable size (tex line 372: 'cheaper "
        "than Pythia at comparable size'): " + "; ".join(
            f"{py} median {np.median(cost[py]):+.1%} vs {g2} {np.median(cost[g2]):+.1%}"
            for py, g2 in SIZE_PAIRS),
        setting=AUTHOR_FILES + "; models that also differ in data, tokenizer and training "
        "(observational: shows that Pythia costs more, not that the topology is why — that "
        "is P3.topology-cause)",
        reads="points", observational=True,
        control=controls.none_needed("the author's trained models and files"))


#: The U-shape's layer groups by relative depth (layer / number of layers): early boundary
#: layers below EARLY, late ones from LATE on, middle layers in MIDDLE — Pythia-2.8B's L0–L2
#: and L28–L31 against L7–L15 (tex line 546; line 548 puts L3 among the cheap "sweet spot"),
#: the paper's own groups, at any depth.
EARLY, LATE, MIDDLE = 0.09, 0.875, (0.2, 0.5)


#: The rank test's level, per part (the book's: the paper runs no test of its U-shape).
U_ALPHA = 0.05


#: The paper's own boundary and middle layers where it names them per model: Pythia-2.8B's
#: L0–L2 and L28–L31 against L7–L15 (tex line 546); GPT-2 Medium's "lone exceptions are the
#: first layer (catastrophic) and the last" against layers 2–15 (tex line 35). Other models
#: (the transfer): the relative-depth groups EARLY, LATE, MIDDLE.
PAPER_GROUPS = {"pythia-2.8b": ((0, 1, 2), (28, 29, 30, 31), tuple(range(7, 16))),
                "gpt2-medium": ((0,), (23,), tuple(range(2, 16)))}


def above_group(grp, mid, text: str) -> Decision:
    """`ranks_above`, or, where no rank test can reach U_ALPHA (a one-layer group against n
    middle layers: the smallest one-sided p is 1 / (n + 1)), the points as the author reports
    them: reproduced when every boundary layer costs more than every middle layer, not
    reproduced when every one costs less, else inconclusive."""
    grp, mid = np.asarray(grp, float), np.asarray(mid, float)
    if not len(grp) or not len(mid):  # a model too shallow to hold both groups
        return Decision(INCONCLUSIVE, text + ": a group holds no layer at this depth")
    if 1 / math.comb(len(grp) + len(mid), len(grp)) < U_ALPHA:
        return ranks_above(grp, mid, text)
    text += (f": no rank test of {len(grp)} against {len(mid)} layers reaches p < {U_ALPHA}; "
             f"points: {', '.join(f'{x:+.2%}' for x in grp)} against the middle's "
             f"{mid.min():+.2%}…{mid.max():+.2%}")
    return (Decision(REPRODUCED, text, POSITIVE) if grp.min() > mid.max() else
            Decision(NOT_REPRODUCED, text, NEGATIVE) if grp.max() < mid.min() else
            Decision(INCONCLUSIVE, text))


def u_shape(costs, groups=None) -> tuple[Decision, dict]:
    """Per-layer costs (in layer order) → (decision, parts): the early boundary layers cost
    more than the middle ones, and so do the late ones — each by a one-sided Mann–Whitney rank
    test over layers at U_ALPHA (ranks: one catastrophic layer, such as layer 0, counts as one
    layer, not as its size; `above_group`): reproduced when the boundary group ranks above the
    middle, not reproduced when it ranks below, else inconclusive. `groups`: the paper's own
    (early, late, middle) layers (PAPER_GROUPS); else by relative depth."""
    c = np.asarray(costs, float)
    if groups is None:
        rel = np.arange(len(c)) / len(c)
        groups = tuple(np.flatnonzero(m) for m in (rel < EARLY, rel >= LATE,
                                                   (rel >= MIDDLE[0]) & (rel < MIDDLE[1])))
    early, late, mid = (c[list(g)] for g in groups)
    return by_parts({name: above_group(grp, mid, f"{len(grp)} {name.split()[0]} vs {len(mid)} "
                                                 "middle layers")
                     for name, grp in (("early layers costlier", early),
                                       ("late layers costlier", late))})


#: The text's numbers that no stored result file holds (the ledger page lists them): (claim,
#: the number as the text gives it, where).
UNSTORED = (
    ("P3.progressive", "5 of 24 GPT-2 Medium layers (L10–L14) linear at zero cost after 50 "
     "fine-tuning steps each", "tex lines 51, 416–462"),
    ("P3.progressive", "L10–L13 linear, 2,000 steps: −10.2 % against the original (the stored "
     "runs: −9.8 % at 2,000 steps, −13.5 % at 5,000)", "tex lines 479, 484"),
    ("P3.simultaneous", "all 12 layers linear at once: +246 %, +72 % after 300 fine-tuning "
     "steps", "tex line 457"),
    ("P3.lambada-degradation", "LAMBADA +38.6 % after linearizing and fine-tuning (the stored "
     "runs: see the row; the nearest is another)", "tex lines 479, 486, 493"),
)
