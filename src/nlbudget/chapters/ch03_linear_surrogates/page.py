"""Chapter 03's page: its tables, figures and the numbers glued into its prose."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from nlbudget import plots
from nlbudget.verdicts import controls
from nlbudget.chapters.ch03_linear_surrogates.claims import (MIN_ABLATION,
                                                              MIN_MIDDLE_ABLATION, _main)
from nlbudget.chapters.ch03_linear_surrogates.study import CHEAP, author_costs, summarise


def layer_table(rep: dict):
    """Per layer: R² of both fits, the first position's output norm, both costs."""
    return pd.DataFrame({
        "R² plain": rep["r2"]["plain"], "R² keep-first": rep["r2"]["keep-first"],
        "‖y₀‖ / median ‖y‖": rep["first_position_ratio"],
        "cost plain": rep["cost"]["plain"], "cost keep-first": rep["cost"]["keep-first"],
    }).rename_axis("layer").style.format("{:.3g}")


def costs_by_variant(reports: dict) -> dict:
    """{"model — variant": (costs, intervals)} for `plots.layer_costs`."""
    return {f"{m} — {v}": (r["cost"][v], r["ci"][v])
            for m, r in reports.items() for v in ("plain", "keep-first")}


def pair_table(pair: dict) -> pd.DataFrame:
    return pd.DataFrame({k: {
        "parameters": v["params"], "train tokens": v["train_tokens"],
        "val PPL": v["ablation"]["ppl"], "val PPL, MLPs zeroed": v["ablation"]["ppl_mlps_ablated"],
        "ablation cost": f"{100 * v['ablation']['cost']:+.0f} %",
        "middle third linear": f"{100 * v['report']['middle']['plain']['cost']:+.2f} %"}
        for k, v in pair.items()})


def by_depth(F: dict) -> tuple[dict, dict]:
    """Our per-layer costs and the paper's curves, for `plots.cost_by_depth`."""
    ref = author_costs()
    paper = {m: (g.relative_depth.to_numpy(), g.cost_pct.to_numpy() / 100)
             for m, g in ref.groupby("model") if m in ("gpt2-medium", "gpt2-large", "pythia-2.8b")}
    ours = {f"{m} (keep-first)": r["cost"]["keep-first"] for m, r in F["pretrained"].items()}
    ours.update({f"{k} (ours, from scratch)": p["report"]["cost"]["plain"]
                 for k, p in F["pair"].items()})
    return ours, paper


def glue(F: dict, S: dict) -> dict:
    """The numbers the prose quotes, from the results and the author's files."""
    name = _main(F)
    s = summarise(F)
    main = f"{name} / keep-first"
    seq, par = F["pair"]["neox-seq"], F["pair"]["neox-par"]
    plateaus = [controls.plateau(r.get("curve"))
                for p in (seq, par) for r in p.get("by_seed") or [p]]
    ref = author_costs()
    gm = ref[ref.model == "gpt2-medium"].set_index("layer").cost_pct / 100
    return {
        "author_mid": f"{gm.loc[2:15].min():.2%}–{gm.loc[2:15].max():.2%}",
        # over the 23 layers the paper counts (L1–L23, tex line 161), as the claim reads them
        "author_cheap": f"{int((gm.loc[1:] < CHEAP).sum())} of {len(gm.loc[1:])}",
        "author_l0": f"{gm.loc[0]:+,.0%}", "min_ablation": f"{MIN_ABLATION:.0%}",
        "smol_median": f"{s[main]['median cost']:+.1%}", "smol_max": f"{s[main]['max cost']:+.1%}",
        "plain_max": f"{s[f'{name} / plain']['max cost']:+.0%}",
        "pair_ablation": f"{seq['ablation']['cost']:+.0%} / {par['ablation']['cost']:+.0%}",
        "pair_size": f"{S['pair_layers']} layers, d = {S['pair_d_model']}, "
                     f"{S['pair_steps']:,} steps",
        "pair_ppl": f"{seq['ablation']['ppl']:.1f} / {par['ablation']['ppl']:.1f}",
        "pair_plateau": f"{sum(c.passed for c in plateaus)} of {len(plateaus)}",
        "curve_points": str(len(seq.get("curve") or [])),
        "min_middle": f"{MIN_MIDDLE_ABLATION:.0%}",
        "pair_middle": " / ".join(
            f"{min(r['middle_ablation'] for r in p['by_seed']):+.1%}" if p.get("by_seed")
            and all(r.get("middle_ablation") is not None for r in p["by_seed"]) else "not measured"
            for p in (seq, par)),
        "prog_seeds": str(len(F["progressive"]["neox-seq"].get("by_seed") or [1])),
        "pair_median": f"{s['neox-seq / plain']['median cost']:+.2%} / "
                       f"{s['neox-par / plain']['median cost']:+.2%}",
        "prog": "; ".join(f"{k}: linearized {p['linearized'][-1]['val_ppl']:.1f}, control "
                          f"{p['control'][-1]['val_ppl']:.1f}" for k, p in F["progressive"].items())}


def layer_costs(curves: dict):
    """Per-layer linearization cost with 95 % intervals: {label: (costs, [(lo, hi), ...])}."""
    fig, ax = plt.subplots(figsize=(9, 3.8))
    for i, (label, (costs, ci)) in enumerate(curves.items()):
        x = np.arange(len(costs)) + (i - (len(curves) - 1) / 2) * 0.15
        lo = [c - l for c, (l, h) in zip(costs, ci)]
        hi = [h - c for c, (l, h) in zip(costs, ci)]
        ax.errorbar(x, costs, yerr=[lo, hi], fmt="o-", ms=3, lw=1, capsize=2, label=label)
    plots.symlog_percent(ax)
    ax.set_xlabel("layer")
    ax.set_ylabel("perplexity change, layer linear")
    ax.legend()
    fig.tight_layout()
    return fig


def cost_by_depth(ours: dict, paper: dict):
    """Our per-layer costs (solid) and the paper's (dashed) against relative depth."""
    fig, ax = plt.subplots(figsize=(9, 4))
    for label, costs in ours.items():
        x = np.linspace(0, 1, len(costs))
        ax.plot(x, costs, "o-", ms=3, lw=1.5, label=label)
    for label, (x, costs) in paper.items():
        ax.plot(x, costs, "s--", ms=2.5, lw=1, alpha=0.8, label=f"{label} (paper)")
    plots.symlog_percent(ax)
    ax.set_xlabel("relative depth (layer / (L − 1))")
    ax.set_ylabel("perplexity change, layer linear")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def progressive_figure(runs: dict):
    """Validation perplexity after each stage of progressive linearization, and the
    equal-compute control, per model: {model: {"linearized": [...], "control": [...]}}."""
    fig, axes = plt.subplots(1, len(runs), figsize=(4.5 * len(runs), 3.4), squeeze=False)
    for ax, (name, r) in zip(axes[0], runs.items()):
        for key, style in (("linearized", "o-"), ("control", "s--")):
            recs = r[key]
            ax.plot([x["steps"] for x in recs], [x["val_ppl"] for x in recs], style,
                    label=key)
            if key == "linearized":
                for x in recs[1:]:
                    ax.annotate(x["stage"], (x["steps"], x["val_ppl"]), fontsize=7,
                                textcoords="offset points", xytext=(2, 4))
        ax.set_title(name)
        ax.set_xlabel("fine-tuning steps")
        ax.set_ylabel("validation perplexity")
        ax.legend()
    fig.tight_layout()
    return fig


def pair_curves_figure(pair: dict, steps: int):
    """Each pair model's validation loss over its training (every seed), the curve its
    positive control reads (`verdicts.controls.plateau`: the last fifth against the one
    before)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    plots.learning_curves(ax, {kind: [r.get("curve") for r in p.get("by_seed") or [p]]
                               for kind, p in pair.items()}, steps, ("#0072B2", "#D55E00"))
    ax.set_title("the matched pair: learning curves (shaded: the fifths the control compares)")
    fig.tight_layout()
    return fig
