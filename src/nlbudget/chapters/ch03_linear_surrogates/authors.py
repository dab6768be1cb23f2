"""Chapter 03's reading of the P3 author's fine-tuning runs (transcribed in
`data/reference/p3_finetune.csv`): the authors' evidence beside the pair's progressive runs."""

from __future__ import annotations

import pandas as pd

from nlbudget.assets.reference import finetune_runs
from nlbudget.verdicts import controls
from nlbudget.verdicts.claims import AUTHORS, all_of, by_parts, evidence, over_runs, points_above

#: P3 §4.9 (Table 'beefy', tex line 479): L10–L13 linear, 2,000 steps, −10.2 % against the
#: original model.
PAPER_BEEFY, PAPER_BEEFY_STEPS = -0.102, 2000

#: Cited with the author's fine-tuning runs.
AUTHOR_FINETUNE = ("the P3 author's result files (pbalogh/half-the-nonlinearity, data/, CC BY "
                   "4.0), transcribed in data/reference/p3_finetune.csv; one run per budget")


def _runs_text(runs) -> str:
    return ", ".join(f"{r.steps:,} steps {r.final_wiki_ppl:.2f} ({r.rel:+.1%}, {r.source})"
                     for r in runs.itertuples())


def author_progressive(margin: float) -> dict:
    """The author's stored 4-layer runs (L10–L13 linear, then fine-tuned) against the original
    GPT-2 Medium, under the same non-inferiority `margin`; one run per budget never decides."""
    four = finetune_runs("linearized", "10 11 12 13")
    more = finetune_runs("linearized").query("layers != '10 11 12 13'")
    small = finetune_runs("linearized", "10 11 12 13", small=True).query(
        "corpus.str.startswith('small')", engine="python")
    decs = {f"{steps:,} steps": over_runs(margin - runs.rel, "margin − relative PPL")
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
    return evidence(AUTHORS, all_of(decs), setting=AUTHOR_FINETUNE, measured=measured,
                    reads="points", control=controls.none_needed("the author's trained models"))


def author_progressive_control(min_behind: float) -> dict:
    """The author's 4-layer linearized run against the fine-tuning control at the same
    2,000 steps, by the book's rule (linearized / control − 1 beyond `min_behind`); one run."""
    lin = finetune_runs("linearized", "10 11 12 13")
    ctl = finetune_runs("control")
    both = lin.merge(ctl[["steps", "final_wiki_ppl"]], on="steps", suffixes=("", "_control"))
    gap = both.final_wiki_ppl / both.final_wiki_ppl_control - 1 - min_behind
    decs = {f"{steps:,} steps": over_runs(g, "linearized / control − 1 − margin")
            for steps, g in gap.groupby(both.steps)}
    measured = ("GPT-2 Medium WikiText PPL, both on the 117.9M-token corpus: control (no layer "
                "linear) " + _runs_text(ctl) + "; L10–L13 linear " + _runs_text(lin))
    return evidence(AUTHORS, all_of(decs), setting=AUTHOR_FINETUNE, measured=measured,
                    reads="points", control=controls.none_needed("the author's trained models"))


#: "Not a linearization artifact": the linearized run's LAMBADA change exceeds the control's by
#: less than this (the book's margin, in relative perplexity: a tenth of the text's +38.6 %).
ARTIFACT_MARGIN = 0.0386


def author_lambada() -> dict:
    """P3's LAMBADA sentences (tex lines 486, 503) on the author's full-corpus runs: every run
    with linear or gated layers degrades LAMBADA (point estimates, as reported), and the
    2,000-step L10–L13 run's degradation against the control's at the same steps (one run
    each: `over_runs` never decides on one)."""
    runs = pd.concat([finetune_runs("linearized"), finetune_runs("two-phase gated")])
    ctl = finetune_runs("control").iloc[0]
    lin = finetune_runs("linearized", "10 11 12 13").query(f"steps == {ctl.steps}").iloc[0]
    lam = runs.lambada_delta_pct / 100
    degrades = points_above(lam, 0.0, "LAMBADA change of every full-corpus run", unit="runs")
    extra = (1 + lin.lambada_delta_pct / 100) / (1 + ctl.lambada_delta_pct / 100) - 1
    artifact = over_runs([ARTIFACT_MARGIN - extra], "margin − linearized / control LAMBADA − 1",
                         claims="negative")
    dec, verdicts = by_parts({"degrades": degrades, "not a linearization artifact": artifact})
    measured = ("GPT-2 Medium LAMBADA PPL change: " + "; ".join(
        f"{r.run} L{r.layers.split()[0]}–L{r.layers.split()[-1]}, {r.steps:,} steps "
        f"{r.lambada_delta_pct:+.1f} %" for r in runs.itertuples())
        + f"; control {ctl.steps:,} steps {ctl.lambada_delta_pct:+.1f} %: the linearized "
        f"{lin.steps:,}-step run degrades {extra:+.1%} beyond it (the text's +38.6 % is no "
        f"stored run; the nearest {lin.lambada_delta_pct:+.1f} %)")
    return evidence(AUTHORS, dec, setting=AUTHOR_FINETUNE, measured=measured, reads="points",
                    control=controls.none_needed("the author's trained models"))

