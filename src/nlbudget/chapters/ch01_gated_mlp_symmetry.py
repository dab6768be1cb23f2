"""Chapter 01 (Part I, derivations): gated MLPs as symmetry-broken rank-1 bilinear attention.

The study proves each step of P1's chain with sympy (`nlbudget.symbolic`) and checks it on
the torch modules of `nlbudget.bilinear`. Every proof has a negative control: the same checker
must reject a perturbed statement, and every numerical "zero" is set against a case that must
not be zero.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import sympy as sp
import torch

from nlbudget import bilinear, symbolic, timing
from nlbudget.verdicts.claims import Claim, derivation, decided

KEY, STEM = "01", "01_gated_mlp_symmetry"
#: CPU threads: tiny models gain nothing from a second one, so this chapter always runs on
#: one (the same numbers however it is launched) and the build runs it beside another.
THREADS = 1
SETTINGS = {
    "smoke": dict(n_inputs=64, d_model=8, d_hidden=16, n_alpha=9, rank=2),
    "ci": dict(n_inputs=2048, d_model=64, d_hidden=256, n_alpha=61, rank=4),
    # full: the derivations decide at ci; wider modules and more inputs for the numerics
    "full": dict(n_inputs=4096, d_model=128, d_hidden=512, n_alpha=61, rank=4),
    "paper": dict(n_inputs=16384, d_model=576, d_hidden=1536, n_alpha=121, rank=4),
}

#: float64: a relative change below ZERO is "invariant", above BROKEN is "broken".
ZERO, BROKEN = 1e-12, 1e-3
#: eq. (3) computed from A_j = Σ_s q_js ᵀ k_js agrees with the rank-r module to this.
REDUCTION_TOL = 1e-10
NONLINEAR = ("relu", "gelu", "silu")
NEEDS = "a check whose negative control fails as it must (as it stands the check cannot tell)"


# ------------------------------------------------------------------ study


def derive() -> dict:
    """Every symbolic step of the chain, with its negative control."""
    ids = {"kv": symbolic.kv_memory(d=2, n=2), "static": symbolic.static_query_absorbed(d=2, n=1),
           "rank1": symbolic.rank1_bilinear(d=2, n=2), "exchange": symbolic.exchange_iff_linear(),
           **{f"symmetric-{k}": v for k, v in symbolic.symmetric_invariance().items()}}
    counter = {a: symbolic.exchange_counterexample(a) for a in symbolic.ACTIVATIONS}
    proved_scaling = {a: {s: symbolic.inverse_scaling_holds(a, s) for s in ("positive", "negative")}
                      for a in symbolic.ACTIVATIONS}
    return {"identities": ids, "counterexamples": counter, "inverse_scaling": proved_scaling}


def alphas(n_alpha: int) -> np.ndarray:
    """Both signs, |α| in [1/4, 4], geometrically spaced."""
    grid = np.geomspace(0.25, 4, n_alpha // 2)
    return np.concatenate([-grid[::-1], grid])


@timing.timed("numerical_checks")
def numerical_checks(S: dict) -> dict:
    """The statements on torch modules in float64: relative output change of random gated and
    symmetric MLPs under exchange and inverse scaling; the reductions of §4 (each against an
    independent computation, and a case that must differ)."""
    torch.set_default_dtype(torch.float64)
    try:
        d, n = S["d_model"], S["d_hidden"]
        torch.manual_seed(S["seed"])
        x = torch.randn(S["n_inputs"], d)
        al = alphas(S["n_alpha"])

        def make(cls, act, **kw):
            torch.manual_seed(S["seed"] + 1)  # the same weights for every σ
            return cls(d, n, act=act, **kw)

        out = {"alphas": al.tolist(), "exchange_error_gated": {}, "inverse_error_gated": {},
               "exchange_error_symmetric": {}, "inverse_error_symmetric": {}}
        for a in bilinear.ACTIVATIONS:
            g, s = make(bilinear.GatedMLP, a), make(bilinear.SymmetricBilinearMLP, a)
            out["exchange_error_gated"][a] = bilinear.relative_error(g, bilinear.exchanged(g), x)
            out["exchange_error_symmetric"][a] = bilinear.relative_error(s, bilinear.exchanged(s), x)
            out["inverse_error_gated"][a] = [
                bilinear.relative_error(g, bilinear.inverse_scaled(g, v), x) for v in al.tolist()]
            out["inverse_error_symmetric"][a] = max(
                bilinear.relative_error(s, bilinear.inverse_scaled(s, v), x) for v in al.tolist())

        def max_abs(f, g):
            with torch.no_grad():
                return float((f(x) - g(x)).abs().max())

        torch.manual_seed(S["seed"] + 2)
        sym = bilinear.SymmetricBilinearMLP(d, n, act="silu")
        rank1 = bilinear.RankRBilinearMLP(d, n, rank=1, act="silu")
        rank1.load_state_dict(sym.state_dict())
        rank2 = bilinear.RankRBilinearMLP(d, n, rank=2, act="silu")  # control: must differ
        with torch.no_grad():
            rank2.q.weight.view(n, 2, d)[:, 0].copy_(sym.q.weight)
            rank2.k.weight.view(n, 2, d)[:, 0].copy_(sym.k.weight)
            rank2.v.weight.copy_(sym.v.weight)
        rank_r = bilinear.RankRBilinearMLP(d, n, rank=S["rank"], act="gelu")
        # eq. (3) with A_j = q_jᵀ k_j, computed from the symmetric module's weights: x A_j xᵀ
        # by einsum, not as the product (x·q_j)(x·k_j) the modules compute
        eq3_sym = bilinear.BilinearAttentionMLP.from_low_rank(sym)
        eq3_r = bilinear.BilinearAttentionMLP.from_low_rank(rank_r)
        eq3_wrong = bilinear.BilinearAttentionMLP.from_low_rank(rank_r)
        with torch.no_grad():
            eq3_wrong.A.transpose_(-1, -2).mul_(-1)  # control: A_j → −A_jᵀ must differ
        out["reductions"] = {
            "rank1_vs_eq3_of_symmetric": max_abs(rank1, eq3_sym),
            "symmetric_vs_eq3": max_abs(sym, eq3_sym),
            "rankr_vs_eq3": max_abs(rank_r, eq3_r),
            "control_rank2_vs_symmetric": max_abs(rank2, sym),
            "control_rankr_vs_wrong_eq3": max_abs(rank_r, eq3_wrong),
        }
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaMLP

        config = LlamaConfig(hidden_size=d, intermediate_size=n, hidden_act="silu",
                             num_attention_heads=1, num_key_value_heads=1)
        llama = LlamaMLP(config).to(torch.float64)
        ours = bilinear.GatedMLP(d, n, act="silu")
        with torch.no_grad():
            ours.q.weight.copy_(llama.gate_proj.weight)
            ours.k.weight.copy_(llama.up_proj.weight)
            ours.v.weight.copy_(llama.down_proj.weight)
        out["reductions"]["gated_vs_llama_mlp"] = max_abs(ours, llama)
        return out
    finally:
        torch.set_default_dtype(torch.float32)


def figures_from(derived: dict, numeric: dict) -> dict:
    """The results file's figures: proofs, their controls, counterexamples, numerical checks."""
    ids = derived["identities"]
    return {
        "proofs": {k: bool(v.holds) for k, v in ids.items()},
        "proof_controls_rejected": {k: bool(symbolic.rejects_perturbation(v))
                                    for k, v in ids.items()},
        "exchange_counterexamples": {a: None if c is None else c.numeric
                                     for a, c in derived["counterexamples"].items()},
        "inverse_scaling_proved": derived["inverse_scaling"],
        **numeric,
    }


# ------------------------------------------------------------------ the page


def scale(S: dict) -> dict:
    """The paper's scale beside this build's, for `pages.scale_box`."""
    return {"what is tested": ("a chain of derivations; no experiment",
                               "the same derivations in sympy, then float64 torch modules"),
            "sizes": ("—", f"d = {S['d_model']}, {S['d_hidden']} hidden units, "
                           f"{S['n_inputs']:,} Gaussian inputs, {S['n_alpha']} values of α")}


def show(identity) -> None:
    """An identity on the page: whether sympy reduced lhs − rhs to zero, whether it rejects a
    perturbed right side (the negative control), and lhs = rhs."""
    from IPython.display import Markdown, Math, display

    display(Markdown(f"sympy reduces lhs − rhs to zero: **{identity.holds}**; with one symbol of "
                     f"the right side doubled it does not: "
                     f"**{symbolic.rejects_perturbation(identity)}**"))
    display(Math(identity.latex()))


def counterexample_table(D: dict) -> pd.DataFrame:
    return pd.DataFrame([{"activation": a,
                          "(a, b)": "—" if ce is None else (ce.point["a"], ce.point["b"]),
                          "σ(a)·b − σ(b)·a, exact": "—" if ce is None else sp.sstr(ce.value),
                          "value": None if ce is None else ce.numeric}
                         for a, ce in D["counterexamples"].items()]).set_index("activation")


def inverse_scaling_table(D: dict) -> pd.DataFrame:
    rows = {}
    for name, proved in D["inverse_scaling"].items():
        rows[name] = {"invariant, all α > 0": proved["positive"],
                      "invariant, all α < 0": proved["negative"]}
        for alpha in (2, -1):
            ce = symbolic.inverse_scaling_counterexample(name, alpha)
            rows[name][f"residual at α = {alpha}"] = ("—" if ce is None else
                                                      f"a = {ce.point['a']}: {ce.numeric:+.3f}")
    return pd.DataFrame(rows).T


def breaking_curves(F: dict) -> tuple:
    """The arguments of `plots.symmetry_breaking`: α, inverse-scaling and exchange errors per
    activation, with the symmetric form's largest as a reference."""
    inverse = dict(F["inverse_error_gated"])
    inverse["symmetric"] = [max(F["inverse_error_symmetric"].values())] * len(F["alphas"])
    exchange = dict(F["exchange_error_gated"])
    exchange["symmetric"] = max(F["exchange_error_symmetric"].values())
    return F["alphas"], inverse, exchange


def reductions_table(numeric: dict) -> pd.DataFrame:
    return pd.Series(numeric["reductions"], name="max |Δ|").to_frame()


def glue() -> dict:
    return {"zero": f"{ZERO:.0e}", "broken": f"{BROKEN:.0e}"}


# ------------------------------------------------------------------ claims


def _derived(cid, F, proof_keys, checks, controls, measured):
    proved = all(F["proofs"][k] for k in proof_keys)
    controls = {**{f"perturbed {k}": F["proof_controls_rejected"][k] for k in proof_keys},
                **controls}
    return decided(cid, derivation(proved, checks, controls), measured=measured,
                   control="a perturbed statement the checker must reject"
                   + (", and a case that must break" if len(controls) > len(proof_keys) else ""),
                   kind="derivation", obtained="derived", scale="sympy; float64 torch modules",
                   needs=NEEDS)


def claim_kv_memory(F, S) -> Claim:
    """P1 eq. (1): "MLP(x) = σ(x W1ᵀ) W2 = Σ_j σ(x·k_j) v_j" — a key-value memory."""
    return _derived("P1.kv-memory", F, ["kv"], {}, {},
                    f"sympy proves the identity: {F['proofs']['kv']}; a perturbed version is "
                    f"rejected: {F['proof_controls_rejected']['kv']}")


def claim_static_query(F, S) -> Claim:
    """P1 eq. (2): "a static query is absorbed into the keys": σ(xQKᵀ) = σ(xK'ᵀ), K' = KQᵀ."""
    return _derived("P1.static-query", F, ["static"], {}, {},
                    f"sympy proves the identity: {F['proofs']['static']}; a perturbed version is "
                    f"rejected: {F['proof_controls_rejected']['static']}")


def claim_rank1(F, S) -> Claim:
    """P1 eq. (3)→(4): "at rank 1, Q_j K_jᵀ ≈ q_jᵀ k_j gives σ((xQᵀ) ⊙ (xKᵀ))V"."""
    r = F["reductions"]
    return _derived(
        "P1.rank1", F, ["rank1"], {"symmetric module = eq. (3)": r["symmetric_vs_eq3"] < REDUCTION_TOL},
        {"eq. (3) with A_j → −A_jᵀ differs": r["control_rankr_vs_wrong_eq3"] > BROKEN},
        f"sympy: {F['proofs']['rank1']}; symmetric module vs eq. (3) by einsum: max |Δ| "
        f"{r['symmetric_vs_eq3']:.1e}; control (A_j → −A_jᵀ): {r['control_rankr_vs_wrong_eq3']:.2g}")


def claim_exchange_iff_linear(F, S) -> Claim:
    """P1: "the gated form is exchange-symmetric iff σ is linear" (σ(a)b = σ(b)a ∀a,b ⇔ σ = cz)."""
    e = F["exchange_error_gated"]
    broken = min(e[a] for a in NONLINEAR)
    return _derived(
        "P1.exchange-iff-linear", F, ["exchange"], {"linear gate invariant": e["linear"] < ZERO},
        {"nonlinear gates change": broken > BROKEN},
        f"proved with sympy: {F['proofs']['exchange']}; exchange changes a linear-gate MLP by "
        f"{e['linear']:.1e}, a ReLU/GELU/SiLU one by ≥ {broken:.2g}")


def claim_counterexamples(F, S) -> Claim:
    """P1: "ReLU, GELU and SiLU are not linear, so the gated form breaks exchange symmetry"."""
    found, e = F["exchange_counterexamples"], F["exchange_error_gated"]
    exact = {a: found[a] is not None and found[a] != 0 for a in NONLINEAR}
    checks = {f"{a}: exact counterexample": exact[a] for a in NONLINEAR}
    checks.update({f"{a}: output changes": e[a] > BROKEN for a in NONLINEAR})
    controls = {"linear σ: no counterexample": found["linear"] is None,
                "linear σ: output unchanged": e["linear"] < ZERO}
    dec = derivation(True, checks, controls)
    return decided("P1.counterexamples", dec,
                   measured="exact residuals σ(a)b − σ(b)a: " + ", ".join(
                       f"{a} {found[a]:.3g}" for a in NONLINEAR if found[a] is not None)
                   + "; relative output change on q↔k: "
                   + ", ".join(f"{a} {e[a]:.2g}" for a in NONLINEAR),
                   control="the linear σ: no counterexample on the grid, output unchanged",
                   kind="derivation", obtained="derived", scale="exact rationals; float64",
                   needs=NEEDS)


def claim_inverse_scaling(F, S) -> Claim:
    """P1: "inverse scaling q→αq, k→k/α is kept only for positively homogeneous σ" — ReLU for
    α > 0; SiLU and GELU break it."""
    p = F["inverse_scaling_proved"]
    al = np.array(F["alphas"])
    inv = {a: np.array(v) for a, v in F["inverse_error_gated"].items()}
    pos = {a: float(v[al > 0].max()) for a, v in inv.items()}
    neg = {a: float(v[al < 0].max()) for a, v in inv.items()}
    checks = {"ReLU α>0 proved": p["relu"]["positive"], "ReLU α<0 disproved": not p["relu"]["negative"],
              "GELU, SiLU α>0 disproved": not (p["gelu"]["positive"] or p["silu"]["positive"]),
              "ReLU α>0 numerically invariant": pos["relu"] < ZERO}
    controls = {"ReLU α<0 changes": neg["relu"] > BROKEN,
                "GELU, SiLU α>0 change": min(pos["gelu"], pos["silu"]) > BROKEN}
    return decided("P1.inverse-scaling", derivation(True, checks, controls),
                   measured=f"proved: ReLU α>0 {p['relu']['positive']}, α<0 {p['relu']['negative']}; "
                   f"GELU α>0 {p['gelu']['positive']}, SiLU α>0 {p['silu']['positive']}; max "
                   "relative change for α>0: " + ", ".join(f"{a} {v:.2g}" for a, v in pos.items()),
                   control="α < 0 for ReLU, and the smooth σ, must break it",
                   kind="derivation", obtained="derived", scale="sympy by cases; float64",
                   needs=NEEDS)


def claim_symmetric_invariant(F, S) -> Claim:
    """P1: "the symmetric rank-1 form keeps exchange and inverse scaling for every σ"."""
    worst = max(max(F["exchange_error_symmetric"].values()),
                max(F["inverse_error_symmetric"].values()))
    gated_silu = F["exchange_error_gated"]["silu"]
    return _derived(
        "P1.symmetric-invariant", F, ["symmetric-exchange", "symmetric-inverse-scaling"],
        {"symmetric modules invariant": worst < ZERO},
        {"gated SiLU, same check, changes": gated_silu > BROKEN},
        f"proved for an undefined σ: {F['proofs']['symmetric-exchange'] and F['proofs']['symmetric-inverse-scaling']}; "
        f"max relative change over σ and α: {worst:.1e} (gated SiLU under exchange: {gated_silu:.2g})")


def claim_rank_r(F, S) -> Claim:
    """P1 §4: "a rank-r bilinear generalisation ... reduces to the symmetric form at r = 1"."""
    r = F["reductions"]
    dec = derivation(True, {"rank-1 = eq. (3) of the symmetric form": r["rank1_vs_eq3_of_symmetric"] < REDUCTION_TOL,
                            "rank-r = eq. (3) with A_j = Σ_s q_jsᵀk_js": r["rankr_vs_eq3"] < REDUCTION_TOL},
                     {"rank 2 differs from the symmetric form": r["control_rank2_vs_symmetric"] > BROKEN})
    return decided("P1.rank-r", dec,
                   measured=f"rank-1 module vs eq. (3) built from the symmetric module: max |Δ| "
                   f"{r['rank1_vs_eq3_of_symmetric']:.1e}; rank-{S['rank']} vs eq. (3): "
                   f"{r['rankr_vs_eq3']:.1e}; control, rank 2 vs symmetric: "
                   f"{r['control_rank2_vs_symmetric']:.2g}",
                   control="a rank-2 module sharing the first rank's weights must differ",
                   kind="derivation", obtained="derived", scale="float64 torch modules",
                   needs=NEEDS, note="the book's own module; the paper only outlines it")


CLAIMS = (claim_kv_memory, claim_static_query, claim_rank1, claim_exchange_iff_linear,
          claim_counterexamples, claim_inverse_scaling, claim_symmetric_invariant, claim_rank_r)


def claims(F: dict, S: dict) -> list[Claim]:
    return [c(F, S) for c in CLAIMS]
