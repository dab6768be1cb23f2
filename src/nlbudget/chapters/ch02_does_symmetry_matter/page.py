"""Chapter 02's page: its tables, figures and the numbers glued into its prose."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from nlbudget import plots
from nlbudget.chapters.ch02_does_symmetry_matter.claims import GATED, MIN_LATER_MLPS, SYMMETRIC
from nlbudget.verdicts import stats


def modular_table(F: dict) -> pd.DataFrame:
    return pd.DataFrame({v: {"test accuracy (mean)": np.mean(r["test_acc"]),
                             "min": np.min(r["test_acc"]), "max": np.max(r["test_acc"]),
                             "train accuracy": np.mean(r["train_acc"])}
                         for v, r in F["modular"].items()}).T


def gates_table(F: dict) -> pd.DataFrame:
    rg = F["real_gates"]
    return pd.DataFrame({"exchange (trained)": [g["exchange"] for g in rg["trained"]],
                         "exchange (random)": [g["exchange"] for g in rg["random"]],
                         "scale ½ (trained)": [g["scale 0.5"] for g in rg["trained"]],
                         "gate z < 0 (trained)": [g["gate z < 0"] for g in rg["trained"]]}
                        ).rename_axis("layer")


def verdict_glue(doc: dict) -> dict:
    """The verdict words the prose quotes (the build renders them from the verdicts file as
    it is now, so a re-judged verdict reaches the prose without a rerun)."""
    c = {r["id"]: r for r in doc["claims"]}
    return {"lm_verdict": c["BOOK.P1.lm-symmetric-vs-gated"]["verdict"],
            "mod_verdict": c["BOOK.P1.modular-symmetric-vs-gated"]["verdict"],
            "gate_verdict": c["BOOK.P1.real-gate-asymmetry"]["verdict"]}


def glue(doc: dict) -> dict:
    """The numbers the prose quotes."""
    F = doc["figures"]
    t = np.array([g["exchange"] for g in F["real_gates"]["trained"]])
    r = np.array([g["exchange"] for g in F["real_gates"]["random"]])
    later = [x for v in (F.get("lm_later_mlps") or {}).values() for x in v]
    return {**verdict_glue(doc), "gate_trained": f"{np.median(t):.2f}",
            "gate_random": f"{np.median(r):.2f}",
            "later_mlps": f"{min(later):+.0%}" if later else "not recorded",
            "min_later_mlps": f"{MIN_LATER_MLPS:.0%}"}


def summary_table(F: dict) -> pd.DataFrame:
    return pd.DataFrame(summary(F)).T


def summary(F: dict) -> dict:
    """Each form against gated SiLU, paired over seeds (perplexity)."""
    lm = F["lm_val_ppl"]
    ref = GATED if GATED in lm else next(iter(lm))
    out = {}
    for v, ppl in lm.items():
        m, lo, hi = stats.t_interval(ppl)
        d = stats.paired_interval(ppl, lm[ref]) if v != ref else (0.0, np.nan, np.nan)
        out[v] = {"val PPL (mean)": m, "95% CI": [lo, hi], f"Δ vs {ref}": d[0],
                  "Δ interval (paired)": [d[1], d[2]]}
    return out


def lm_curves_figure(curves: dict, steps: int):
    """The two forms the claim compares: every seed's validation loss over training, the
    curves their positive control reads."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    plots.learning_curves(ax, {v: curves.get(v, []) for v in (SYMMETRIC, GATED)}, steps,
                          (plots.COLORS["symmetric"], plots.COLORS["silu"]))
    ax.set_title("language models: learning curves (shaded: the fifths the control compares)")
    fig.tight_layout()
    return fig


def symmetry_experiments(lm: dict, modular: dict, gates: list, cost=None, random=None):
    """Part I's experiment: validation PPL per form and seed; modular-addition accuracy;
    SmolLM2's gate asymmetry by layer, against random gated MLPs of the same shapes (`random`),
    and Part II.a's linearization cost, if given."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), gridspec_kw={"width_ratios": [1.2, 1.2, 1.4]})
    names = list(lm)
    for i, n in enumerate(names):
        axes[0].scatter([i] * len(lm[n]), lm[n], s=14, color="grey")
        axes[0].scatter([i], [np.mean(lm[n])], s=50, marker="_", color="k")
        accs = modular[n]["test_acc"]
        axes[1].scatter([i] * len(accs), accs, s=14, color="grey")
        axes[1].scatter([i], [np.mean(accs)], s=50, marker="_", color="k")
    for ax, title, lab in ((axes[0], "language modelling", "validation perplexity"),
                           (axes[1], "modular addition", "test accuracy")):
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_title(title)
        ax.set_ylabel(lab)
    layers = np.arange(len(gates))
    for key, style in (("exchange", "o-"), ("scale 0.5", "s--"), ("scale 2", "^--")):
        axes[2].plot(layers, [g[key] for g in gates], style, ms=3, label=key)
    if random is not None:
        axes[2].plot(layers, [g["exchange"] for g in random], "o-", ms=3, color="grey",
                     alpha=0.6, label="exchange, random counterpart")
    axes[2].set_xlabel("SmolLM2 layer")
    axes[2].set_ylabel("relative output change")
    axes[2].set_title("trained gates")
    if cost is not None:
        ax2 = axes[2].twinx()
        ax2.plot(layers, cost, ":", color="grey", label="linearization cost")
        ax2.set_yscale("log")
        ax2.set_ylabel("linearization cost (Part II.a)", color="grey")
        ax2.grid(False)
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    return fig
