"""Chapter 01's page: its tables, figures and the numbers glued into its prose."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import sympy as sp

from nlbudget import plots, symbolic
from nlbudget.chapters.ch01_gated_mlp_symmetry.claims import BROKEN, ZERO


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


def symmetry_breaking(alphas, inverse_errors: dict, exchange_errors: dict):
    """Left: relative output change of the gated form under q → αq, k → k/α, per activation
    (and the symmetric form); right: the same under exchange q ↔ k."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6), gridspec_kw={"width_ratios": [2.2, 1]})
    alphas = np.asarray(alphas, dtype=float)
    neg = alphas < 0  # draw α < 0 and α > 0 as separate pieces: α = 0 is not a scaling
    for name, errs in inverse_errors.items():
        errs = np.asarray(errs, dtype=float)
        style = dict(color=plots.COLORS.get(name), lw=1.8, ls="--" if name == "symmetric" else "-")
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
            color=[plots.COLORS.get(n, "grey") for n in names])
    ax2.set_title("exchange q ↔ k")
    ax2.set_ylabel("relative output change")
    ax2.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return fig
