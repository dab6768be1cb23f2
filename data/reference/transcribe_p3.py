"""Transcribe P3's per-layer all-linear costs, gate results, token-vs-context AUCs,
compound-gating results, fine-tuning runs and no-fly tokens from the author's result files.

Source: P. Balogh, "Half the Nonlinearity Is Wasted" (arXiv 2603.03459), result files of the
author's repository pbalogh/half-the-nonlinearity (data/*.json, CC BY 4.0), as copied into
the workplace's shared/reference/half-the-nonlinearity/data/. Run once; the CSV it writes is
committed so the book never needs the source files.

    python data/reference/transcribe_p3.py ../shared/reference/half-the-nonlinearity/data
"""

import csv
import json
import sys
from pathlib import Path

FILES = {  # model -> (file, kind)
    "gpt2-medium": ("bootstrap_ci_gpt2_medium.json", "bootstrap"),
    "gpt2-large": ("scale_test_gpt2_large.json", "scale"),
    "pythia-160m": ("bootstrap_ci_EleutherAI_pythia_160m.json", "bootstrap"),
    "pythia-410m": ("bootstrap_ci_EleutherAI_pythia_410m.json", "bootstrap"),
    "pythia-1b": ("bootstrap_ci_EleutherAI_pythia_1b.json", "bootstrap"),
    "pythia-2.8b": ("scale_test_EleutherAI_pythia_2.8b.json", "scale"),
}
ARCH = {"gpt2": "sequential", "pythia": "parallel"}


def main(src: Path, out: Path):
    rows = []
    for model, (name, kind) in FILES.items():
        d = json.loads((src / name).read_text())
        n_layers = d.get("n_layers") or len(d["layers"])
        for key, layer in sorted(d["layers"].items(), key=lambda kv: int(kv[0])):
            if kind == "bootstrap":
                a = layer["all_linear"]
                cost, lo, hi = a["delta_pct"], a["delta_ci_lo"], a["delta_ci_hi"]
                base = d["baseline"]["ppl"]
            else:
                cost, lo, hi = layer["all_linear_delta_pct"], "", ""
                base = d["baseline_ppl"]
            rows.append({"model": model, "architecture": ARCH[model.split("-")[0]],
                         "layer": int(key), "n_layers": n_layers,
                         "relative_depth": round(int(key) / (n_layers - 1), 4),
                         "cost_pct": cost, "ci_lo_pct": lo, "ci_hi_pct": hi,
                         "baseline_ppl": base, "source": name})
    write(rows, out)
    gating(src, out.parent)
    evaluation_12k(src, out.parent)
    linear_probe(src, out.parent)
    gate_sizes(src, out.parent)
    residual_clusters(src, out.parent)
    forensics(src, out.parent)


#: GPT-2 Medium's sweep on the paper's own evaluation split: 12,000 tokens (tex line 127),
#: baseline 34.76 PPL (tex line 357); `bootstrap_ci_gpt2_medium.json` is a larger evaluation
#: (35,839 tokens, baseline 35.10). Its `best_gate` is one gate architecture (6,151 parameters)
#: at every layer, as in the larger file.
EVAL_12K = "bootstrap_ci_gpt2_medium_12k.json"


def evaluation_12k(src: Path, out: Path):
    d = json.loads((src / EVAL_12K).read_text())
    rows = []
    for key, layer in sorted(d["layers"].items(), key=lambda kv: int(kv[0])):
        a, g = layer["all_linear"], layer["best_gate"]
        rows.append({"model": "gpt2-medium", "layer": int(key), "n_layers": d["n_layers"],
                     "cost_pct": a["delta_pct"], "ci_lo_pct": a["delta_ci_lo"],
                     "ci_hi_pct": a["delta_ci_hi"],
                     "gate_pct": "" if g.get("skipped") else g["delta_pct"],
                     "routed_pct": "" if g.get("skipped") else g["pct_linear"],
                     "gate_params": "" if g.get("skipped") else g["params"],
                     "baseline_ppl": d["baseline"]["ppl"], "eval_tokens": d["baseline"]["n_tokens"],
                     "eval_docs": d["baseline"]["n_docs"], "source": EVAL_12K})
    write(rows, out / "p3_gpt2_medium_12k.csv")


#: `results_linear_probe.json` (GPT-2 Medium, 10,000 tokens per layer): a logistic-regression
#: and a one-hidden-layer probe on the MLP's input, predicting the author's "delta_method"
#: label: whether ‖MLP(x)‖ lies above its median (the author's script computes no linear fit for
#: it: the MLP output's magnitude stands in for its nonlinearity). The text reports none of it.
LINEAR_PROBE = "results_linear_probe.json"


def linear_probe(src: Path, out: Path):
    d = json.loads((src / LINEAR_PROBE).read_text())
    rows = [{"model": d["model"], "layer": int(k), "label": "norm of MLP(x) above its median",
             "n_samples": m["n_samples"], "class_balance": m["class_balance"],
             "linear_probe_auroc": round(m["linear_probe"]["auroc"], 4),
             "mlp_probe_auroc": round(m["mlp_probe"]["auroc"], 4), "source": LINEAR_PROBE}
            for k, v in sorted(d["layers"].items(), key=lambda kv: int(kv[0]))
            for m in (v["delta_method"],)]
    write(rows, out / "p3_linear_probe.csv")


#: The gate sizes the author compared, for "larger gates (up to 24K parameters) provide no
#: benefit" (tex line 319) and "at Pythia-2.8B scale the b=1 bottleneck gate wins at 15 of 31
#: layers" (tex line 204). tiny_gate_results.json: a linear (d+1) gate and ReLU-bottleneck gates
#: of b = 1–32 hidden units (up to 24,641 parameters) at two layers, each the best of three
#: trainings, evaluated on the same 15,000 WikiText-103 tokens; the author's script
#: (code/mlp0_tiny_gate.py) loads `gpt2` (GPT-2 small, d = 768: its 769 parameters are d+1),
#: not GPT-2 Medium. scale_test_*.json: at every layer the four gates of the paper's table (tex
#: lines 113–121): linear, b=1 (a one-unit ReLU bottleneck) and b=3 / b=6 (PCA to 6 / 12
#: dimensions, then a logistic: linear classifiers on fewer dimensions).
TINY_GATES = "tiny_gate_results.json"
SCALE_SWEEPS = {"gpt2-large": "scale_test_gpt2_large.json",
                "pythia-2.8b": "scale_test_EleutherAI_pythia_2.8b.json"}


def gate_sizes(src: Path, out: Path):
    d = json.loads((src / TINY_GATES).read_text())
    rows = [{"model": "gpt2", "layer": int(k.split("_")[1]),
             "gate": "linear" if g["bottleneck"] == 0 else f"b={g['bottleneck']}",
             "architecture": "linear" if g["bottleneck"] == 0 else "relu bottleneck",
             "params": g["params"], "delta_pct": g["delta_pct"], "routed_pct": g["pct_linear"],
             "source": TINY_GATES}
            for k, v in d.items() if k.startswith("layer_") for g in v]
    arch = {"linear": "linear", "b=1": "relu bottleneck", "b=3": "pca + logistic",
            "b=6": "pca + logistic"}
    for model, name in SCALE_SWEEPS.items():
        d = json.loads((src / name).read_text())
        for key, layer in sorted(d["layers"].items(), key=lambda kv: int(kv[0])):
            rows += [{"model": model, "layer": int(key), "gate": g["name"],
                      "architecture": arch[g["name"]], "params": g["params"],
                      "delta_pct": round(g["delta_pct"], 4), "routed_pct": round(g["pct_linear"], 2),
                      "source": name}
                     for g in layer["gates"] if g["name"] in arch]  # L0 of Pythia-2.8B: none
    # GPT-2 small's four gates at each of its 12 layers, from the run that then gated all 12 at
    # once (compound_gate_results.json): each layer's gates against each other
    d = json.loads((src / "compound_gate_results.json").read_text())
    rows += [{"model": "gpt2 (compound sweep)", "layer": int(k.split("_")[1]), "gate": g["name"],
              "architecture": arch[g["name"]], "params": g["params"],
              "delta_pct": g["delta_pct"], "routed_pct": g["pct_linear"],
              "source": "compound_gate_results.json"}
             for k, v in d.items() if k.startswith("layer_") for g in v["results"]
             if g["name"] in arch]
    write(rows, out / "p3_gate_sizes.csv")


#: GPT-2 Medium's residual-stream clusters (tex lines 292–305): 15,000 tokens a layer at L1,
#: L12 and L23, 20 k-means clusters each, with each cluster's δ percentiles (δ = L_lin − L_full
#: per token, the text's δ). No per-token δ is stored.
RESIDUAL_CLUSTERS = "residual_clusters_gpt2-medium.json"


def residual_clusters(src: Path, out: Path):
    d = json.loads((src / RESIDUAL_CLUSTERS).read_text())
    rows = [{"model": "gpt2-medium", "layer": int(key[1:]), "cluster": c["cluster"], "n": c["n"],
             "mean_delta": round(c["mean_delta"], 6), "median_delta": round(c["median_delta"], 6),
             "p10_delta": round(c["p10_delta"], 6), "p90_delta": round(c["p90_delta"], 6),
             "std_delta": round(c["std_delta"], 6), "source": RESIDUAL_CLUSTERS}
            for key, v in d.items() for c in v["clusters"]]
    write(rows, out / "p3_residual_clusters.csv")


#: GPT-2 Medium's token-feature regression of δ (tex lines 223–230: "50,000 tokens", "13
#: per-token features", R² at L1, L12, L23 and the function-word correlation): the file's token
#: count, sample count and feature count are kept, for the row to compare with the text's.
FORENSICS = "forensics_gpt2-medium.json"


def forensics(src: Path, out: Path):
    d = json.loads((src / FORENSICS).read_text())
    rows = [{"model": d["model"], "layer": x["layer"], "n_tokens": d["n_tokens"],
             "n_samples": x["regression"]["n_samples"],
             "n_features": len(x["regression"]["feature_importances"]),
             "r_squared": x["regression"]["r_squared"],
             "function_word_r": x["hypotheses"]["H3_function_word"]["correlation"],
             "source": FORENSICS} for x in d["per_layer"]]
    write(rows, out / "p3_forensics.csv")


def write(rows, out: Path):
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {out}")


def gating(src: Path, out: Path):
    """Per-layer best-gate results (GPT-2 Medium and the Pythias with bootstrap files), the
    token/context AUC table, and the compound runs."""
    rows = []
    for model, (name, kind) in FILES.items():
        if kind != "bootstrap":
            continue
        d = json.loads((src / name).read_text())
        for key, layer in sorted(d["layers"].items(), key=lambda kv: int(kv[0])):
            g = layer["best_gate"]
            if g.get("skipped"):  # GPT-2 Medium L0: no gate trained (all-linear +22780%)
                continue
            rows.append({"model": model, "layer": int(key), "n_layers": d["n_layers"],
                         "all_linear_pct": layer["all_linear"]["delta_pct"],
                         "gate_pct": g["delta_pct"], "gate_ci_lo_pct": g["delta_ci_lo"],
                         "gate_ci_hi_pct": g["delta_ci_hi"], "routed_pct": g["pct_linear"],
                         "gate_params": g["params"], "source": name})
    write(rows, out / "p3_gate_costs.csv")
    rows = []
    for model, name in (("gpt2-medium", "context_vs_token_gpt2-medium.json"),
                        ("pythia-410m", "context_vs_token_EleutherAI_pythia-410m.json")):
        d = json.loads((src / name).read_text())
        for x in d["per_layer"]:
            a = x["gates_median"]
            rows.append({"model": model, "layer": x["layer"], "full": a["full"]["auc"],
                         "token_only": a["token_only"]["auc"],
                         "context_only": a["context_only"]["auc"],
                         "cos_token_context": x["decomposition"]["cos_token_context_mean"],
                         "n_tokens": x["n_tokens"], "gate_params": a["full"]["n_params"],
                         "labels": "median δ (gates_median)", "source": name})
    write(rows, out / "p3_context_vs_token.csv")
    rows = []
    for model, name in (("gpt2-medium", "compound_ci_gpt2_medium.json"),
                        ("pythia-1b", "compound_ci_EleutherAI_pythia_1b.json")):
        d = json.loads((src / name).read_text())
        c = d["compound_gated"]
        rows.append({"model": model, "gated_layers": len(d["gated_layers"]),
                     "n_layers": d["n_layers"], "baseline_ppl": d["baseline"]["ppl"],
                     "all_linear_pct": d["all_linear_compound"]["delta_pct"],
                     "gated_pct": c["delta_pct"], "gated_ci_lo_pct": c["delta_ci_lo"],
                     "gated_ci_hi_pct": c["delta_ci_hi"], "routed_pct": c["avg_linear_pct"],
                     "flops_saved_total_pct": c["flops_saved_total_pct"], "source": name})
    # GPT-2 small (d = 768: 769-parameter linear gates), all 12 gates at once; the file holds
    # no FLOPs count, no all-linear run and no interval
    d = json.loads((src / "compound_gate_results.json").read_text())
    c = d["compound"]
    routed = list(c["per_layer_linear_pct"].values())
    rows.append({"model": "gpt2", "gated_layers": c["layers_gated"], "n_layers": 12,
                 "baseline_ppl": d["baseline_ppl"], "all_linear_pct": "",
                 "gated_pct": c["delta_pct"], "gated_ci_lo_pct": "", "gated_ci_hi_pct": "",
                 "routed_pct": round(sum(routed) / len(routed), 2), "flops_saved_total_pct": "",
                 "source": "compound_gate_results.json"})
    write(rows, out / "p3_compound.csv")
    finetune(src, out)
    large_gates(src, out)
    nofly(src, out)


#: The fine-tuning runs of P3 §4.9 (GPT-2 Medium, WikiText-103): MLPs of `linear_layers`
#: replaced by their linear fits, then fine-tuned; the control fine-tunes the unmodified model;
#: the two-phase runs gate `gated_layers`. `corpus`: the 117.9M-token fine-tuning corpus
#: (`train_corpus_size`), or the 247K-token corpus of the run that "peaked at −3.6 % before
#: degrading from overfitting" (tex line 484: beefy_lin_gpt2-medium.json, recognised by that
#: trajectory; the file names no corpus).
FINETUNE = ("beefy_lin_gpt2-medium.json", "beefy_lin_v2_gpt2-medium.json",
            "beefy_lin_v2_6layers.json", "beefy_lin_v2_8layers.json",
            "generalization_full_linear_gpt2-medium.json",
            "control_finetune_gpt2-medium.json", "phase2_gated_gpt2-medium.json",
            "phase2_gated_24layers_gpt2-medium.json")
FULL_CORPUS = 117920140
SMALL = {"beefy_lin_gpt2-medium.json": "small (247K tokens; tex line 484)",
         "generalization_full_linear_gpt2-medium.json": "not stated in the file"}

#: The text's two-phase run (tex lines 501–503: L10–L13 gated, 19.00 PPL, −17.3 %) is stored as
#: the benchmark of it: its deltas only. Its steps are the text's (2,000 + 3,000, tex line 501).
#: (phase2_gated_gpt2-medium.json, which the benchmark names as its source, now holds an
#: 8-layer run, byte for byte phase2_gated_8layers_gpt2-medium.json.)
BENCHMARK, BENCHMARK_STEPS = "benchmark_gpt2-medium.json", 5000


def finetune(src: Path, out: Path):
    rows = []
    for name in FINETUNE:
        d = json.loads((src / name).read_text())
        two_phase = d.get("method") == "two_phase_gated"
        general = "deltas" in d  # generalization_full_linear: keys by corpus
        layers = d.get("gated_layers") if two_phase else d.get("linear_layers")
        base = ({"wiki": d["baseline"]["wikitext-103"], "lambada": d["baseline"]["lambada"]}
                if general else d["baseline"])
        final = ({"wiki": d["modified"]["wikitext-103"], "lambada": d["modified"]["lambada"]}
                 if general else d["final"])
        rows.append({"run": ("two-phase gated" if two_phase else "control" if not layers
                             else "linearized"),
                     "layers": " ".join(str(x) for x in layers or []),
                     "steps": ((d["phase1_steps"] + d["phase2_steps"]) if two_phase
                               else d["ft_steps"] if general else d["steps"]),
                     "corpus": ("full (117.9M tokens)" if d.get("train_corpus_size") == FULL_CORPUS
                                else SMALL.get(name, "not stated in the file")),
                     "batch_size": d.get("batch_size", ""),
                     "baseline_wiki_ppl": base["wiki"], "final_wiki_ppl": final["wiki"],
                     "wiki_delta_pct": (d["deltas"]["wikitext-103"] if general
                                        else d["wiki_delta_pct"]),
                     "baseline_lambada_ppl": base["lambada"], "final_lambada_ppl": final["lambada"],
                     "lambada_delta_pct": (d["deltas"]["lambada"] if general
                                           else d["lambada_delta_pct"]),
                     # LAMBADA right after linearization, before any fine-tuning (tex line 473)
                     "post_linearization_lambada_ppl": (d.get("post_linearization") or {})
                     .get("lambada", ""),
                     "source": name})
    b = json.loads((src / BENCHMARK).read_text())
    base = next(r for r in rows if r["run"] == "control")  # the same GPT-2 Medium evaluation
    q = b["quality"]
    rows.append({"run": "two-phase gated", "layers": " ".join(map(str, b["gated_layers"])),
                 "steps": BENCHMARK_STEPS, "corpus": "full (117.9M tokens)", "batch_size": "",
                 "baseline_wiki_ppl": base["baseline_wiki_ppl"],
                 "final_wiki_ppl": base["baseline_wiki_ppl"] * (1 + q["wiki_delta_pct"] / 100),
                 "wiki_delta_pct": q["wiki_delta_pct"],
                 "baseline_lambada_ppl": base["baseline_lambada_ppl"],
                 "final_lambada_ppl": base["baseline_lambada_ppl"]
                 * (1 + q["lambada_delta_pct"] / 100),
                 "lambada_delta_pct": q["lambada_delta_pct"],
                 "post_linearization_lambada_ppl": "", "source": BENCHMARK})
    write(rows, out / "p3_finetune.csv")


def large_gates(src: Path, out: Path):
    """GPT-2 Large's per-layer gate sweep (scale_test_gpt2_large.json: four gates a layer,
    point estimates, no interval): each layer's all-linear cost and its best gate's."""
    name = FILES["gpt2-large"][0]
    d = json.loads((src / name).read_text())
    rows = []
    for key, layer in sorted(d["layers"].items(), key=lambda kv: int(kv[0])):
        best = min(layer["gates"], key=lambda g: g["delta_pct"])
        rows.append({"model": "gpt2-large", "layer": int(key), "n_layers": len(d["layers"]),
                     "all_linear_pct": layer["all_linear_delta_pct"],
                     "best_gate": best["name"], "gate_pct": best["delta_pct"],
                     "routed_pct": best["pct_linear"], "source": name})
    write(rows, out / "p3_large_gates.csv")


def nofly(src: Path, out: Path):
    """P3 Table 'Cross-corpus stability of No-Fly lists' (L12): each no-fly token built on
    WikiText-103 test (its mean δ, share of positive δ and count there) with its δ on the
    other corpus, as the author's file records them."""
    name = "nofly_cross_corpus_gpt2-medium.json"
    d = json.loads((src / name).read_text())["L12"]
    rows = []
    for corpus, c in d["cross_corpus"].items():
        for t in c["tokens"]:
            b = d["nofly_tokens"][str(t["token_id"])]
            rows.append({"layer": 12, "test_corpus": corpus, "token_id": t["token_id"],
                         "build_mean": b["mean"], "build_std": b["std"], "build_n": b["n"],
                         "build_frac_pos": b["frac_pos"], "test_mean": t["test_mean"],
                         "test_std": t["test_std"], "test_n": t["test_n"],
                         "test_frac_pos": t["test_frac_pos"], "still_nofly": t["still_nofly"],
                         "n_nofly": d["n_nofly"], "source": name})
    write(rows, out / "p3_nofly.csv")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).with_name("p3_all_linear_costs.csv"))
