"""Shared matplotlib style and the book's recurring plots."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

#: One colour per activation / model, the same on every page.
COLORS = {"relu": "#1b6ca8", "gelu": "#d1495b", "silu": "#edae49", "linear": "#66a182",
          "symmetric": "#444444"}


def use_style() -> None:
    """The book's plot style: readable at page width, light grid, no top/right spines."""
    mpl.rcParams.update({
        "figure.figsize": (7.0, 3.6), "figure.dpi": 110, "savefig.dpi": 150,
        "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
        "axes.spines.right": False, "font.size": 10, "axes.titlesize": 11,
        "legend.frameon": False, "svg.hashsalt": "nlbudget",
    })


def symmetry_breaking(alphas, inverse_errors: dict, exchange_errors: dict):
    """Left: relative output change of the gated form under q → αq, k → k/α, per activation
    (and the symmetric form); right: the same under exchange q ↔ k."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6), gridspec_kw={"width_ratios": [2.2, 1]})
    alphas = np.asarray(alphas, dtype=float)
    neg = alphas < 0  # draw α < 0 and α > 0 as separate pieces: α = 0 is not a scaling
    for name, errs in inverse_errors.items():
        errs = np.asarray(errs, dtype=float)
        style = dict(color=COLORS.get(name), lw=1.8, ls="--" if name == "symmetric" else "-")
        ax1.plot(alphas[neg], errs[neg], label=name, **style)
        ax1.plot(alphas[~neg], errs[~neg], **style)
    ax1.set_xscale("symlog", linthresh=0.25)
    ax1.axvline(0, color="k", lw=0.5)
    ax1.set_xlabel("scale α  (q → αq, k → k/α)")
    ax1.set_ylabel("relative output change")
    ax1.set_title("inverse scaling")
    ax1.legend(ncol=2)
    names = list(exchange_errors)
    ax2.bar(names, [exchange_errors[n] for n in names],
            color=[COLORS.get(n, "grey") for n in names])
    ax2.set_title("exchange q ↔ k")
    ax2.set_ylabel("relative output change")
    ax2.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return fig


def _symlog_percent(ax):
    ax.set_yscale("symlog", linthresh=0.01)
    ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{100 * v:+g}%"))
    ax.axhline(0, color="k", lw=0.6)


def layer_costs(curves: dict):
    """Per-layer linearization cost with 95 % intervals: {label: (costs, [(lo, hi), ...])}."""
    fig, ax = plt.subplots(figsize=(9, 3.8))
    for i, (label, (costs, ci)) in enumerate(curves.items()):
        x = np.arange(len(costs)) + (i - (len(curves) - 1) / 2) * 0.15
        lo = [c - l for c, (l, h) in zip(costs, ci)]
        hi = [h - c for c, (l, h) in zip(costs, ci)]
        ax.errorbar(x, costs, yerr=[lo, hi], fmt="o-", ms=3, lw=1, capsize=2, label=label)
    _symlog_percent(ax)
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
    _symlog_percent(ax)
    ax.set_xlabel("relative depth (layer / (L − 1))")
    ax.set_ylabel("perplexity change, layer linear")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def progressive(runs: dict):
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


def symmetry_experiments(lm: dict, modular: dict, gates: list, cost=None):
    """Part I's experiment: validation PPL per form and seed; modular-addition accuracy;
    SmolLM2's gate asymmetry by layer (and Part II.a's linearization cost, if given)."""
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
