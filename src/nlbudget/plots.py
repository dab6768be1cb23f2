"""The book's style, shared by every page: plots readable at page width and tables with
whole cells (`use_style`), one colour per activation and per verdict, percent axes; and the
ledger's own figure. Each chapter's figures live in its `page` module."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

#: One colour per activation / model, the same on every page.
COLORS = {"relu": "#1b6ca8", "gelu": "#d1495b", "silu": "#edae49", "linear": "#66a182",
          "symmetric": "#444444"}


def use_style(precision: int = 3) -> None:
    """The book's style: plots readable at page width, light grid, no top/right spines; tables
    with whole cells and `precision` digits."""
    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.precision", precision)
    mpl.rcParams.update({
        "figure.figsize": (7.0, 3.6), "figure.dpi": 110, "savefig.dpi": 150,
        "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
        "axes.spines.right": False, "font.size": 10, "axes.titlesize": 11,
        "legend.frameon": False, "svg.hashsalt": "nlbudget",
    })


def symlog_percent(ax):
    ax.set_yscale("symlog", linthresh=0.01)
    ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{100 * v:+g}%"))
    ax.axhline(0, color="k", lw=0.6)


def percent_axis(ax, which="y"):
    fmt = mpl.ticker.FuncFormatter(lambda v, _: f"{100 * v:g}%")
    (ax.yaxis if which == "y" else ax.xaxis).set_major_formatter(fmt)


def learning_curves(ax, groups: dict, steps: int, colors=None) -> None:
    """Validation-loss curves (`training.train`'s `val_curve`: evenly spaced over `steps`), one
    colour per group and one line per seed, with the two last fifths shaded: what the plateau
    control (`verdicts.controls.plateau`) compares."""
    palette = colors or plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (label, curves), colour in zip(groups.items(), palette):
        for i, c in enumerate(c for c in curves if c):
            x = [steps * (k + 1) / len(c) for k in range(len(c))]
            ax.plot(x, c, "o-", ms=2, lw=1, color=colour, alpha=0.8,
                    label=label if i == 0 else None)
    ax.axvspan(0.6 * steps, 0.8 * steps, color="0.9", lw=0)
    ax.axvspan(0.8 * steps, steps, color="0.8", lw=0)
    ax.set_xlabel("training step")
    ax.set_ylabel("validation loss (nats)")
    ax.legend(fontsize=8)


#: One colour per verdict, the same on the ledger page and in the chapters.
VERDICT_COLORS = {"reproduced": "#2e8b57", "transfers": "#66c2a4", "partly": "#9acd32",
                  "partly transfers": "#c5e384",
                  "inconclusive": "#c8c8c8", "not reproduced": "#c0392b",
                  "does not transfer": "#e6957f", "not run": "#f0f0f0"}


def ledger_overview(rows: list[dict], parts: dict, kinds=("paper", "derivation", "book")):
    """The ledger at a glance: one bar per (part, kind), split by verdict."""
    cats = [(p, k) for p in parts for k in kinds
            if any(r["part"] == p and r["kind"] == k for r in rows)]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(cats) + 1.2))
    y = np.arange(len(cats))[::-1]
    left = np.zeros(len(cats))
    for v, color in VERDICT_COLORS.items():
        n = np.array([sum(r["part"] == p and r["kind"] == k and r["verdict"] == v for r in rows)
                      for p, k in cats], dtype=float)
        ax.barh(y, n, left=left, color=color, edgecolor="#888888", lw=0.5, label=v)
        for yi, li, ni in zip(y, left, n):
            if ni:
                ax.text(li + ni / 2, yi, f"{int(ni)}", ha="center", va="center", fontsize=8)
        left += n
    ax.set_yticks(y, [f"Part {p} · {k}" for p, k in cats])
    ax.set_xlabel("claims")
    ax.grid(axis="y", visible=False)
    ax.legend(ncol=5, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    return fig
