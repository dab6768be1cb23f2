"""Chapter 05's page: its tables, figures and the numbers glued into its prose."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from nlbudget import tasks
from nlbudget.chapters.ch05_fixed_universal.claims import REF_MIN, SEARCH_EXACT, TOL, _acc
from nlbudget.chapters.ch05_fixed_universal.study import SETTING_KW, SHAPES, task_names


def scale(S: dict) -> dict:
    """The paper's scale beside this build's, for `pages.scale_box`."""
    return {
        "construction": ("Theorem 3.1, m = O(HLd)", "the book's own exact construction, "
                         f"{len(SHAPES)} shapes, float64"),
        "tasks": ("Dyck-1, k-hop induction (sizes not in the summary)",
                  f"Dyck-1 length {S['dyck_len']}; k-hop length {S['hop_len']}, k = {S['hops']}, "
                  f"vocabulary {S['hop_vocab']}"),
        "models": ("not in the summary", f"H = {S['heads']}, L = {S['layers']}, d = {S['d']}, "
                   f"random width m = {S['m']}"),
        "training": ("not in the summary", f"{S['steps']} steps × {S['batch']} sequences, "
                     f"Dyck-1 {S['seeds']} seed(s); k-hop {S['hop_steps']:,} steps, and on, "
                     f"{S['hop_steps']:,} at a time, until held-out accuracy stalls (at most "
                     f"{S['hop_max_steps']:,}), {S['hop_seeds']} seed(s) (hop 1's random UT with and "
                     f"without MLPs: {S['power_seeds']}, by a power calculation); random "
                     f"universality {S['ru_seeds']} seed(s)"),
        "Dyck-1 test set": ("not in the summary", f"strings held out from training "
                            f"({tasks.HOLDOUT:.0%} of all strings, by a fixed hash)")}


def construction_table(F: dict):
    return pd.DataFrame(F["construction"]).style.format(
        {"max |UT − target|": "{:.1e}", "random program: max |UT − target|": "{:.2g}"})


def dyck_examples(n: int = 6, length: int = 10) -> pd.DataFrame:
    x, y = tasks.dyck(n, length, seed=1)
    return pd.DataFrame({"Dyck-1 string": ["".join("()"[c] for c in r) for r in x.tolist()],
                         "balanced": y.tolist()})


def glue(F: dict, S: dict) -> dict:
    """The numbers the prose quotes."""
    best = {n: pd.DataFrame([r for r in v if not r["degenerate"]]).groupby("m")["rel_error"]
            .mean().min() for n, v in F["random_universality"].items()}
    hop = task_names(S)[-1]
    ref = max(np.mean(_acc(F, hop, "trained", s)) for s in SETTING_KW)
    exact = F.get("random_universality_exact") or {}

    def solved(planted):
        return "; ".join(f"{n} at m = {runs[0]['m']}: " + ", ".join(
            f"{r['rel_error']:.1e}" for r in runs if r["planted"] == planted)
            for n, runs in exact.items()) or "not run"

    steps = [r["steps"] for r in F["runs"] if r.get("steps") and r["task"] == "hop1"
             and r["kind"] == "random" and r["setting"] == "+residual+LN"]
    power = next(iter((F.get("power") or {}).values()), None)
    spread = "n/a"
    if power:  # the spread of the per-seed gain the run saw, against its pilot's
        arms = [{r["seed"]: r["acc_train_len"] for r in F["runs"] if (r["task"], r["kind"],
                 r["setting"]) == (power["task"], "random", a)} for a in power["arms"]]
        gain = [arms[1][k] - arms[0][k] for k in sorted(set(arms[0]) & set(arms[1]))]
        spread = f"{100 * np.std(gain, ddof=1):.1f} points" if len(gain) > 1 else "n/a"
    return {"tol": f"{TOL:.0%}", "ref_min": f"{REF_MIN:.0%}",
            "khop_steps": f"{min(steps):,}–{max(steps):,}" if steps else "n/a",
            "power_seeds": str(power["seeds"]) if power else "n/a",
            "power_pilot_sd": f"{100 * power['pilot_sd']:.1f} points" if power else "n/a",
            "power_seen_sd": spread,
            "ru_best": "; ".join(f"{n}: {v:.3f}" for n, v in best.items()),
            "ru_exact": solved(False), "ru_planted": solved(True),
            "hop_ref": f"{ref:.0%}", "hop": hop}


def accuracy_table(F: dict) -> pd.DataFrame:
    """Mean accuracies by task, setting and kind (and the steps each trained, the seeds run),
    beside the paper's figures."""
    runs = pd.DataFrame(F["runs"])
    if "steps" not in runs:  # results from before the runs recorded their steps
        runs["steps"] = np.nan
    table = runs.groupby(["task", "setting", "kind"]).agg(
        width=("width", "mean"), acc_train_len=("acc_train_len", "mean"),
        acc_longer=("acc_longer", "mean"), steps=("steps", "mean"),
        seeds=("seed", "count")).unstack("kind")
    paper = {"dyck": {"attention-only": "sparse 100%, random 94.4%"},
             "hop": {"attention-only": "~30–40% (trained ~99%)",
                     "+residual+LN": "sparse 100%, random 85.7–96.1%",
                     "+residual+LN+MLP": "random improves"}}
    table[("paper (summary)", "")] = [paper["dyck" if t == "dyck" else "hop"].get(s, "")
                                      for t, s in table.index]
    return table


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


def exact_solve(exact: dict):
    """The exact solve's training relative error after each Levenberg–Marquardt iteration, per
    target and seed, and for the program planted in the same UT (the solver's control)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (name, runs) in enumerate(exact.items()):
        for r in runs:
            ax.semilogy(range(1, len(r["history"]) + 1), r["history"], ":" if r["planted"] else "-",
                        color=f"C{i}", lw=1.2, label=f"{name}, m = {r['m']}, "
                        + ("planted program" if r["planted"] else f"seed {r['seed']}"))
    ax.axhline(SEARCH_EXACT, color="0.5", lw=0.8, ls="--", label="the rule's exact level")
    ax.set_xlabel("Levenberg–Marquardt iteration")
    ax.set_ylabel("training relative error")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
