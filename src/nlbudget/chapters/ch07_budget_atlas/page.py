"""Chapter 07's page: its tables, figures and the numbers glued into its prose."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nlbudget.chapters.ch07_budget_atlas.claims import layer_ranks, models_of
from nlbudget.chapters.ch07_budget_atlas.study import LENSES, REFERENCES, _select_cost


def _stacked(F: dict, table) -> pd.DataFrame:
    """One model's table (`table(M)`, a DataFrame) for each model of the atlas, stacked under
    the model's name."""
    return pd.concat({M["model"]: table(M) for M in models_of(F)}, names=["model"])


def _select_upper(B: dict, c: dict) -> float:
    """The upper bound of the combined cost's interval on the select windows (the choice's
    rule), for the model a check measured."""
    if not c["moves"]:
        return 0.0
    ci = B["choice"]["path"][c["moves"] - 1].get("ci")
    return ci[1] if ci else float("nan")


def rf_table(F: dict) -> pd.DataFrame:
    """Per layer: R² of both fits on the fit tokens (of the first draw), the linear surrogate's
    and random features' held-out costs, and the share of the linear cost recovered."""
    t = pd.DataFrame(F["measured"]["per_layer"]).set_index("layer")
    t = t[["r2_linear", "r2_rf", "linear", "rf", "recovered"]].rename(columns={
        "r2_linear": "R² (linear fit)", "r2_rf": "R² (random-feature fit)",
        "linear": "linear surrogate", "rf": "random features", "recovered": "share recovered"})
    return t.style.format({"R² (linear fit)": "{:.3f}", "R² (random-feature fit)": "{:.3f}",
                           "linear surrogate": "{:+.2%}",
                           "random features": "{:+.2%}", "share recovered": "{:+.0%}"},
                          na_rep="—")


def atlas_table(F: dict) -> pd.DataFrame:
    """Layers × lenses of every model, the numbers behind the atlas."""
    def one(M):
        cols = {k: v["values"] for k, v in M["lenses"].items() if v["values"] is not None}
        return pd.DataFrame(cols).rename_axis("layer")
    return _stacked(F, one)


def atlas_figure(F: dict):
    """The atlas at a glance, one panel per model: each lens (row) ranked across the model's
    layers on its own scale (0: the lowest layer, 1: the highest), a colour-blind-safe
    sequential map; grey: not measured."""
    import matplotlib.pyplot as plt

    names = [k for k, *_ in LENSES]
    Ms = models_of(F)
    fig, axes = plt.subplots(len(Ms), 1, figsize=(10, 2.8 * len(Ms)), squeeze=False)
    cmap = plt.get_cmap("cividis").copy()
    cmap.set_bad("0.85")
    for ax, M in zip(axes[:, 0], Ms):
        L = len(M["measured"]["per_layer"])
        grid = np.full((len(names), L), np.nan)
        for i, k in enumerate(names):
            if M["lenses"][k]["values"] is not None:
                grid[i] = layer_ranks(M["lenses"][k]["values"])
        im = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap=cmap, vmin=0, vmax=1)
        ax.set_yticks(range(len(names)), [f"{k} (ch. {c})" for k, c, _ in LENSES])
        ax.set_xticks(range(0, L, max(1, L // 15)))
        ax.set_xlabel("layer")
        fig.colorbar(im, ax=ax, label="rank across layers (0 low, 1 high)", fraction=0.025)
        ax.set_title(f"{M['model']}: each layer under each lens")
    fig.tight_layout()
    return fig


def budget_table(F: dict) -> pd.DataFrame:
    """Per model and budget: the layers the choice moved, the FLOPs removed, and the combined
    model's cost on the select windows (where it was chosen) and on the held-out check
    windows."""
    t = _stacked(F, lambda M: _budget_rows(M["budget"]))
    return t.style.format({
        "MLP FLOPs removed": "{:.1%}", "forward FLOPs removed": "{:.1%}",
        "cost (select)": "{:+.2%}", "upper bound (select)": "{:+.2%}"}, na_rep="—")


def _budget_rows(B: dict) -> pd.DataFrame:
    rows = []
    for b, c in B["checks"].items():
        rows.append({"budget": f"{float(b):.0%}", "layers linear": c["n_linear"],
                     "layers gated": c["n_gated"], "MLP FLOPs removed": c["mlp_flops_removed"],
                     "forward FLOPs removed": c["flops_saved"],
                     "cost (select)": _select_cost(B, c),
                     "upper bound (select)": _select_upper(B, c),
                     "perplexity (held out)": f"{c['baseline_ppl']:.2f} → {c['ppl']:.2f}",
                     "cost (held out)": f"{c['cost']:+.2%} [{c['ci'][0]:+.2%}, "
                                        f"{c['ci'][1]:+.2%}]"})
    return pd.DataFrame(rows).set_index("budget")


def budget_figure(F: dict):
    """Perplexity cost against the share of MLP FLOPs kept along the greedy path, one panel per
    model: the combined model as measured (select windows), the sum of the layers' costs alone,
    the budgets, and each budget's model on the held-out windows (interval over windows)."""
    import matplotlib.pyplot as plt

    Ms = models_of(F)
    fig, axes = plt.subplots(1, len(Ms), figsize=(7 * len(Ms), 3.6), squeeze=False)
    for ax, M in zip(axes[0], Ms):
        _budget_panel(ax, M)
    fig.tight_layout()
    return fig


def _budget_panel(ax, M: dict) -> None:
    import matplotlib.pyplot as plt

    B = M["budget"]
    path = B["choice"]["path"]
    kept = [1.0] + [s["mlp_kept"] for s in path]
    ax.plot(kept, [0.0] + [s["cost"] for s in path], "o-", ms=3, color="#0072B2",
            label="combined model (select windows)")
    if all(s.get("ci") for s in path):  # the interval whose upper bound the choice reads
        ax.fill_between(kept, [0.0] + [s["ci"][0] for s in path],
                        [0.0] + [s["ci"][1] for s in path], color="#0072B2", alpha=0.15,
                        lw=0, label="its 95 % interval over select windows")
    ax.plot(kept, [0.0] + [s["predicted"] for s in path], "--", color="#999999",
            label="sum of the layers' costs alone")
    for b, c in B["checks"].items():
        ax.axhline(float(b), color="#D55E00", lw=0.8, ls=":")
        ax.errorbar([1 - c["mlp_flops_removed"]], [c["cost"]],
                    yerr=[[c["cost"] - c["ci"][0]], [c["ci"][1] - c["cost"]]], fmt="s",
                    color="#D55E00", capsize=3,
                    label="held out, per budget" if b == next(iter(B["checks"])) else None)
    ax.invert_xaxis()
    ax.set_xlabel("share of MLP FLOPs kept")
    ax.set_ylabel("perplexity cost")
    ax.yaxis.set_major_formatter(plt.matplotlib.ticker.PercentFormatter(1.0))
    ax.xaxis.set_major_formatter(plt.matplotlib.ticker.PercentFormatter(1.0))
    ax.set_title(f"{M['model']}: the budget's path (dotted: the budgets)")
    ax.legend(fontsize=8)


def speed_table(F: dict) -> pd.DataFrame:
    """Each budget's model against the original, timed side by side over paired rounds:
    tokens per second, the realized saving with its interval, the FLOP-predicted one and
    their ratio with its interval — or, where the prediction is no larger than the original
    timed against itself, "inside the noise" (±, the noise). Every model of the atlas."""
    t = pd.concat([pd.DataFrame(M["budget"]["wallclock"]).assign(model=M["model"])
                   for M in models_of(F)], ignore_index=True)
    if t.empty:
        return t
    t["configuration"] = [c if c in REFERENCES else f"budget {float(c):.0%}" for c in t["config"]]

    def interval(r, key, fmt):
        if key == "ratio" and r["inside_noise"]:
            return f"inside the ±{r['noise']:.1%} noise"
        lo, hi = r[f"{key}_ci"]
        return f"{r[key]:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"

    t["realized saving"] = [interval(r, "realized", "+.1%") for r in t.to_dict("records")]
    t["realized / predicted"] = [interval(r, "ratio", ".2f") for r in t.to_dict("records")]
    t = t.set_index(["model", "configuration", "batch"])[[
        "full_tps", "budget_tps", "realized saving", "predicted", "realized / predicted"]]
    return t.rename(columns={"full_tps": "original (tokens/s)", "budget_tps": "budget (tokens/s)",
                             "predicted": "predicted saving"}).style.format({
        "original (tokens/s)": "{:,.0f}", "budget (tokens/s)": "{:,.0f}",
        "predicted saving": "{:.1%}"}, na_rep="—")


def glue(F: dict) -> dict:
    """The first model's numbers (the prose's), and a sentence on each further model."""
    first, *more = models_of(F)
    return {**_model_glue(first), "more_models": " ".join(_more_sentence(M) for M in more)
            or "At this profile the atlas holds this model alone (`full` adds Gemma-3-270M)."}


def _more_sentence(M: dict) -> str:
    rows = M["measured"]["per_layer"]
    rec = [r["recovered"] for r in rows if r["recovered"] is not None]
    out = (f"{M['model']} ({len(rows)} layers): median linear cost "
           f"{np.median([r['linear'] for r in rows]):+.2%}, random features "
           f"{np.median([r['rf'] for r in rows]):+.2%} (a median {np.median(rec):+.0%} of the "
           f"linear cost recovered; held-out R² {np.median([r['r2_rf_held_out'] for r in rows]):.3f}"
           f" against {np.median([r['r2_rf'] for r in rows]):.3f} on its fit tokens)")
    for b, c in M["budget"]["checks"].items():
        out += (f"; under {float(b):.0%} {c['n_gated']} gated and {c['n_linear']} linear, "
                f"{c['mlp_flops_removed']:.1%} of the MLP FLOPs removed, held out "
                f"{c['baseline_ppl']:.2f} → {c['ppl']:.2f} ({c['cost']:+.2%} "
                f"[{c['ci'][0]:+.2%}, {c['ci'][1]:+.2%}])")
    return out + "."


def _model_glue(F: dict) -> dict:
    rows = F["measured"]["per_layer"]
    rec = [r["recovered"] for r in rows if r["recovered"] is not None]
    return {"rf_width": f"{F['measured']['width']:,}",
            "rf_median_recovered": f"{np.median(rec):+.0%}",
            "lin_median": f"{np.median([r['linear'] for r in rows]):+.2%}",
            "rf_median": f"{np.median([r['rf'] for r in rows]):+.2%}",
            "r2_gain_median": f"{np.median([r['r2_rf'] - r['r2_linear'] for r in rows]):+.3f}",
            "r2_lin_median": f"{np.median([r['r2_linear'] for r in rows]):.3f}",
            "n_layers": str(len(rows)),
            "r2_held_median": f"{np.median([r['r2_rf_held_out'] for r in rows]):.3f}",
            "r2_gap_median": f"{np.median([r['r2_rf'] - r['r2_rf_held_out'] for r in rows]):+.3f}",
            "cv_folds": str(F["measured"].get("cv", {}).get("folds", "—")),
            **_budget_glue(F["budget"])}


def _budget_glue(B: dict) -> dict:
    out = {}
    for b, c in B["checks"].items():
        p = f"b{round(100 * float(b))}"
        out.update({f"{p}_mlp_removed": f"{c['mlp_flops_removed']:.1%}",
                    f"{p}_flops_saved": f"{c['flops_saved']:.1%}",
                    f"{p}_n_linear": str(c["n_linear"]), f"{p}_n_gated": str(c["n_gated"]),
                    f"{p}_ppl": f"{c['baseline_ppl']:.2f} → {c['ppl']:.2f}",
                    f"{p}_cost": f"{c['cost']:+.2%} [{c['ci'][0]:+.2%}, {c['ci'][1]:+.2%}]",
                    f"{p}_select": f"{_select_cost(B, c):+.2%}",
                    f"{p}_moves": str(c["moves"]),
                    f"{p}_moves_point": str(B["choice"].get("chosen_point", {}).get(b, "—"))})
    for name in ("budgets",) + REFERENCES:
        rows = [r for r in B["wallclock"]
                if r["config"] == name or name == "budgets" and r["config"] not in REFERENCES]
        ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
        out[f"ratio_{name.split()[-1]}"] = (
            f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios
            else "inside the timing noise" if rows else "not measured")
    out["budget_moves"] = str(B["choice"]["moves"])
    path = B["choice"]["path"]
    out["budget_measured"] = str(len(path))
    out["compound_share"] = f"{sum(s['cost'] > s['predicted'] for s in path)} of {len(path)}"
    out["check_tokens"] = f"{B['windows']['check']['tokens']:,}"
    out["select_tokens"] = f"{B['windows']['select']['tokens']:,}"
    return out
