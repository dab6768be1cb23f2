"""Chapter 07's claims: its rules, reading stored figures only (a changed rule
re-judges the stored figures, `nlbudget judge 07`, and reruns nothing)."""

from __future__ import annotations

import math
import re

import numpy as np
from scipy import stats as sps

from nlbudget.chapters.ch04_adaptive_gating.claims import gates_not_overfit as of_ch04
from nlbudget.verdicts import controls, results, stats
from nlbudget.verdicts.claims import (INCONCLUSIVE, NEGATIVE, NOT_REPRODUCED, NOT_RUN,
                                      POSITIVE, REPRODUCED, Claim, Decision, decided, share_of)

#: A fixed random nonlinearity "recovers" a layer when it removes at least this share of what
#: the linear surrogate costs (a superiority margin: less is not a recovery worth the name) —
#: the book's margin, stated with the rule before any atlas result (no paper states one: the
#: question is the book's own).
RECOVER = 0.25

#: ... at this share of layers (the book's, stated with the rule: most layers).
LAYER_SHARE = 0.5

#: Two lenses "relate" when Spearman's ρ across layers exceeds this: the book's margin, stated
#: with the rule before any atlas result (chapter 06's too) — Cohen's conventional "medium"
#: correlation (J. Cohen, Statistical Power Analysis for the Behavioral Sciences, 1988).
MIN_RHO = 0.3

#: The permutation test over layers (the control: no association) at this level (the book's
#: choice, stated with the rule: the conventional 5 % level).
ALPHA = 0.05

#: Each margin as the rows state it: whose it is, and where it comes from (the comments above).
RECOVER_MARGIN = (f"the book's margin, stated before the data; the share of layers needed, "
                  f"{LAYER_SHARE:.0%}, the book's too")
RHO_MARGIN = ("the book's margin, stated before the data: Cohen's medium correlation, by "
              "convention")


def models_of(F) -> list[dict]:
    """The atlas's models' figures, chapter 03's first: each {"model", "measured", "lenses",
    "budget"}."""
    return list(F["atlas"].values())


def _scale(F) -> str:
    """The scale of one model's figures, or of every model's in the atlas."""
    if "atlas" in F:
        return "; ".join(_scale(M) for M in models_of(F))
    m = F["measured"]
    return (f"{F['model']}, {len(m['per_layer'])} layers; random features of width {m['width']} "
            f"({m['draws']} draw(s)) fit on {m['fit_tokens']:,} tokens, evaluated on "
            f"{m['eval_tokens']:,}")


#: The random-feature read-out over-fits a layer when its held-out R² is below its fit R² by
#: more than this.
OVERFIT_GAP = 0.05


def read_out_generalises(rows: list, fit_tokens: int | None = None) -> controls.Control:
    """Positive control of the random-feature claim: no layer's read-out over-fits (held-out R²
    within OVERFIT_GAP of its fit R²); a read-out that only memorises its fit tokens cannot
    show what a random nonlinearity recovers on others. Where λ was already chosen by
    cross-validation (`lambda_rf` recorded), the remedy left is more fit tokens."""
    what = (f"the random-feature read-out does not over-fit (held-out R² within {OVERFIT_GAP} "
            "of its fit R², every layer)")
    cv = all(r.get("lambda_rf") is not None for r in rows)
    fix = "λ chosen by cross-validation on held-out windows"
    if any(r.get("r2_rf_held_out") is None for r in rows):
        return controls.not_recorded(what, fix + ", the held-out R² recorded",
                                     guards="negative")
    gaps = [r["r2_rf"] - r["r2_rf_held_out"] for r in rows]
    bad = sum(g > OVERFIT_GAP for g in gaps)
    if cv and fit_tokens:  # a ridge fit's optimism falls as 1/n at a fixed λ-share
        fix = (f"more fit tokens: ≈ {round(fit_tokens * max(gaps) / OVERFIT_GAP / 1000):,}k "
               f"would bring the largest gap to {OVERFIT_GAP} (here {fit_tokens:,}; λ is "
               "already chosen by cross-validation)")
    how = " (λ by cross-validation)" if cv else " (fixed λ)"
    return controls.Control(what, f"{bad} of {len(rows)} layers over-fit (gap median "
                            f"{np.median(gaps):+.3f}, largest {max(gaps):+.3f}){how}", bad == 0,
                            fix if bad else "", "negative",
                            f"every layer ({len(rows)}) of the model")


def claim_rf_recovers(F, S) -> Claim:
    """The book's question, from P2's lens: does a *fixed, untrained* nonlinearity of the MLP's
    width (σ the MLP's own activation), with only its read-out fitted in closed form, recover
    part of what the linear surrogate loses? Per layer of every model in the atlas, the
    perplexity change of random features against the linear surrogate on the same tokens (BCa
    over windows, Bonferroni over each model's layers), beyond a superiority margin of RECOVER
    of the linear cost; reproduced when LAYER_SHARE of the layers' corrected intervals lie
    beyond it, not reproduced when that share cannot be reached."""
    Ms = models_of(F)
    rows = [r for M in Ms for r in M["measured"]["per_layer"]]
    # oriented so that a recovery beyond the margin is positive: −(ppl_rf/ppl_lin − 1) − m
    def margin(r):
        c = max(r["linear"], 0.0)
        return RECOVER * c / (1 + c)

    iv = {(i, r["layer"]): (-r["rf_vs_linear_ci_family"][1] - margin(r),
                            -r["rf_vs_linear_ci_family"][0] - margin(r))
          for i, M in enumerate(Ms) for r in M["measured"]["per_layer"]}
    dec = share_of(iv, share=LAYER_SHARE,
                   what=f"random features' gain over the linear surrogate beyond "
                   f"{RECOVER:.0%} of its cost ({RECOVER_MARGIN})")
    positive = read_outs_generalise(Ms)
    per_model = "; ".join(f"{M['model']}: median {np.median(_recovered(M)):+.0%}" for M in Ms)
    rec = [r["recovered"] for r in rows if r["recovered"] is not None]
    return decided("BOOK.V.random-features-recover", dec, positive=positive,
                   measured=f"median share of the linear cost recovered {np.median(rec):+.0%} "
                   f"(range {min(rec):+.0%} … {max(rec):+.0%}; {per_model}); median cost "
                   f"linear {np.median([r['linear'] for r in rows]):+.2%}, random features "
                   f"{np.median([r['rf'] for r in rows]):+.2%}",
                   control="the linear surrogate of the same layer on the same tokens",
                   needs="more evaluation windows (the corrected intervals are wider than the "
                   "margin)", scale=_scale(F), kind="book")


def read_outs_generalise(Ms) -> controls.Control:
    """`read_out_generalises` for every model's figures in `Ms`, joined."""
    return controls.joined(*(read_out_generalises(M["measured"]["per_layer"],
                                                  M["measured"]["fit_tokens"]) for M in Ms))


def _recovered(M) -> list:
    return [r["recovered"] for r in M["measured"]["per_layer"] if r["recovered"] is not None]


#: A lens measures layers, not noise, when its reliability — the share of its variance across
#: layers not explained by its per-layer sampling noise, 1 − mean(se²) / var — is at least this
#: (below it the noise alone would pull any ρ towards 0).
MIN_RELIABILITY = 0.5


def reliability(values: list, se: list | None) -> float | None:
    """Classical test theory's reliability of a lens across layers, 1 − mean(se²) / var(values)
    over the layers where both are known (None where the lens records no se)."""
    if se is None:
        return None
    pairs = [(v, e) for v, e in zip(values, se) if v is not None and e is not None
             and math.isfinite(v) and math.isfinite(e)]
    if len(pairs) < 3:
        return None
    v, e = np.array(pairs, dtype=float).T
    var = float(np.var(v, ddof=1))
    return 1 - float(np.mean(e ** 2)) / var if var > 0 else -math.inf


def lenses_reliable(F, names: tuple) -> controls.Control:
    """Positive control of a relation: every lens has reliability ≥ MIN_RELIABILITY, so that a
    relation, if there, could show. A lens that records no noise (no se per layer) has not
    shown it measures layers rather than noise: the control fails for it (`controls`: a figure
    the run did not record fails). Noise pulls ρ towards 0, so the control guards the negative
    finding only."""
    rel = {k: reliability(F["lenses"][k]["values"], F["lenses"][k].get("se")) for k in names}
    known = {k: r for k, r in rel.items() if r is not None}
    bad = [k for k, r in known.items() if r < MIN_RELIABILITY]
    unknown = [k for k in rel if k not in known]
    return controls.Control(
        f"each lens measures layers, not noise (reliability ≥ {MIN_RELIABILITY:g}: "
        "1 − mean(se²) / variance across layers)",
        "; ".join([f"{k} {r:.2f}" for k, r in known.items()]
                  + [f"{k}: no interval recorded, its reliability unknown" for k in unknown]),
        not bad and not unknown,
        "; ".join(([f"{', '.join(bad)} measured on more windows"] if bad else [])
                  + ([f"{', '.join(unknown)} measured with its noise (an interval per layer)"]
                     if unknown else [])), "negative")


def read_interval(lo: float, hi: float, att: float) -> tuple[float, float]:
    """The interval of ρ that `relation` decides on: its lower end as measured (the test for a
    relation: noise only pulls ρ towards 0, so the measured end is the cautious one), its upper
    end divided by the lenses' attenuation `att` (Spearman's correction: the test for none),
    kept inside [−1, 1]."""
    return lo, max(-1.0, min(1.0, hi / att))


def read_text(lo: float, hi: float, att: float) -> str:
    """The interval `relation` decides on (`read_interval`), as the row shows it beside ρ's
    measured one."""
    r_lo, r_hi = read_interval(lo, hi, att)
    return (f"the rule reads [{r_lo:+.2f}, {r_hi:+.2f}] (the upper end corrected for the "
            f"lenses' noise: {hi:+.2f} / {att:.2f})")


def relation(lo: float, hi: float, p: float, att: float, text: str) -> Decision:
    """`relate`'s rule on ρ's interval [lo, hi], the permutation p and the lenses' attenuation
    `att`, read as `read_interval` gives it: reproduced (a relation found) when that interval
    lies above MIN_RHO and p < ALPHA; not reproduced (none of that size) when it lies below
    MIN_RHO (its upper end divided by `att`); else inconclusive. Lens noise pulls ρ towards 0,
    so a lens-reliability control guards the negative finding only."""
    if not math.isfinite(lo):
        return Decision(INCONCLUSIVE, f"no interval for ρ ({text})")
    r_lo, r_hi = read_interval(lo, hi, att)
    shown = f"[{r_lo:+.2f}, {r_hi:+.2f}]"
    if r_lo > MIN_RHO and p < ALPHA:
        return Decision(REPRODUCED, f"ρ's interval {shown} lies above {MIN_RHO:g} "
                        f"({RHO_MARGIN}) and p < {ALPHA:g} (the conventional level)", POSITIVE)
    if r_hi < MIN_RHO:
        return Decision(NOT_REPRODUCED, f"ρ's interval {shown}, corrected for the lenses' "
                        f"noise (upper end {hi:+.2f} / {att:.2f}), lies below {MIN_RHO:g} "
                        f"({RHO_MARGIN})", NEGATIVE)
    return Decision(INCONCLUSIVE, f"ρ's interval {shown}, corrected for the lenses' noise "
                    f"(upper end {hi:+.2f} / {att:.2f}), holds {MIN_RHO:g} ({RHO_MARGIN})")


def relate(F, S, a: str, b: str, cid: str, positive: controls.Control | None = None) -> Claim:
    """Lenses `a` and `b` relate across layers: Spearman ρ with a Fisher-z interval, beyond
    MIN_RHO, and a one-sided permutation test over layers (the control: no association).
    Reproduced when ρ's interval lies above MIN_RHO and the permutation p < ALPHA; not
    reproduced when the interval's upper end, corrected for the lenses' noise (divided by
    √(reliability_a · reliability_b), Spearman's correction for attenuation), lies below
    MIN_RHO; not run where a lens was not measured. Positive control: the lenses are reliable
    (`lenses_reliable`), joined with `positive`."""
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
    att = attenuation(F, (a, b))
    text = (f"ρ = {rho:+.2f} [{lo:+.2f}, {hi:+.2f}] over {int(ok.sum())} layers; "
            f"{read_text(lo, hi, att)}; permutation p = {p:.3g}")
    dec = relation(lo, hi, p, att, text)
    positive = controls.joined(lenses_reliable(F, (a, b)), positive)
    return decided(cid, dec, measured=f"{a} against {b}: {text}", positive=positive,
                   control="no association across layers (permutation test over layers)",
                   needs=layers_to_decide(rho, int(ok.sum()), att),
                   scale=_scale(F), kind="book")


def attenuation(F, names: tuple) -> float:
    """√ of the product of the lenses' reliabilities (1 for a lens that records no noise; a
    small floor where the noise exceeds the spread, so the division stays finite)."""
    rel = [reliability(F["lenses"][k]["values"], F["lenses"][k].get("se")) for k in names]
    return math.sqrt(math.prod(max(r, 1e-3) if r is not None else 1.0 for r in rel))


def layers_to_decide(rho: float, n: int, att: float = 1.0) -> str:
    """How many layers (at the ρ seen) would put ρ's Fisher-z interval clear of the edge the
    rule must clear (`relate`): above MIN_RHO for `reproduced`; below MIN_RHO · `att` (the
    lenses' attenuation: the rule divides the upper end by it) for `not reproduced`. A ρ
    between the two edges is decided by no number of layers while the lenses are this noisy;
    where more than ten times this model's layers would be needed, say that more layers of this
    kind will not decide it."""
    if not (math.isfinite(rho) and abs(rho) < 1):
        return "a larger model (more layers)"
    edge = MIN_RHO if rho > MIN_RHO else MIN_RHO * att
    if rho <= MIN_RHO and rho >= edge - 1e-9:
        return (f"ρ {rho:+.2f} lies between the book's margin {MIN_RHO:g} and its noise-corrected edge "
                f"{edge:+.2f} (the lenses' attenuation {att:.2f}): no number of layers decides "
                "it while the lenses are this noisy — lenses measured on more windows would")
    need = math.ceil(3 + (1 + rho**2 / 2) * (1.96 / (math.atanh(rho) - math.atanh(edge)))**2)
    if need > 10 * n:
        return (f"ρ {rho:+.2f} lies at the book's margin {MIN_RHO:g}: ≈ {need:,} layers at this ρ, "
                f"over ten times this model's {n} — more layers of one model will not decide "
                "it; pretrained models of other families would")
    return f"≈ {need} layers at this ρ (here {n}): a larger model, or several"


def layer_ranks(values: list) -> np.ndarray:
    """A lens's values as ranks within one model, scaled to 0 (its lowest layer) … 1 (its
    highest); NaN where not measured. Models of different depth and scale pool on these."""
    x = np.array([np.nan if u is None else u for u in values], float)
    ok = np.isfinite(x)
    out = np.full(len(x), np.nan)
    if ok.sum() > 1:
        out[ok] = (sps.rankdata(x[ok]) - 1) / (ok.sum() - 1)
    return out


def relate_pooled(F, S, a: str, b: str, cid: str,
                  positive: controls.Control | None = None) -> Claim:
    """Lenses `a` and `b` relate across the layers of every model in the atlas: Spearman ρ of
    their within-model ranks (`layer_ranks`) pooled over the models, with a Fisher-z interval
    over all layers, and a one-sided permutation test that permutes layers within each model
    (the control: no association inside any model; the models' different scales cannot make
    one). The rule as `relate`'s, its noise correction the layer-weighted mean of the models'
    reliabilities, its positive control the lenses' reliability joined with `positive`. With
    one model it is `relate`."""
    Ms = [M for M in models_of(F) if M["lenses"][a]["values"] is not None
          and M["lenses"][b]["values"] is not None]
    if len(Ms) < 2:
        return relate(models_of(F)[0], S, a, b, cid, positive)
    xs, ys = zip(*((layer_ranks(M["lenses"][a]["values"]), layer_ranks(M["lenses"][b]["values"]))
                   for M in Ms))
    oks = [np.isfinite(x) & np.isfinite(y) for x, y in zip(xs, ys)]
    xs, ys = [x[o] for x, o in zip(xs, oks)], [y[o] for y, o in zip(ys, oks)]
    x, y = np.concatenate(xs), np.concatenate(ys)
    rho, lo, hi = stats.spearman_interval(x, y)
    rng = np.random.default_rng(S["seed"])
    null = np.array([sps.spearmanr(x, np.concatenate([rng.permutation(v) for v in ys])).statistic
                     for _ in range(S["n_perm"])])
    p = float((1 + np.sum(null >= rho)) / (1 + len(null)))
    n = [len(v) for v in xs]
    each = ", ".join(f"{M['model']}: {k}" for M, k in zip(Ms, n))
    att = float(np.average([attenuation(M, (a, b)) for M in Ms], weights=n))
    text = (f"ρ = {rho:+.2f} [{lo:+.2f}, {hi:+.2f}] over {sum(n)} layers of {len(Ms)} models "
            f"({each}; ranks within each model); {read_text(lo, hi, att)}; permutation p = "
            f"{p:.3g} (within models)")
    dec = relation(lo, hi, p, att, text)
    checks = [c for c in (*(lenses_reliable(M, (a, b)) for M in Ms), positive) if c is not None]
    return decided(cid, dec, measured=f"{a} against {b}: {text}",
                   positive=controls.joined(*checks),
                   control="no association across layers within any model (permutation test "
                   "within models)", needs=layers_to_decide(rho, sum(n), att), scale=_scale(F),
                   kind="book")


def claim_linear_vs_asymmetry(F, S) -> Claim:
    """The book's question across P1 and P3: are the layers that are most costly to linearize
    the ones whose trained gates are furthest from exchange symmetry (`relate`; chapter 02
    measures the atlas's first model)?"""
    return relate(models_of(F)[0], S, "linear cost", "exchange asymmetry",
                  "BOOK.V.linear-vs-asymmetry")


def gates_not_overfit(lens: dict, model: str) -> controls.Control:
    """Chapter 04's over-fit check on the gates the routing lens reads (fit − held-out AUC,
    `ch04 ... claims.gates_not_overfit`): from the lens's record where it carries one, else from
    chapter 04's stored figures of the profile the lens names as its source ("chapter 04
    (full)"), for the same model; not recorded (failed) where neither holds it."""
    if lens.get("gates_not_overfit"):
        return controls.Control(**lens["gates_not_overfit"])
    found = re.fullmatch(r"chapter 04 \((\w+)\)", lens.get("source", ""))
    try:
        F04 = results.read("04_adaptive_gating", found.group(1))["figures"]
        if next(iter(F04["pretrained"])) == model:
            return of_ch04(F04)
    except (AttributeError, FileNotFoundError, KeyError, StopIteration):  # no 04 record named
        pass
    return controls.not_recorded("chapter 04's d+1 gates do not over-fit",
                                 "chapter 04's record of its gates' fit and held-out AUC",
                                 guards="negative")


def claim_linear_vs_routing(F, S) -> Claim:
    """The book's question within P3: where linearizing costs more, does the gate's choice of
    tokens beat random routing by more (`relate`; chapter 04 measures the first model)? Its
    positive control is chapter 04's on the same gates: they beat chance held out, and they do
    not over-fit (`gates_not_overfit`) — an over-fitted gate's routing is noise at the layers
    it over-fits, which can hide a relation (it guards "no relation")."""
    M = models_of(F)[0]
    lens = M["lenses"]["gate vs random"]
    gates = lens.get("gates_beat_chance")
    beat = (controls.not_recorded(
        "the routing lens has signal: chapter 04's gates beat chance on held-out tokens",
        "chapter 04's gates trained on enough tokens (≥ 16k), its control recorded",
        guards="negative") if gates is None else controls.Control(**gates))
    positive = controls.joined(beat, gates_not_overfit(lens, next(iter(F["atlas"])))
                               ).aimed("negative")
    return relate(M, S, "linear cost", "gate vs random", "BOOK.V.linear-vs-routing", positive)


def recovery_se(M) -> list | None:
    """The recovery lens's standard error per layer, from the stored interval of random
    features' change against the linear surrogate, d = ppl_rf / ppl_lin − 1 (at the family
    level `measured` records): the share recovered is 1 − c_rf / c_lin = −d · (1 + c_lin) /
    c_lin, so se ≈ se(d) · (1 + c_lin) / c_lin, the linear cost taken as exact (its own interval
    is the linear-cost lens's). None where the family level was not recorded; None at a layer
    whose linear cost is not positive (no recovery measured there)."""
    m = M["measured"]
    if m.get("family_level") is None:
        return None
    z = float(sps.norm.ppf(0.5 + m["family_level"] / 2))
    return [(r["rf_vs_linear_ci_family"][1] - r["rf_vs_linear_ci_family"][0]) / (2 * z) *
            (1 + r["linear"]) / r["linear"] if r["linear"] > 0 else None
            for r in m["per_layer"]]


def with_recovery_noise(M) -> dict:
    """Model figures `M` with the recovery lens's noise (`recovery_se`) where the study did not
    record one; `M` itself is left as it is."""
    lens = M["lenses"]["random-feature recovery"]
    se = recovery_se(M)
    if "se" in lens or se is None:
        return M
    return {**M, "lenses": {**M["lenses"], "random-feature recovery": {**lens, "se": se}}}


def claim_linear_vs_recovery(F, S) -> Claim:
    """The book's question across P2 and P3, over every model of the atlas: where a layer is
    costlier to linearize, does a fixed random nonlinearity recover more of that cost
    (`relate_pooled`)? The recovery lens's noise comes from its stored intervals
    (`recovery_se`), and the lens is the random-feature claim's measurement, so that claim's
    positive control is this one's too: a read-out that over-fits measures its fit tokens, not
    what a random nonlinearity recovers (`read_out_generalises`, every model)."""
    Ms = {k: with_recovery_noise(M) for k, M in F["atlas"].items()}
    # a read-out's over-fitting varies by layer, so it can make a relation across layers as
    # well as hide one: here it guards both directions
    return relate_pooled({**F, "atlas": Ms}, S, "linear cost", "random-feature recovery",
                         "BOOK.V.linear-vs-recovery",
                         positive=read_outs_generalise(Ms.values()).aimed("both"))


CLAIMS = (claim_rf_recovers, claim_linear_vs_asymmetry, claim_linear_vs_routing,
          claim_linear_vs_recovery)


def claims(F: dict, S: dict) -> list[Claim]:
    return [c(F, S) for c in CLAIMS]
