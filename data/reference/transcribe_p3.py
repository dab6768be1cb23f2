"""Transcribe P3's per-layer all-linear costs, gate results, token-vs-context AUCs and
compound-gating results from the author's result files.

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
                         "context_only": a["context_only"]["auc"], "source": name})
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
    write(rows, out / "p3_compound.csv")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).with_name("p3_all_linear_costs.csv"))
