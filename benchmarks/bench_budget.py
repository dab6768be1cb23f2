"""Benchmark for Part V (prints figures; not a test): does the budget chapter 07 chose save the
wall-clock its FLOPs promise?

Reads chapter 07's results at a profile (`data/results/<profile>/07_budget_atlas.json`): for
each budget, which layers are linear and which gated, and the share of tokens each gate routed
on the held-out windows. Rebuilds those models — ridge surrogates fit here, and for each gated
layer a d+1 gate with a random direction whose threshold routes the recorded share (what a
route costs does not depend on *which* tokens it picks) — and times each against the original
in one process (`budget.realized`: float32, 2 threads, batch 1 and `--windows`, `--repeats`
paired rounds, each saving against the original timed in the same round: the median with its
distribution-free 95 % interval, and the ratio to the FLOP-predicted saving with its interval —
or "inside the noise" where the prediction is no larger than the original timed against
itself). For comparison, the model with every layer gated at half its tokens, and with every
layer linear (no routing to pay for: how much of the MLPs' FLOP share turns into wall-clock at
all). Issue 34's targets: every layer gated, batch 8, ratio ≥ 0.7 with its lower end ≥ 0.6;
every layer linear ≥ 0.85.

    python benchmarks/bench_budget.py [--profile ci] [--windows 8] [--length 256] [--repeats 30]
"""

import torch

from common import model_and_windows, parser, random_gate
from nlbudget import budget, capture, gating, surrogates
from nlbudget.chapters import ch07_budget_atlas as ch07
from nlbudget.verdicts import results


def build(model, fits, xs, states: dict, routed: dict, T: int):
    """{layer: module} for {layer: state}, and the share of forward FLOPs it removes."""
    mlp, fl = capture.mlps(model), gating.flops_per_token(model, T)
    mods, gone = {}, 0.0
    for l, s in states.items():
        if s == "linear":
            mods[l] = surrogates.KeepFirst(mlp[l], fits[l])
        else:
            gate = random_gate(model.config.hidden_size, l)
            with torch.no_grad():
                thr = gating.threshold_for_fraction(gate(xs[l][:, 1:]), routed[l])
            mods[l] = gating.HybridMLP(mlp[l], fits[l], gate, thr)
        gone += fl.removed(s, routed.get(l, 0.0), T)
    return mods, gone / fl.total


def main():
    ap = parser(repeats=30)
    ap.add_argument("--profile", default="ci")
    args = ap.parse_args()
    rec = results.read(ch07.STEM, args.profile)
    checks = next(iter(rec["figures"]["atlas"].values()))["budget"]["checks"]  # SmolLM2's
    print(f"torch {torch.__version__}, float32, 2 threads; budgets from chapter 07 at "
          f"{args.profile!r} (commit {str(rec['environment'].get('git', {}).get('commit'))[:10]})")
    model, ids, fits = model_and_windows(args, torch.float32)
    L = len(fits)
    with capture.MLPCapture(model, max_tokens=ids.numel()) as cap, torch.no_grad():
        model(input_ids=ids)
    xs = {l: cap[f"blocks.{l}.mlp.in"].view(*ids.shape, -1) for l in range(L)}
    configs = {}
    for b, c in checks.items():
        states = {int(l): s for l, s in c["layers"].items()}
        routed = {int(l): r for l, r in c["routed"].items()}
        if states:
            configs[f"budget {float(b):.0%} ({c['n_linear']} linear, {c['n_gated']} gated)"] = \
                build(model, fits, xs, states, routed, args.length)
    configs["every layer gated, 1/2 routed"] = build(
        model, fits, xs, {l: "gated" for l in range(L)}, {l: 0.5 for l in range(L)},
        args.length)
    configs["every layer linear"] = build(model, fits, xs, {l: "linear" for l in range(L)}, {},
                                          args.length)
    rows = budget.realized(model, configs, {1: ids[:1], args.windows: ids}, args.repeats,
                           replace=surrogates.replaced)
    print(f"\n{'configuration':<38} {'batch':>5} {'orig tok/s':>10} {'budget tok/s':>12} "
          f"{'realized [95 %]':>24} {'predicted':>10} {'ratio [95 %]':>20}")
    for r in rows:
        lo, hi = r["realized_ci"]
        ratio = (f"inside ±{r['noise']:.1%} noise" if r["ratio"] is None else
                 f"{r['ratio']:.2f} [{r['ratio_ci'][0]:.2f}, {r['ratio_ci'][1]:.2f}]")
        print(f"{r['config']:<38} {r['batch']:>5} {r['full_tps']:>10,.0f} "
              f"{r['budget_tps']:>12,.0f} {r['realized']:>+7.1%} [{lo:+.1%}, {hi:+.1%}] "
              f"{r['predicted']:>10.1%} {ratio:>20}")
    print(f"\nnoise (the original against itself, {args.repeats} rounds): "
          + ", ".join(f"batch {r['batch']} ±{r['noise']:.1%}" for r in rows[::len(configs)]))


if __name__ == "__main__":
    main()
