"""Chapter 04's page: its tables, figures and the numbers glued into its prose."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from nlbudget import plots
from nlbudget.chapters.ch04_adaptive_gating.claims import _main, middle_rows, reference
from nlbudget.chapters.ch04_adaptive_gating.authors import COLLINEAR, TOKEN_GAP


def scale(S: dict) -> dict:
    """The paper's scale beside this build's, for `pages.scale_box`."""
    W = S["window"]
    return {
        "models": ("GPT-2 Medium/Large, Pythia-410M/1B", f"{S['models']} (de-quantized Q4_1, "
                   f"{S['dtype']}); the matched pair"),
        "gate training": ("20,000 tokens", f"{S['gate_windows'] * W:,} tokens"),
        "held-out selection": ("—", f"{S['select_windows'] * W:,} tokens"),
        "evaluation": ("50,000 tokens", f"{S['eval_windows'] * W:,} tokens"),
        "no-fly lists": ("WikiText-103 → LAMBADA", f"{S['nofly_windows'] * W:,} tokens per set, "
                         f"{S['corpus']} → {S['cross_corpus']}"),
        "two-phase": ("2,000 + 3,000 steps, GPT-2 Medium",
                      f"{S['phase1_steps']} + {S['phase2_steps']} steps, the pair, 1 seed")}


def layer_table(rep: dict):
    """One row per layer: all-linear, gated and random-routing costs, share routed, AUC."""
    return pd.DataFrame([{
        "layer": r["layer"], "label rule": r["labels"]["rule"],
        "all-linear": r["all_linear"]["cost"], "gated": r["gate"]["cost"],
        "gated 95% CI": f"{r['gate']['ci'][0]:+.2%} … {r['gate']['ci'][1]:+.2%}",
        "routed": r["gate"]["routed"], "random routing": r["random"]["cost"],
        "AUC (x), held out": r["auc"]["linear:x"][0], "AUC (x), training": r.get("auc_train"),
        "|δ|<0.05": r["delta"]["share_abs_below_0.05"]}
        for r in rep["per_layer"]]).set_index("layer").style.format(
        {"all-linear": "{:+.2%}", "gated": "{:+.2%}", "random routing": "{:+.2%}",
         "routed": "{:.0%}", "AUC (x), held out": "{:.3f}", "AUC (x), training": "{:.3f}",
         "|δ|<0.05": "{:.0%}"})


def kinds_table(reports: dict):
    """Every gate kind at the curve layers: its AUC gain over the d+1 gate and its cost."""
    return pd.DataFrame([
        {"model": m, "layer": r["layer"], "gate": k, "parameters": r["gate_params"].get(k),
         "AUC gain over d+1": r["auc_diff_family"][f"{k}−linear:x"][0],
         "cost": r["kinds"][k]["cost"], "d+1 cost": r["gate"]["cost"]}
        for m, rep in reports.items() for r in rep["per_layer"] if "kinds" in r
        for k in r["kinds"] if k != "linear"]).set_index(["model", "layer", "gate"]).style.format(
        {"AUC gain over d+1": "{:+.3f}", "cost": "{:+.2%}", "d+1 cost": "{:+.2%}"})


def paper_auc_parts(n_layers: int) -> dict:
    """The paper's GPT-2 Medium token/context AUCs, its layers rescaled to `n_layers`."""
    ctx = reference("context_vs_token").query("model == 'gpt2-medium'")
    x = ctx.layer * (n_layers - 1) / 23
    return {"full": (x, ctx.full), "token only": (x, ctx.token_only),
            "context only": (x, ctx.context_only)}


def nofly_table(nofly: dict) -> pd.DataFrame:
    return pd.DataFrame([{"model": m, "keyed by": key[3:], "tested on": test, **t}
                         for m, nfm in nofly.items() for key in ("by_target", "by_input")
                         for test, t in nfm[key].items()]
                        ).set_index(["model", "keyed by", "tested on"])


def paper_compound() -> dict:
    """The author's GPT-2 Medium compound result: {label: (layers, PPL change, FLOPs saved)}."""
    pc = reference("compound").set_index("model").loc["gpt2-medium"]
    return {"GPT-2 Medium": (int(pc.gated_layers), pc.gated_pct / 100,
                             pc.flops_saved_total_pct / 100)}


def wallclock_text(rows, config: str) -> str:
    """A configuration's wall-clock saving with its interval over paired rounds, against the
    FLOP-predicted one — or that the prediction is inside the timing noise."""
    r = next(r for r in rows if r["config"] == config)
    lo, hi = r["realized_ci"]
    text = f"{r['realized']:+.1%} [{lo:+.1%}, {hi:+.1%}] of {r['predicted']:.1%} predicted"
    return text + (f" (inside the ±{r['noise']:.1%} noise)" if r["inside_noise"] else "")


def compound_table(runs: dict) -> pd.DataFrame:
    return pd.DataFrame({m: {
        "all gates: PPL change": f"{c['all']['cost']:+.1%}",
        "all gates: mean routed": f"{np.mean(c['all']['routed']):.0%}",
        "all gates: FLOPs saved": f"{c['all']['flops_saved']:.1%}",
        "all gates: wall-clock saved": wallclock_text(c["wallclock"], "all"),
        "greedy: layers": c["k_star"],
        "greedy: PPL change (held out)": f"{c['chosen']['cost']:+.2%}",
        "greedy: FLOPs saved": f"{c['chosen']['flops_saved']:.1%}"} for m, c in runs.items()})


def two_phase_table(tp: dict) -> pd.DataFrame:
    return pd.DataFrame(tp).T[["layers", "start_ppl", "phase1_ppl", "phase2_soft_ppl",
                               "phase2_hard_ppl", "control_ppl", "mean_gate"]]


def glue(F: dict, S: dict) -> dict:
    """The numbers the prose quotes, from the results and the author's files."""
    R = F["pretrained"][_main(F)]
    rows = R["per_layer"]
    routed = [r["gate"]["routed"] for r in rows]
    pc = reference("compound").set_index("model").loc["gpt2-medium"]
    ct = reference("context_vs_token")
    close = ct[(ct.cos_token_context.abs() < COLLINEAR) & (ct.full - ct.token_only <= TOKEN_GAP)]
    return {
        "author_token_close": "; ".join(f"{r.model} L{r.layer} (token {r.token_only:.3f}, full "
                                        f"{r.full:.3f})" for r in close.itertuples()) or "none",
        "author_compound": f"{pc.gated_pct:+.0f} %",
        "author_flops": f"{pc.flops_saved_total_pct:.0f} %",
        "routed_range": f"{min(routed):.0%}–{max(routed):.0%}",
        "gated_median": f"{np.median([r['gate']['cost'] for r in rows]):+.2%}",
        "random_median": f"{np.median([r['random']['cost'] for r in rows]):+.2%}",
        "all_linear_median": f"{np.median([r['all_linear']['cost'] for r in rows]):+.2%}",
        "auc_median": f"{np.median([r['auc']['linear:x'][0] for r in rows]):.3f}",
        "near_median": f"{np.median([r['delta']['share_abs_below_0.05'] for r in rows]):.0%}",
        "compound_all": f"{R['compound']['all']['cost']:+.0%}",
        "compound_k": str(R["compound"]["k_star"]),
        "negative_median": f"{np.median([r['delta']['share_negative'] for r in rows]):.0%}",
        "paper_steps": "2,000 + 3,000",
        "step_ratio": f"{5000 / (S['phase1_steps'] + S['phase2_steps']):,.0f}",
        "wall_all": wallclock_text(R["compound"]["wallclock"], "all"),
        "pair_mid_linear": "; ".join(f"{k} {_middle_linear(p)}" for k, p in F["pair"].items()),
        "two_phase": "; ".join(
            f"{k}: gated {v['phase2_soft_ppl']:.1f} vs control {v['control_ppl']:.1f}, "
            f"mean gate {np.mean(list(v['mean_gate'].values())):.2f}"
            for k, v in F["two_phase"].items())}


def _middle_linear(p: dict) -> str:
    """The costliest middle-third layer of a pair model all-linear, with its interval (what
    the two-phase run linearizes, and its positive control reads)."""
    mid = [r["all_linear"] for r in middle_rows(p)]
    if not mid:
        return "no middle layer"
    r = max(mid, key=lambda a: a["cost"])
    return f"{r['cost']:+.2%} [{r['ci'][0]:+.2%}, {r['ci'][1]:+.2%}]"


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
    plots.symlog_percent(ax)
    ax.axhline(0.01, color="grey", ls=":", lw=1)
    ax.set_ylabel("perplexity change")
    ax.legend()
    ax.set_title(title)
    ax2.bar(layers, [r["gate"]["routed"] for r in per_layer], color=plots.COLORS["linear"])
    ax2.axhline(0.25, color="grey", ls=":", lw=1)
    plots.percent_axis(ax2)
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
    plots.symlog_percent(ax)
    plots.percent_axis(ax, "x")
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
    plots.symlog_percent(ax)
    ax.set_xlabel("layers gated at once")
    ax.set_ylabel("perplexity change (held out)")
    ax.legend(fontsize=8)
    plots.percent_axis(ax2)
    ax2.set_xlabel("layers gated at once")
    ax2.set_ylabel("forward FLOPs saved")
    fig.tight_layout()
    return fig


def two_phase_figure(runs: dict):
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
