"""Chapter 07 (Part V): the nonlinearity budget of one model — every layer of SmolLM2-135M
under the four papers' lenses.

Read from the chapters' results at the same profile: the P3 lenses (chapter 03's windows:
linear-surrogate cost and R², measured again here through the shared memo; chapter 04's gate
against random routing of as many tokens), P1's (chapter 02: the trained gate↔up exchange
asymmetry against a random gated MLP's) and P4's (chapter 06: the cost of switching off the
trained content skip). Measured here, P2's lens (`nlbudget.random_features`): the MLP replaced
by a frozen random nonlinearity of its own width with only the read-out fitted, against the
linear surrogate on the same tokens.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy import stats as sps

from nlbudget import random_features, surrogates, timing
from nlbudget.capture import MLPCapture, mlps
from nlbudget.chapters import ch03_linear_surrogates as ch03
from nlbudget.evaluation import batches, bootstrap_cost, perplexity
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
# smoke uses a narrow one); rf_seeds: draws of it (their per-token losses averaged)
SETTINGS = {
    "smoke": dict(**_split("smoke"), rf_width=64, rf_seeds=1, n_perm=200, n_boot=100),
    "ci": dict(**_split("ci"), rf_width=0, rf_seeds=1, n_perm=10000, n_boot=1000),
    "full": dict(**_split("full"), rf_width=0, rf_seeds=3, n_perm=10000, n_boot=10000),
    "paper": dict(**_split("paper"), rf_width=0, rf_seeds=3, n_perm=10000, n_boot=10000),
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
    windows (Bonferroni over layers), and the share of the linear cost recovered."""
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
    return {"per_layer": rows, "family_level": family, "draws": len(rf_draws(S)),
            "width": width,
            "eval_tokens": int(eval_w[:, 1:].numel()), "fit_tokens": int(fit_w[:, 1:].numel())}


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
            "n_layers": str(len(rows))}
