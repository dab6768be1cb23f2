"""The book's style (plots and tables) and its recurring plots."""

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


def _percent_axis(ax, which="y"):
    fmt = mpl.ticker.FuncFormatter(lambda v, _: f"{100 * v:g}%")
    (ax.yaxis if which == "y" else ax.xaxis).set_major_formatter(fmt)


def gate_costs(per_layer: list, title: str = ""):
    """Per layer: the cost of the layer all-linear, gated (g > ½) and randomly routed (as many
    tokens), with 95 % intervals (top), and the share of tokens the gate routes (bottom)."""
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 5), sharex=True,
                                  gridspec_kw={"height_ratios": [2.2, 1]})
    layers = np.array([r["layer"] for r in per_layer])
    for key, label, style, dx in (("all_linear", "all-linear", "s-", -0.15),
                                  ("gate", "gated (d+1 gate, g > ½)", "o-", 0.0),
                                  ("random", "random routing, as many tokens", "x--", 0.15)):
        if key not in per_layer[0]:
            continue
        c = np.array([r[key]["cost"] for r in per_layer])
        lo = np.array([r[key]["ci"][0] for r in per_layer])
        hi = np.array([r[key]["ci"][1] for r in per_layer])
        ax.errorbar(layers + dx, c, yerr=[c - lo, hi - c], fmt=style, ms=3, lw=1, capsize=2,
                    label=label)
    _symlog_percent(ax)
    ax.axhline(0.01, color="grey", ls=":", lw=1)
    ax.set_ylabel("perplexity change")
    ax.legend()
    ax.set_title(title)
    ax2.bar(layers, [r["gate"]["routed"] for r in per_layer], color=COLORS["linear"])
    ax2.axhline(0.25, color="grey", ls=":", lw=1)
    _percent_axis(ax2)
    ax2.set_ylabel("routed linear")
    ax2.set_xlabel("layer")
    fig.tight_layout()
    return fig


def routing_curves(rows: list, max_cost: float = 0.01, title: str = ""):
    """Cost against the share routed linear as the gate's threshold moves, one line per
    layer; the other gate kinds at threshold ½ as markers."""
    fig, ax = plt.subplots(figsize=(7.5, 4))
    markers = {"pca-2": "^", "pca-6": "v", "pca-12": "D", "mlp-16": "P"}
    for i, r in enumerate(rows):
        color = f"C{i}"
        pts = r["curve"]
        ax.plot([p["routed"] for p in pts], [p["cost"] for p in pts], "o-", color=color,
                label=f"layer {r['layer']}")
        for k, v in r["kinds"].items():
            if k in markers:
                ax.plot(v["routed"], v["cost"], markers[k], color=color, ms=7, mfc="none",
                        label=k if i == 0 else None)
    ax.axhline(max_cost, color="grey", ls=":", lw=1)
    _symlog_percent(ax)
    _percent_axis(ax, "x")
    ax.set_xlabel("share of tokens routed to the linear surrogate")
    ax.set_ylabel("perplexity change")
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def auc_parts(per_layer: list, paper=None):
    """Gate AUC per layer for the inputs it reads — the MLP input x (the routing gate), the
    residual stream h, only the token embedding e, only the context c = h − e — with 95 %
    intervals; the paper's points dashed."""
    fig, ax = plt.subplots(figsize=(9, 3.8))
    names = {"linear:x": "routing gate (MLP input x)", "linear:h": "full (residual h)",
             "linear:c": "context c = h − e", "linear:e": "token e"}
    for i, (key, label) in enumerate(names.items()):
        rows = [r for r in per_layer if key in r["auc"]]
        if not rows:
            continue
        layers = np.array([r["layer"] for r in rows])
        a = np.array([r["auc"][key] for r in rows], dtype=float)
        ax.errorbar(layers + (i - 1.5) * 0.12, a[:, 0], yerr=[a[:, 0] - a[:, 1], a[:, 2] - a[:, 0]],
                    fmt="o-", ms=3, lw=1, capsize=2, label=label)
    if paper is not None:
        for name, (x, aucs) in paper.items():
            ax.plot(x, aucs, "s--", ms=4, lw=0.8, alpha=0.7, label=f"{name} (paper)")
    ax.axhline(0.5, color="grey", lw=0.8)
    ax.set_xlabel("layer")
    ax.set_ylabel("AUC on held-out tokens")
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    return fig


def delta_quantiles(rows: list):
    """The quantile function of δ = L_lin − L_full for a few layers: flat near zero for
    most tokens, a thin tail of tokens that need the MLP."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for r in rows:
        q = r["delta_quantiles"]
        ax.plot(100 * np.array(q["q"]), q["delta"], lw=1.8, label=f"layer {r['layer']}")
    ax.set_yscale("symlog", linthresh=0.05)
    ax.axhline(0, color="k", lw=0.6)
    ax.axhspan(-0.05, 0.05, color="grey", alpha=0.15, lw=0)
    ax.set_xlabel("percentile of tokens")
    ax.set_ylabel("δ = loss linear − loss full (nats)")
    ax.legend()
    fig.tight_layout()
    return fig


def compound_curve(runs: dict, paper=None):
    """Compound gating: held-out perplexity change (left) and FLOPs saved (right) against
    the number of layers gated at once, per model; the chosen number marked."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (name, c) in enumerate(runs.items()):
        ks = sorted(int(k) for k in c["held_out"])
        cost = [c["held_out"][str(k)]["cost"] for k in ks]
        ax.plot(ks, cost, "o-", color=f"C{i}", label=name)
        ax2.plot(ks, [c["held_out"][str(k)]["flops_saved"] for k in ks], "o-", color=f"C{i}",
                 label=name)
        if c["k_star"]:
            ax.plot(c["k_star"], c["chosen"]["cost"], "*", ms=14, color=f"C{i}")
    if paper is not None:
        for name, (k, cost, saved) in paper.items():
            ax.plot(k, cost, "s", ms=8, mfc="none", color="k", label=f"{name}, all gates (paper data)")
            ax2.plot(k, saved, "s", ms=8, mfc="none", color="k")
    ax.axhline(0.01, color="grey", ls=":", lw=1)
    _symlog_percent(ax)
    ax.set_xlabel("layers gated at once")
    ax.set_ylabel("perplexity change (held out)")
    ax.legend(fontsize=8)
    _percent_axis(ax2)
    ax2.set_xlabel("layers gated at once")
    ax2.set_ylabel("forward FLOPs saved")
    fig.tight_layout()
    return fig


def two_phase(runs: dict):
    """Validation perplexity: start, after phase 1 (middle layers linear, fine-tuned),
    after phase 2 (gates trained; soft and hard routing), and the equal-compute control."""
    keys = [("start_ppl", "start"), ("phase1_ppl", "phase 1\nlinear + FT"),
            ("phase2_soft_ppl", "phase 2\nsoft gates"), ("phase2_hard_ppl", "phase 2\nhard gates"),
            ("control_ppl", "control\nFT only")]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    w = 0.8 / len(runs)
    for i, (name, r) in enumerate(runs.items()):
        x = np.arange(len(keys)) + (i - (len(runs) - 1) / 2) * w
        ax.bar(x, [r[k] for k, _ in keys], width=w, label=name)
    ax.set_xticks(np.arange(len(keys)), [label for _, label in keys])
    lo = min(r[k] for r in runs.values() for k, _ in keys)
    hi = max(r[k] for r in runs.values() for k, _ in keys)
    ax.set_ylim(lo - 0.3 * (hi - lo) - 1e-9, hi + 0.2 * (hi - lo) + 1e-9)
    ax.set_ylabel("validation perplexity")
    ax.legend()
    fig.tight_layout()
    return fig


def probe_changes(studies: dict, paper: dict, min_correct: int = 20):
    """Relative change against the frozen base of held-out perplexity (left) and last-word
    accuracy (right), per model and variant, with 95 % intervals; the paper's figures dashed.
    Accuracy is drawn only for models whose base gets at least `min_correct` items right."""
    keys = [("ppl_change", "ppl_ci", "perplexity change", "ppl"),
            ("acc_change", "acc_ci", "last-word accuracy change", "acc")]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.6))
    variants = [v for v in next(iter(studies.values())) if v != "base"]
    w = 0.8 / len(studies)
    for ax, (k, ci, label, pk) in zip(axes, keys):
        for i, (name, st) in enumerate(studies.items()):
            if pk == "acc" and st["base"]["correct"] < min_correct:
                ax.bar([], [], label=f"{name}: too few correct items")
                continue
            x = np.arange(len(variants)) + (i - (len(studies) - 1) / 2) * w
            r = [st[v]["vs_base"] for v in variants]
            y = np.array([q[k] for q in r], dtype=float)
            lo = np.array([q[ci][0] for q in r], dtype=float)
            hi = np.array([q[ci][1] for q in r], dtype=float)
            ax.bar(x, y, width=w, label=name)
            ax.errorbar(x, y, yerr=[np.nan_to_num(y - lo), np.nan_to_num(hi - y)], fmt="none",
                        color="k", lw=1, capsize=2)
        ax.axhline(paper[pk], color="k", ls="--", lw=1)
        ax.annotate("paper (Pythia-160M)", (len(variants) - 0.5, paper[pk]), ha="right",
                    va="bottom" if pk == "acc" else "top", fontsize=8)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xticks(np.arange(len(variants)), variants)
        ax.set_title(label)
        _percent_axis(ax)
    for ax in axes:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def skip_by_depth(curves: dict):
    """Skip use per layer — mean norm of the skip's output over the attention output's —
    against relative depth, one line per model and variant; right: the learned gate σ(a)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    for name, rows in curves.items():
        n = len(rows)
        depth = [(r["layer"] + 0.5) / n for r in rows]
        ax1.plot(depth, [r["ratio"] for r in rows], marker="o", ms=3, label=name)
        ax2.plot(depth, [r["gate"] for r in rows], marker="o", ms=3, label=name)
    ax1.set_xlabel("relative depth")
    ax1.set_ylabel("‖skip‖ / ‖attention‖")
    ax2.set_xlabel("relative depth")
    ax2.set_ylabel("gate σ(a)")
    ax2.axhline(0.5, color="k", lw=0.6)
    ax1.legend(fontsize=8)
    fig.tight_layout()
    return fig


def probe_training(curves: dict):
    """Training loss of each variant (running mean over a twentieth of the run, at least 5
    steps), one panel per model."""
    fig, axes = plt.subplots(1, len(curves), figsize=(4.8 * len(curves), 3.3), squeeze=False)
    for ax, (name, runs) in zip(axes[0], curves.items()):
        for v, losses in runs.items():
            y = np.asarray(losses, dtype=float)
            smooth = max(5, len(y) // 20)
            if len(y) >= smooth:
                y = np.convolve(y, np.ones(smooth) / smooth, mode="valid")
            ax.plot(np.arange(len(y)) + 1, y, label=v, lw=1.4)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig


#: One colour per verdict, the same on the ledger page and in the chapters.
VERDICT_COLORS = {"reproduced": "#2e8b57", "partly": "#9acd32", "inconclusive": "#c8c8c8",
                  "not reproduced": "#c0392b", "not run": "#f0f0f0"}


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


def skip_ablation(studies: dict):
    """Per layer (relative depth): the perplexity change when that layer's skip alone is off,
    with its interval, one line per model (the pre+skip variant)."""
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for m, st in studies.items():
        abl = st["pre+skip"]["skip_ablation"]
        c = np.array([u["ppl_change"] for u in abl])
        ci = np.array([u["ci"] for u in abl])
        ax.errorbar([u["layer"] / max(1, len(abl) - 1) for u in abl], c,
                    yerr=[c - ci[:, 0], ci[:, 1] - c], fmt="o-", ms=3, capsize=2, label=m)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("relative depth")
    ax.set_ylabel("PPL change, this layer's skip off")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def construction_widths(width_per_d: dict, max_L: int = 8):
    """The construction's width m/d against depth, per number of heads, beside H·L (the
    theorem's O(HLd)) and H^(L/2) (the matching lower bound's growth)."""
    Ls = list(range(1, max_L + 1))
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for i, (H, w) in enumerate(width_per_d.items()):
        H = int(H)
        ax.semilogy(Ls, w, "o-", color=f"C{i}", label=f"ours, H = {H}")
        ax.semilogy(Ls, [H * L for L in Ls], ":", color=f"C{i}", label="H·L (paper: O(HLd))")
        if H >= 2:
            ax.semilogy(Ls, [H ** (L / 2) for L in Ls], "--", color=f"C{i}", lw=0.8,
                        label="H^(L/2) (lower bound, matching)")
    ax.set_xlabel("depth L")
    ax.set_ylabel("UT width m / d")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    return fig


def random_universality(runs: dict):
    """Held-out relative error of a Gaussian UT's searched program against its width (mean over
    seeds), the context-free predictor's error, and the degenerate UT's."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (name, pts) in enumerate(runs.items()):
        ok = pd.DataFrame([p for p in pts if not p["degenerate"]]).groupby("m").mean(
            numeric_only=True)
        ax.loglog(ok.index, ok["rel_error"], "o-", color=f"C{i}", label=f"{name} (mean over seeds)")
        ax.axhline(ok["rel_error_token_position"].mean(), color=f"C{i}", ls=":", lw=1,
                   label=f"{name}, context-free predictor")
        bad = [p for p in pts if p["degenerate"]]
        ax.plot([p["m"] for p in bad], [p["rel_error"] for p in bad], "x", ms=10, color=f"C{i}",
                label=f"{name}, degenerate UT")
    ax.set_xlabel("width m of the Gaussian UT")
    ax.set_ylabel("held-out relative error")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig

