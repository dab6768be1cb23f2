"""Chapter 01's claims: its rules, reading stored figures only (a changed rule
re-judges the stored figures, `nlbudget judge 01`, and reruns nothing)."""

from __future__ import annotations

import numpy as np

from nlbudget.verdicts.claims import BOOKS_CONSTRUCTION, Claim, decided, derivation

#: float64: a relative change below ZERO is "invariant", above BROKEN is "broken".
ZERO, BROKEN = 1e-12, 1e-3

#: eq. (3) computed from A_j = Σ_s q_js ᵀ k_js agrees with the rank-r module to this.
REDUCTION_TOL = 1e-10

NONLINEAR = ("relu", "gelu", "silu")

NEEDS = "a check whose negative control fails as it must (as it stands the check cannot tell)"


#: What a row can show (`claims.SHOWS`): a sympy identity over matrices of one size is verified
#: at that size (chapter 01's study picks d and n), not proved for every size; a statement over
#: scalars (per hidden unit), or a counterexample, is proved.
AT_ONE_SIZE, PROVED = "verified at the sizes checked", "proved"


def _derived(cid, F, proof_keys, checks, controls, measured, shows=PROVED):
    proved = all(F["proofs"][k] for k in proof_keys)
    controls = {**{f"perturbed {k}": F["proof_controls_rejected"][k] for k in proof_keys},
                **controls}
    return decided(cid, derivation(proved, checks, controls), measured=measured,
                   control="a perturbed statement the checker must reject"
                   + (", and a case that must break" if len(controls) > len(proof_keys) else ""),
                   kind="derivation", obtained="derived",
                   scale="sympy; float64 torch modules" if checks else "sympy",
                   needs=NEEDS, shows=shows)


def claim_kv_memory(F, S) -> Claim:
    """P1 eq. (1): "MLP(x) = σ(x W1ᵀ) W2 = Σ_j σ(x·k_j) v_j" — a key-value memory."""
    return _derived("P1.kv-memory", F, ["kv"], {}, {},
                    f"sympy verifies the identity over symbolic matrices of one size: "
                    f"{F['proofs']['kv']}; a perturbed version is rejected: "
                    f"{F['proof_controls_rejected']['kv']}", AT_ONE_SIZE)


def claim_static_query(F, S) -> Claim:
    """P1 eq. (2): "a static query is absorbed into the keys": σ(xQKᵀ) = σ(xK'ᵀ), K' = KQᵀ."""
    return _derived("P1.static-query", F, ["static"], {}, {},
                    f"sympy verifies the identity over symbolic matrices of one size: "
                    f"{F['proofs']['static']}; a perturbed version is rejected: "
                    f"{F['proof_controls_rejected']['static']}", AT_ONE_SIZE)


def claim_rank1(F, S) -> Claim:
    """P1 eq. (3)→(4): "at rank 1, Q_j K_jᵀ ≈ q_jᵀ k_j gives σ((xQᵀ) ⊙ (xKᵀ))V"."""
    r = F["reductions"]
    return _derived(
        "P1.rank1", F, ["rank1"], {"symmetric module = eq. (3)": r["symmetric_vs_eq3"] < REDUCTION_TOL},
        {"eq. (3) with A_j → −A_jᵀ differs": r["control_rankr_vs_wrong_eq3"] > BROKEN},
        f"sympy over symbolic matrices of one size: {F['proofs']['rank1']}; symmetric module vs "
        f"eq. (3) by einsum: max |Δ| {r['symmetric_vs_eq3']:.1e}; control (A_j → −A_jᵀ): "
        f"{r['control_rankr_vs_wrong_eq3']:.2g}", AT_ONE_SIZE)


def claim_exchange_iff_linear(F, S) -> Claim:
    """P1: "the gated form is exchange-symmetric iff σ is linear" (σ(a)b = σ(b)a ∀a,b ⇔ σ = cz)."""
    e = F["exchange_error_gated"]
    broken = min(e[a] for a in NONLINEAR)
    return _derived(
        "P1.exchange-iff-linear", F, ["exchange"], {"linear gate invariant": e["linear"] < ZERO},
        {"nonlinear gates change": broken > BROKEN},
        f"every algebraic step checked by sympy (the instance b = 1 of the claim is the "
        f"reader's step): {F['proofs']['exchange']}; exchange changes a linear-gate MLP by "
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
    return decided("P1.counterexamples", dec, shows=PROVED,
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
    return decided("P1.inverse-scaling", derivation(True, checks, controls), shows=PROVED,
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
    """P1 §4: "a rank-r bilinear generalisation ... reduces to the symmetric form at r = 1".
    The paper only outlines the rank-r form; the module checked is the book's own, and there is
    no symbolic check (`derivation(None, …)`): the paper's claim reads `not run`, the book's
    module's numerical check is the row's `construction`."""
    r = F["reductions"]
    dec = derivation(None, {"rank-1 = eq. (3) of the symmetric form": r["rank1_vs_eq3_of_symmetric"] < REDUCTION_TOL,
                            "rank-r = eq. (3) with A_j = Σ_s q_jsᵀk_js": r["rankr_vs_eq3"] < REDUCTION_TOL},
                     {"rank 2 differs from the symmetric form": r["control_rank2_vs_symmetric"] > BROKEN})
    return decided("P1.rank-r", dec,
                   measured=f"rank-1 module vs eq. (3) built from the symmetric module: max |Δ| "
                   f"{r['rank1_vs_eq3_of_symmetric']:.1e}; rank-{S['rank']} vs eq. (3): "
                   f"{r['rankr_vs_eq3']:.1e}; control, rank 2 vs symmetric: "
                   f"{r['control_rank2_vs_symmetric']:.2g}",
                   control="a rank-2 module sharing the first rank's weights must differ",
                   kind="derivation", obtained="derived", scale="float64 torch modules",
                   needs="the paper's rank-r form, which its Section 4 only outlines (no "
                   "definition to check against); a symbolic check of the reduction",
                   note="the book's own module; the paper only outlines it",
                   shows=BOOKS_CONSTRUCTION)


CLAIMS = (claim_kv_memory, claim_static_query, claim_rank1, claim_exchange_iff_linear,
          claim_counterexamples, claim_inverse_scaling, claim_symmetric_invariant, claim_rank_r)


def claims(F: dict, S: dict) -> list[Claim]:
    return [c(F, S) for c in CLAIMS]
