"""The P3 author's result files (P. Balogh, "Half the Nonlinearity Is Wasted", repository
pbalogh/half-the-nonlinearity, data/, CC BY 4.0) as transcribed by
`data/reference/transcribe_p3.py` into `data/reference/p3_<name>.csv`: the authors' evidence
the verdicts re-analyse, read by claims and pages only (never by a measurement)."""

from __future__ import annotations

import pandas as pd

from nlbudget import paths


def reference(name: str) -> pd.DataFrame:
    """`data/reference/p3_<name>.csv` of the checkout (or of the wheel's copy)."""
    return pd.read_csv(paths.shipped() / "data" / "reference" / f"p3_{name}.csv")


def finetune_runs(run: str, layers: str | None = None, small: bool = False) -> pd.DataFrame:
    """The author's GPT-2 Medium fine-tuning runs of P3 §4.9 of one kind (`linearized`,
    `control`, `two-phase gated`), optionally only those with these `layers` ("10 11 12 13"),
    with each run's final WikiText perplexity relative to the original model's (`rel`). The
    run fine-tuned on the 247K-token corpus (tex line 484) is left out unless `small`: it is
    not comparable with the runs and the control on the 117.9M-token corpus."""
    ft = reference("finetune")
    ft = ft[(ft.run == run) & ((ft.layers.astype(str) == layers) if layers else True)
            & (True if small else ~ft.corpus.str.startswith("small"))]
    return ft.assign(rel=ft.final_wiki_ppl / ft.baseline_wiki_ppl - 1).sort_values("steps")
