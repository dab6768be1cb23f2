"""Chapter 06's page: its tables, figures and the numbers glued into its prose."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from nlbudget import plots
from nlbudget.chapters.ch06_preprojection_probes.study import MIN_CORRECT
from nlbudget.formatting import interval, pct


def scale(S: dict) -> dict:
    """The paper's scale beside this build's, for `pages.scale_box`."""
    return {
        "models": ("Pythia-160M, Pythia-410M", f"{S['models']} (de-quantized Q4_1, {S['dtype']}); "
                   "the Pythia-style model trained in chapter 03"),
        "module sizes": ("not in the summary", f"k = {S['k']} (SmolLM2), {S['pair_k']} "
                         "(Pythia-style)"),
        "training": ("not in the summary", f"{S['steps']} steps × {S['batch_size']} × "
                     f"{S['window']} tokens (SmolLM2); {S['pair_probe_steps']} × "
                     f"{S['pair_probe_batch']} × {S['pair_context']} (Pythia-style); 1 seed"),
        "baseline": ("the frozen base", "LoRA at the same trainable budget, and the frozen base"),
        "last-word items": ("LAMBADA test set (5,153)", f"{S['lastword_items']} items from "
                            f"{S['lastword']}")}


def comparison_table(F: dict) -> pd.DataFrame:
    """Each variant: trainable parameters, perplexity and last-word accuracy, against the base
    and against LoRA with paired intervals."""
    rows = []
    for m, st in F["studies"].items():
        for v, r in st.items():
            vb, vl = r.get("vs_base"), r.get("vs_lora")
            ci = vl["acc_diff_ci"] if vl else (None, None)
            rows.append({
                "model": m, "variant": v, "trainable": f"{r['trainable']:,}",
                "PPL": f"{r['ppl']:.2f}",
                "PPL vs base": f"{pct(vb['ppl_change'])} {interval(*vb['ppl_ci'])}"
                if vb else "",
                "PPL vs LoRA": f"{pct(vl['ppl_change'])} {interval(*vl['ppl_ci'])}"
                if vl else "",
                "last-word acc.": f"{r['accuracy']:.1%} ({r['correct']}/{F['n_items']})",
                "acc. vs LoRA (pp)": f"{100 * vl['acc_diff']:+.1f} [{100 * ci[0]:+.1f}, "
                f"{100 * ci[1]:+.1f}]" if ci[0] is not None else ""})
    return pd.DataFrame(rows).set_index(["model", "variant"])


def cache_table(F: dict):
    return pd.DataFrame([{
        "model": m, "variant": v, "cache bytes": r["cache_check"]["bytes"],
        "cached vs uncached (rel.)": r["cache_check"]["max_abs"] / r["cache_check"]["scale"],
        "control: vs base model (rel.)": r["cache_check"].get("reference_max_abs", np.nan)
        / r["cache_check"]["scale"]}
        for m, st in F["studies"].items() for v, r in st.items()]
    ).set_index(["model", "variant"]).style.format(
        {"cached vs uncached (rel.)": "{:.1e}", "control: vs base model (rel.)": "{:.1e}"})


def decode_table(F: dict) -> pd.DataFrame:
    return pd.DataFrame([{"model": m, "batch": b, "base ms/token": 1e3 * t["base"],
                          "pre+skip ms/token": 1e3 * t["pre+skip"],
                          "overhead": f"{t['pre+skip'] / t['base'] - 1:+.1%}"}
                         for m, dm in F["decode"].items() for b, t in dm.items()]
                        ).set_index(["model", "batch"]).round(2)


def glue(F: dict) -> dict:
    """The numbers the prose quotes."""
    st = F["studies"][next(iter(F["studies"]))]
    vb, vl = st["pre+skip"]["vs_base"], st["pre+skip"]["vs_lora"]
    gates = [u["gate"] for u in st["pre+skip"]["skip_use"]]
    return {"min_correct": str(MIN_CORRECT), "smol_vs_base": pct(vb["ppl_change"]),
            "smol_lora_vs_base": pct(st["lora"]["vs_base"]["ppl_change"]),
            "smol_vs_lora": f"{pct(vl['ppl_change'])} {interval(*vl['ppl_ci'])}",
            "gate_range": f"{min(gates):.3f}–{max(gates):.3f}",
            "train_tokens": f"{st['pre+skip']['train_tokens']:,}", **_pair_glue(F)}


def _pair_glue(F: dict) -> dict:
    """The matched pair's probes (the second model, where the profile has it)."""
    names = list(F["studies"])
    if len(names) < 2:
        return {"pair_vs_base": "not run", "pair_lora_vs_base": "not run",
                "pair_train_tokens": "no"}
    st = F["studies"][names[-1]]
    return {"pair_vs_base": f"{pct(st['pre+skip']['vs_base']['ppl_change'])} "
                            f"{interval(*st['pre+skip']['vs_base']['ppl_ci'])}",
            "pair_lora_vs_base": pct(st["lora"]["vs_base"]["ppl_change"]),
            "pair_train_tokens": f"{st['pre+skip']['train_tokens']:,}"}


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
        plots.percent_axis(ax)
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
