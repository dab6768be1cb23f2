"""Chapter 07 (Part V): the nonlinearity budget of one model — every layer of SmolLM2-135M
under the four papers' lenses.

Read from the chapters' results at the same profile: the P3 lenses (chapter 03's windows:
linear-surrogate cost and R², measured again here through the shared memo; chapter 04's gate
against random routing of as many tokens), P1's (chapter 02: the trained gate↔up exchange
asymmetry against a random gated MLP's) and P4's (chapter 06: the cost of switching off the
trained content skip). Measured here, P2's lens (`nlbudget.random_features`): the MLP replaced
by a frozen random nonlinearity of its own width with only the read-out fitted, against the
linear surrogate on the same tokens.

Then the budget (`nlbudget.budget`): per layer full MLP, gated (P3's d+1 router) or linear,
chosen greedily on select windows to remove as many MLP FLOPs as a perplexity cost of 1 % or
5 % allows, measured as a combined model, checked on held-out windows and timed against the
original model.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy import stats as sps

from nlbudget import budget, gating, random_features, surrogates, timing
from nlbudget.assets import corpora
from nlbudget.capture import MLPCapture, mlps
from nlbudget.chapters import ch03_linear_surrogates as ch03
from nlbudget.evaluation import batches, bootstrap_cost, eval_nll, perplexity
from nlbudget.verdicts import results, stats
from nlbudget.verdicts.claims import (INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED, Claim,
                                      Decision, decided, share_of)

KEY, STEM = "07", "07_budget_atlas"
#: Chapters whose results this one reads (its lenses): the build runs them first.
READS = ("02", "03", "04", "06")
#: The split chapter 03 measures on (same model, corpus, windows), so the memo shares its
#: ridge fits and per-token losses.
SPLIT = ("models", "corpus", "dtype", "window", "fit_windows", "eval_windows", "batch_size")


def _split(profile: str) -> dict:
    return {k: ch03.SETTINGS[profile][k] for k in SPLIT}


# rf_width: the random nonlinearity's width (0: the MLP's own hidden width, as P2's lens asks;
# smoke uses a narrow one); rf_seeds: draws of it (their per-token losses averaged);
# select_windows: where the budget's single-layer costs and its path are measured;
# check_windows: held out, where the chosen models are measured (and timed, with the select
# windows: batch 8 needs 8 windows); speed_repeats: timed forward passes (median)
SETTINGS = {
    "smoke": dict(**_split("smoke"), rf_width=64, rf_seeds=1, n_perm=200, n_boot=100,
                  select_windows=2, check_windows=2, speed_repeats=1),
    "ci": dict(**_split("ci"), rf_width=0, rf_seeds=1, n_perm=10000, n_boot=1000,
               select_windows=4, check_windows=4, speed_repeats=5),
    "full": dict(**_split("full"), rf_width=0, rf_seeds=3, n_perm=10000, n_boot=10000,
                 select_windows=16, check_windows=32, speed_repeats=5),
    "paper": dict(**_split("paper"), rf_width=0, rf_seeds=3, n_perm=10000, n_boot=10000,
                  select_windows=16, check_windows=32, speed_repeats=5),
}

#: A fixed random nonlinearity "recovers" a layer when it removes at least this share of what
#: the linear surrogate costs (a superiority margin: less is not a recovery worth the name).
RECOVER = 0.25
#: ... at this share of layers.
LAYER_SHARE = 0.5
#: Two lenses "relate" when Spearman's ρ across layers exceeds this (chapter 06's margin).
MIN_RHO = 0.3
#: The permutation test over layers (the control: no association) at this level.
ALPHA = 0.05
#: The lenses, in the atlas's order: (name, chapter, what a high value means).
LENSES = (("linear cost", "03", "the ridge surrogate costs more perplexity"),
          ("random-feature recovery", "07", "a frozen random nonlinearity recovers more of it"),
          ("gate vs random", "04", "the d+1 gate beats random routing of as many tokens"),
          ("exchange asymmetry", "02", "the trained gate↔up pair is further from symmetric "
                                       "than a random one"),
          ("skip use", "06", "switching off the trained content skip costs more"))


# ------------------------------------------------------------------ P2's lens, measured here


def mlp_width(model) -> int:
    """The MLP's hidden width (SmolLM2: 1,536)."""
    c = model.config
    return (getattr(c, "intermediate_size", None) or getattr(c, "n_inner", None)
            or 4 * c.hidden_size)


@timing.timed("random features: capture")
def capture_fit(model, fit_w: torch.Tensor, S: dict) -> dict:
    """Every MLP's inputs and outputs over the fit windows, position 0 left out (as chapter
    03's keep-first fit): {layer: (X, Y)}."""
    n, T = fit_w.shape
    keep = torch.ones(n, T, dtype=torch.bool)
    keep[:, 0] = False
    with MLPCapture(model, max_tokens=int(keep.sum()), dtype=torch.float32) as cap, \
            torch.no_grad():
        for sl, ids in batches(fit_w, S["batch_size"]):
            cap.keep = keep[sl]
            model(input_ids=ids)
    return {l: (cap[f"layers.{l}.mlp.in"], cap[f"layers.{l}.mlp.out"]) for l in cap.layers}


@timing.timed("random features: fit")
def fit_random_features(pairs: dict, width: int, seed: int) -> dict:
    """Per layer, a `RandomFeatureSurrogate` of `width` units drawn from `seed` (and the
    layer), its read-out fit by ridge on that layer's (X, Y)."""
    return {l: random_features.fit_random_features(X, Y, width, seed=seed + 1000 * l)
            for l, (X, Y) in pairs.items()}


def rf_draws(S: dict) -> list[int]:
    """The random nonlinearity's draws (`rf_seeds`, from the run's seed on)."""
    return [S["seed"] + i for i in range(S["rf_seeds"])]


@timing.timed("random features: sweep")
def measure(model, spans: dict, S: dict, progress=None) -> dict:
    """Each layer alone with its MLP replaced — by the linear surrogate (keep-first) and by
    random features (every draw) — on the evaluation windows, one sweep. Per layer: both
    costs, the random features' change against the linear surrogate with its interval over
    windows (Bonferroni over layers), and the share of the linear cost recovered. Returns
    (that record, {"fits": the ridge fits, "sweep": the linear surrogate's per-token losses}),
    which the budget's gates are trained from."""
    fit_w, eval_w = spans["fit"].windows, spans["eval"].windows
    dtype = next(model.parameters()).dtype
    lin, r2 = surrogates.fit_layers_both(model, fit_w, batch_size=S["batch_size"], dtype=dtype,
                                         variants=(True,))[True]
    mlp = mlps(model)
    variants = {"linear": {l: surrogates.KeepFirst(mlp[l], f) for l, f in lin.items()}}
    pairs, width = capture_fit(model, fit_w, S), S["rf_width"] or mlp_width(model)
    r2_rf = {}
    for s in rf_draws(S):
        rf = fit_random_features(pairs, width, s)
        variants[f"rf{s}"] = {l: surrogates.KeepFirst(mlp[l], f) for l, f in rf.items()}
        r2_rf = r2_rf or {l: surrogates.r_squared(f, *pairs[l]) for l, f in rf.items()}
    del pairs
    ev = surrogates.linearization_sweep(model, eval_w, variants, S["batch_size"], progress)
    L, family = len(lin), stats.bonferroni(len(lin))
    rows = []
    for l in range(L):
        rf_nll = torch.stack([ev.linear[f"rf{s}"][l] for s in rf_draws(S)]).mean(0)
        c_lin = ev.cost("linear", l)
        c_rf = perplexity(rf_nll) / perplexity(ev.baseline) - 1  # as `Sweep.cost`
        rows.append({"layer": l, "r2_linear": r2[l], "r2_rf": r2_rf[l], "linear": c_lin, "rf": c_rf,
                     "recovered": 1 - c_rf / c_lin if c_lin > 0 else None,
                     "rf_vs_linear_ci_family": bootstrap_cost(ev.linear["linear"][l], rf_nll,
                                                              S["n_boot"], S["seed"], family)})
    record = {"per_layer": rows, "family_level": family, "draws": len(rf_draws(S)),
              "width": width,
              "eval_tokens": int(eval_w[:, 1:].numel()), "fit_tokens": int(fit_w[:, 1:].numel())}
    return record, {"fits": lin, "sweep": surrogates.Sweep(ev.baseline,
                                                           {"linear": ev.linear["linear"]})}


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


# ------------------------------------------------------------------ the other lenses, read


def _read(stem: str, S: dict, results_dir) -> dict | None:
    try:
        return results.read(stem, S["profile"], results_dir)["figures"]
    except FileNotFoundError:
        return None


def lenses(measured: dict, S: dict, results_dir=None) -> dict:
    """{lens: {"values": per layer (None where not measured), "source": text}}."""
    name = S["models"].split(",")[0]
    rows = measured["per_layer"]
    out = {"linear cost": [r["linear"] for r in rows],
           "random-feature recovery": [r["recovered"] for r in rows]}
    f04, f02, f06 = (_read(s, S, results_dir) for s in
                     ("04_adaptive_gating", "02_does_symmetry_matter", "06_preprojection_probes"))
    try:
        out["gate vs random"] = [r["random"]["vs_gate"] for r in
                                 f04["pretrained"][name]["per_layer"]]
    except (TypeError, KeyError):
        out["gate vs random"] = None
    try:  # chapter 02 measures SmolLM2's gates (its only gated MLP)
        g = f02["real_gates"] if name == "smollm2-135m" else None
        out["exchange asymmetry"] = [math.log(t["exchange"] / r["exchange"])
                                     for t, r in zip(g["trained"], g["random"])]
    except (TypeError, KeyError):
        out["exchange asymmetry"] = None
    try:
        abl = f06["studies"][name]["pre+skip"]["skip_ablation"]
        out["skip use"] = [u["ppl_change"] for u in sorted(abl, key=lambda u: u["layer"])]
    except (TypeError, KeyError):
        out["skip use"] = None
    return {k: {"values": out[k], "source": f"chapter {ch} ({S['profile']})", "high": high}
            for k, ch, high in LENSES}


def atlas_table(F: dict) -> pd.DataFrame:
    """Layers × lenses, the numbers behind the atlas."""
    cols = {k: v["values"] for k, v in F["lenses"].items() if v["values"] is not None}
    return pd.DataFrame(cols).rename_axis("layer")


def atlas_figure(F: dict):
    """The atlas at a glance: each lens (row) ranked across layers on its own scale (0: the
    lowest layer, 1: the highest), a colour-blind-safe sequential map; grey: not measured."""
    import matplotlib.pyplot as plt

    names = [k for k, *_ in LENSES]
    L = len(F["measured"]["per_layer"])
    grid = np.full((len(names), L), np.nan)
    for i, k in enumerate(names):
        v = F["lenses"][k]["values"]
        if v is not None:
            x = np.array([np.nan if u is None else u for u in v], dtype=float)
            ok = np.isfinite(x)
            if ok.sum() > 1:
                grid[i, ok] = (sps.rankdata(x[ok]) - 1) / (ok.sum() - 1)
    fig, ax = plt.subplots(figsize=(10, 2.8))
    cmap = plt.get_cmap("cividis").copy()
    cmap.set_bad("0.85")
    im = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap=cmap, vmin=0, vmax=1)
    ax.set_yticks(range(len(names)), [f"{k} (ch. {c})" for k, c, _ in LENSES])
    ax.set_xticks(range(0, L, max(1, L // 15)))
    ax.set_xlabel("layer")
    fig.colorbar(im, ax=ax, label="rank across layers (0 low, 1 high)", fraction=0.025)
    ax.set_title(f"{F['model']}: each layer under each lens")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ the budget

#: Perplexity budgets: the most MLP FLOPs removed at a cost of at most 1 % and 5 %.
BUDGETS = (0.01, 0.05)
#: The path is measured until the combined model's cost passes this multiple of the largest
#: budget (beyond it no budget here can be met again by a longer prefix worth measuring).
STOP = 4


def budget_windows(spans: dict, S: dict, text, tok) -> dict:
    """The budget's select and check windows, dealt from the paragraphs chapter 03's fit and
    evaluation windows left (`corpora.mixed_windows`)."""
    taken = [i for k in ("fit", "eval") for i in spans[k].paragraphs]
    return corpora.mixed_windows(text, tok, S["window"], {
        "select": S["select_windows"], "check": S["check_windows"]}, S["seed"], exclude=taken)


@timing.timed("budget: gates")
def fit_gates(model, windows: torch.Tensor, sweep, S: dict) -> dict:
    """Per layer, P3's d+1 gate on the MLP input, trained on chapter 03's evaluation windows
    with P3's labels (δ = L_lin − L_full per token, `gating.delta_labels`; positions 1 … T−2,
    as chapter 04 trains it): {layer: Gate}."""
    N, T = windows.shape
    keep = torch.zeros(N, T, dtype=torch.bool)
    keep[:, 1:-1] = True
    with MLPCapture(model, max_tokens=int(keep.sum()), dtype=torch.float32) as cap, \
            torch.no_grad():
        for sl, ids in batches(windows, S["batch_size"]):
            cap.keep = keep[sl]
            model(input_ids=ids)
    return {l: gating.fit_gate("linear", cap[f"layers.{l}.mlp.in"], gating.delta_labels(
        (sweep.linear["linear"][l] - sweep.baseline)[:, 1:])[0], S["seed"])
            for l in cap.layers}


def modules(model, fits: dict, gates: dict) -> dict:
    """Each layer's replacement in each state that replaces it: keep-first linear surrogate,
    and the surrogate behind the layer's gate (g > ½; `gating.HybridMLP`)."""
    mlp = mlps(model)
    return {"linear": {l: surrogates.KeepFirst(mlp[l], f) for l, f in fits.items()},
            "gated": {l: gating.HybridMLP(mlp[l], f, gates[l], 0.5) for l, f in fits.items()}}


def removed(fl: gating.Flops, state: str, routed: float, T: int) -> float:
    """MLP FLOPs per token a layer's state removes: keep-first linear runs the surrogate on
    every position and the MLP on the first; gated runs the gate everywhere and the
    surrogate instead of the MLP on the tokens it routes."""
    if state == "linear":
        return fl.mlp * (1 - 1 / T) - fl.surrogate
    if state == "gated":
        return routed * (fl.mlp - fl.surrogate) - fl.gate
    return 0.0


def _installed(mods: dict, config: dict) -> dict:
    out = {l: mods[o.state][l] for l, o in config.items()}
    for m in out.values():
        if isinstance(m, gating.HybridMLP):
            m.reset()
    return out


@timing.timed("budget: options and path")
def choose(model, mods: dict, select: torch.Tensor, S: dict, progress=None) -> tuple:
    """Every layer alone in each state on the select windows (one sweep: its cost, the share
    its gate routes, the FLOPs it removes); the greedy path over those options
    (`budget.greedy_path`), the combined model measured on the select windows after every move
    until its cost passes STOP × the largest budget; per budget, the longest prefix under it.
    Returns (that record, the path)."""
    fl = gating.flops_per_token(model, select.shape[1])
    for m in mods["gated"].values():
        m.reset()
    ev = surrogates.linearization_sweep(model, select, mods, S["batch_size"], progress)
    T, L = select.shape[1], len(mods["linear"])
    opts, per_layer = [], []
    for l in range(L):
        routed = mods["gated"][l].fraction
        row = {"layer": l, "routed": routed}
        for state in ("gated", "linear"):
            o = budget.Option(l, state, ev.cost(state, l), removed(fl, state, routed, T))
            opts.append(o)
            row[state] = o.cost
        per_layer.append(row)
    path = budget.greedy_path(opts)
    steps, base = [], ev.baseline
    for k in range(1, len(path) + 1):
        cfg = budget.configuration(path, k)
        with surrogates.replaced(model, _installed(mods, cfg)):
            cost = perplexity(eval_nll(model, select, S["batch_size"])) / perplexity(base) - 1
        steps.append({"layer": path[k - 1].layer, "state": path[k - 1].state, "cost": cost,
                      "predicted": sum(o.cost for o in cfg.values()),
                      "mlp_kept": 1 - sum(o.flops for o in cfg.values()) / (L * fl.mlp)})
        if cost > STOP * max(BUDGETS):
            break
    return {"per_layer": per_layer, "path": steps, "moves": len(path),
            "chosen": {str(b): budget.longest_under([s["cost"] for s in steps], b)
                       for b in BUDGETS},
            "baseline_ppl": perplexity(base), "tokens": int(select[:, 1:].numel())}, path


def flops_saved(model, installed: dict, states: dict, T: int) -> tuple[float, float]:
    """The MLP FLOPs removed by `installed` ({layer: module} in `states` {layer: state}), as a
    share of all MLP FLOPs and of the forward pass's, gated layers at the share they routed
    since their counters were reset."""
    fl, L = gating.flops_per_token(model, T), len(mlps(model))
    gone = sum(removed(fl, s, getattr(installed[l], "fraction", 0.0), T)
               for l, s in states.items())
    return gone / (L * fl.mlp), gone / fl.total


@timing.timed("budget: check")
def check(model, mods: dict, path: list, k: int, windows: torch.Tensor, base: torch.Tensor,
          S: dict) -> dict:
    """The model after the first k moves, measured on held-out windows: perplexity and its
    cost against the original with an interval over windows, the share each gated layer
    routes there, and the FLOPs removed — of the MLPs' and of the whole forward pass's."""
    cfg = {l: o.state for l, o in budget.configuration(path, k).items()}
    installed = _installed(mods, budget.configuration(path, k))
    with surrogates.replaced(model, installed):
        nll = eval_nll(model, windows, S["batch_size"])
    mlp_share, total_share = flops_saved(model, installed, cfg, windows.shape[1])
    return {"moves": k, "layers": {str(l): s for l, s in sorted(cfg.items())},
            "routed": {str(l): m.fraction for l, m in sorted(installed.items())
                       if isinstance(m, gating.HybridMLP)},
            "n_linear": sum(s == "linear" for s in cfg.values()),
            "n_gated": sum(s == "gated" for s in cfg.values()),
            "ppl": perplexity(nll), "baseline_ppl": perplexity(base),
            "cost": perplexity(nll) / perplexity(base) - 1,
            "ci": bootstrap_cost(base, nll, S["n_boot"], S["seed"]),
            "mlp_flops_removed": mlp_share, "flops_saved": total_share}


#: Beside the budgets, two references for the timing: every layer gated (what routing
#: realizes) and every layer linear (the most the MLPs' share of the time allows).
REFERENCES = ("every layer gated", "every layer linear")


@timing.timed("budget: speed")
def speed(model, mods: dict, configs: dict, batches: dict, S: dict) -> list[dict]:
    """`budget.realized` for each budget's model ({name: {layer: state}}) and the REFERENCES,
    the predicted saving from the shares the gates routed while they were timed."""
    L, T = len(mods["linear"]), next(iter(batches.values())).shape[1]
    every = {REFERENCES[0]: {l: "gated" for l in range(L)},
             REFERENCES[1]: {l: "linear" for l in range(L)}}
    runs = {}
    for name, states in {**configs, **every}.items():  # each its own routing counters
        installed = {l: mods["linear"][l] if s == "linear" else gating.HybridMLP(
            *(getattr(mods["gated"][l], a) for a in ("mlp", "surrogate", "gate", "threshold",
                                                    "keep_first"))) for l, s in states.items()}
        runs[name] = (installed, (lambda i=installed, st=states:
                                  flops_saved(model, i, st, T)[1]))
    return budget.realized(model, runs, batches, S["speed_repeats"],
                           replace=surrogates.replaced)


def study_budget(model, spans: dict, extras: dict, S: dict, text, tok, progress=None) -> dict:
    """Part 3 and 4: gates, options, the path and the choice on the select windows; each
    budget's model checked on the held-out windows and timed against the original."""
    win = budget_windows(spans, S, text, tok)
    select, held = win["select"].windows, win["check"].windows
    gates = fit_gates(model, spans["eval"].windows, extras["sweep"], S)
    mods = modules(model, extras["fits"], gates)
    chosen, path = choose(model, mods, select, S, progress)
    base = eval_nll(model, held, S["batch_size"])
    checks = {b: check(model, mods, path, k, held, base, S) for b, k in chosen["chosen"].items()}
    configs = {b: {int(l): s for l, s in c["layers"].items()}
               for b, c in checks.items() if c["moves"]}
    ids = torch.cat([select, held])
    return {"choice": chosen, "checks": checks, "windows": corpora.describe(win),
            "wallclock": speed(model, mods, configs, {1: held[:1], 8: ids[:8]}, S)}


def budget_table(F: dict) -> pd.DataFrame:
    """Per budget: the layers the choice moved, the FLOPs removed, and the combined model's
    cost on the select windows (where it was chosen) and on the held-out check windows."""
    B, rows = F["budget"], []
    for b, c in B["checks"].items():
        rows.append({"budget": f"{float(b):.0%}", "layers linear": c["n_linear"],
                     "layers gated": c["n_gated"], "MLP FLOPs removed": c["mlp_flops_removed"],
                     "forward FLOPs removed": c["flops_saved"],
                     "cost (select)": _select_cost(B, c),
                     "perplexity (held out)": f"{c['baseline_ppl']:.2f} → {c['ppl']:.2f}",
                     "cost (held out)": f"{c['cost']:+.2%} [{c['ci'][0]:+.2%}, "
                                        f"{c['ci'][1]:+.2%}]"})
    return pd.DataFrame(rows).set_index("budget").style.format({
        "MLP FLOPs removed": "{:.1%}", "forward FLOPs removed": "{:.1%}",
        "cost (select)": "{:+.2%}"})


def budget_figure(F: dict):
    """Perplexity cost against the share of MLP FLOPs kept along the greedy path: the combined
    model as measured (select windows), the sum of the layers' costs alone, the budgets, and
    each budget's model on the held-out windows (interval over windows)."""
    import matplotlib.pyplot as plt

    B = F["budget"]
    path = B["choice"]["path"]
    kept = [1.0] + [s["mlp_kept"] for s in path]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(kept, [0.0] + [s["cost"] for s in path], "o-", ms=3, color="#0072B2",
            label="combined model (select windows)")
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
    ax.set_title(f"{F['model']}: the budget's path (dotted: the budgets)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def speed_table(F: dict) -> pd.DataFrame:
    """Each budget's model against the original, timed side by side: tokens per second, the
    realized saving, the FLOP-predicted one and their ratio."""
    t = pd.DataFrame(F["budget"]["wallclock"])
    if t.empty:
        return t
    t["model"] = [c if c in REFERENCES else f"budget {float(c):.0%}" for c in t["config"]]
    t = t.set_index(["model", "batch"])[["full_tps", "budget_tps", "realized", "predicted",
                                          "ratio"]]
    return t.rename(columns={"full_tps": "original (tokens/s)", "budget_tps": "budget (tokens/s)",
                             "realized": "realized saving", "predicted": "predicted saving",
                             "ratio": "realized / predicted"}).style.format({
        "original (tokens/s)": "{:,.0f}", "budget (tokens/s)": "{:,.0f}",
        "realized saving": "{:+.1%}", "predicted saving": "{:.1%}",
        "realized / predicted": "{:.2f}"}, na_rep="—")


# ------------------------------------------------------------------ claims


def _scale(F) -> str:
    m = F["measured"]
    return (f"{F['model']}, {len(m['per_layer'])} layers; random features of width {m['width']} "
            f"({m['draws']} draw(s)) fit on {m['fit_tokens']:,} tokens, evaluated on "
            f"{m['eval_tokens']:,}")


def claim_rf_recovers(F, S) -> Claim:
    """The book's question, from P2's lens: does a *fixed, untrained* nonlinearity of the MLP's
    width, with only its read-out fitted in closed form, recover part of what the linear
    surrogate loses? Per layer, the perplexity change of random features against the linear
    surrogate on the same tokens (BCa over windows, Bonferroni over layers), beyond a
    superiority margin of RECOVER of the linear cost; reproduced when LAYER_SHARE of the
    layers' corrected intervals lie beyond it, not reproduced when that share cannot be
    reached."""
    rows = F["measured"]["per_layer"]
    # oriented so that a recovery beyond the margin is positive: −(ppl_rf/ppl_lin − 1) − m
    def margin(r):
        c = max(r["linear"], 0.0)
        return RECOVER * c / (1 + c)

    iv = {r["layer"]: (-r["rf_vs_linear_ci_family"][1] - margin(r),
                       -r["rf_vs_linear_ci_family"][0] - margin(r)) for r in rows}
    dec = share_of(iv, share=LAYER_SHARE,
                   what=f"random features' gain over the linear surrogate beyond "
                   f"{RECOVER:.0%} of its cost")
    rec = [r["recovered"] for r in rows if r["recovered"] is not None]
    return decided("BOOK.V.random-features-recover", dec,
                   measured=f"median share of the linear cost recovered {np.median(rec):+.0%} "
                   f"(range {min(rec):+.0%} … {max(rec):+.0%}); median cost linear "
                   f"{np.median([r['linear'] for r in rows]):+.2%}, random features "
                   f"{np.median([r['rf'] for r in rows]):+.2%}",
                   control="the linear surrogate of the same layer on the same tokens",
                   needs="more evaluation windows (the corrected intervals are wider than the "
                   "margin)", scale=_scale(F), kind="book")


def relate(F, S, a: str, b: str, cid: str) -> Claim:
    """Lenses `a` and `b` relate across layers: Spearman ρ with a Fisher-z interval, beyond
    MIN_RHO, and a one-sided permutation test over layers (the control: no association).
    Reproduced when ρ's interval lies above MIN_RHO and the permutation p < ALPHA; not
    reproduced when the interval lies below MIN_RHO; not run where a lens was not measured."""
    va, vb = F["lenses"][a]["values"], F["lenses"][b]["values"]
    if va is None or vb is None:
        miss = [k for k, v in ((a, va), (b, vb)) if v is None]
        return Claim(cid, f"not measured: {', '.join(miss)}", NOT_RUN, kind="book",
                     needs=f"the results of {', '.join(F['lenses'][k]['source'] for k in miss)}")
    x = np.array([np.nan if u is None else u for u in va], float)
    y = np.array([np.nan if u is None else u for u in vb], float)
    ok = np.isfinite(x) & np.isfinite(y)
    rho, lo, hi = stats.spearman_interval(x[ok], y[ok])
    p = float(sps.permutation_test(
        (x[ok],), lambda u: sps.spearmanr(u, y[ok]).statistic, permutation_type="pairings",
        n_resamples=S["n_perm"], alternative="greater",
        rng=np.random.default_rng(S["seed"])).pvalue) if ok.sum() >= 4 else math.nan
    text = (f"ρ = {rho:+.2f} [{lo:+.2f}, {hi:+.2f}] over {int(ok.sum())} layers; "
            f"permutation p = {p:.3g}")
    if not math.isfinite(lo):
        dec = Decision(INCONCLUSIVE, f"no interval for ρ ({text})")
    elif lo > MIN_RHO and p < ALPHA:
        dec = Decision(REPRODUCED, f"ρ's interval lies above {MIN_RHO:g} and p < {ALPHA:g}")
    elif hi < MIN_RHO:
        dec = Decision(NOT_REPRODUCED, f"ρ's interval lies below {MIN_RHO:g}")
    else:
        dec = Decision(INCONCLUSIVE, f"ρ's interval holds {MIN_RHO:g}")
    n_need = (math.ceil(3 + (1 + rho**2 / 2) * (1.96 / (math.atanh(rho) - math.atanh(MIN_RHO)))**2)
              if math.isfinite(rho) and abs(rho - MIN_RHO) > 1e-6 and abs(rho) < 1 else None)
    return decided(cid, dec, measured=f"{a} against {b}: {text}",
                   control="no association across layers (permutation test over layers)",
                   needs=(f"≈ {n_need} layers at this ρ (a larger model)" if n_need else
                          "a larger model (more layers)"), scale=_scale(F), kind="book")


def claim_linear_vs_asymmetry(F, S) -> Claim:
    """The book's question across P1 and P3: are the layers that are most costly to linearize
    the ones whose trained gates are furthest from exchange symmetry (`relate`)?"""
    return relate(F, S, "linear cost", "exchange asymmetry", "BOOK.V.linear-vs-asymmetry")


def claim_linear_vs_routing(F, S) -> Claim:
    """The book's question within P3: where linearizing costs more, does the gate's choice of
    tokens beat random routing by more (`relate`)?"""
    return relate(F, S, "linear cost", "gate vs random", "BOOK.V.linear-vs-routing")


CLAIMS = (claim_rf_recovers, claim_linear_vs_asymmetry, claim_linear_vs_routing)


def claims(F: dict, S: dict) -> list[Claim]:
    return [c(F, S) for c in CLAIMS]


def glue(F: dict) -> dict:
    rows = F["measured"]["per_layer"]
    rec = [r["recovered"] for r in rows if r["recovered"] is not None]
    return {"rf_width": f"{F['measured']['width']:,}",
            "rf_median_recovered": f"{np.median(rec):+.0%}",
            "lin_median": f"{np.median([r['linear'] for r in rows]):+.2%}",
            "rf_median": f"{np.median([r['rf'] for r in rows]):+.2%}",
            "r2_gain_median": f"{np.median([r['r2_rf'] - r['r2_linear'] for r in rows]):+.3f}",
            "r2_lin_median": f"{np.median([r['r2_linear'] for r in rows]):.3f}",
            "n_layers": str(len(rows)), **_budget_glue(F["budget"])}


def _select_cost(B: dict, c: dict) -> float:
    """The combined cost on the select windows of the model a check measured."""
    return B["choice"]["path"][c["moves"] - 1]["cost"] if c["moves"] else 0.0


def _budget_glue(B: dict) -> dict:
    out = {}
    for b, c in B["checks"].items():
        p = f"b{round(100 * float(b))}"
        out.update({f"{p}_mlp_removed": f"{c['mlp_flops_removed']:.1%}",
                    f"{p}_flops_saved": f"{c['flops_saved']:.1%}",
                    f"{p}_n_linear": str(c["n_linear"]), f"{p}_n_gated": str(c["n_gated"]),
                    f"{p}_ppl": f"{c['baseline_ppl']:.2f} → {c['ppl']:.2f}",
                    f"{p}_cost": f"{c['cost']:+.2%} [{c['ci'][0]:+.2%}, {c['ci'][1]:+.2%}]",
                    f"{p}_select": f"{_select_cost(B, c):+.2%}"})
    for name in ("budgets",) + REFERENCES:
        ratios = [r["ratio"] for r in B["wallclock"] if r["ratio"] is not None and
                  (r["config"] == name or name == "budgets" and r["config"] not in REFERENCES)]
        out[f"ratio_{name.split()[-1]}"] = (f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios
                                            else "not measured")
    out["budget_moves"] = str(B["choice"]["moves"])
    path = B["choice"]["path"]
    out["budget_measured"] = str(len(path))
    out["compound_share"] = f"{sum(s['cost'] > s['predicted'] for s in path)} of {len(path)}"
    out["check_tokens"] = f"{B['windows']['check']['tokens']:,}"
    out["select_tokens"] = f"{B['windows']['select']['tokens']:,}"
    return out
