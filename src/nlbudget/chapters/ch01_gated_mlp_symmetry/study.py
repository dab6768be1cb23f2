"""Chapter 01's settings and the experiment's phases (the notebook runs them)."""

from __future__ import annotations

import numpy as np
import torch

from nlbudget import bilinear, symbolic, timing

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
