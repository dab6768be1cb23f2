"""Benchmark for Part II.b (prints figures; not a test): does routing tokens to the linear
surrogate save the wall-clock its FLOPs promise?

`HybridMLP` gathers the tokens its gate routes to the surrogate, runs the MLP on the rest only,
and scatters the outputs back. For shares routed f = 0.25 … 0.9 this prints, at batch
8 × 256 in bfloat16 on the CPU,

(a) one MLP layer, in bfloat16 and in float32: time of the full MLP vs the hybrid module,
    the realized saving 1 − t_hybrid / t_full, the FLOP-predicted saving
    f·(1 − F_sur/F_mlp) − F_gate/F_mlp, and their ratio (target ≥ 0.60);
(b) the whole model with every layer gated: forward time vs the full model, against the
    share of forward FLOPs saved (LM head included).

The gate here is a d+1 logistic gate with a random direction and its threshold set to route
exactly f of the tokens: routing cost does not depend on *which* tokens are routed.

    python benchmarks/bench_gating.py [--windows 8] [--length 256] [--repeats 7]
"""

import torch

from common import model_and_windows, parser, random_gate, timed
from nlbudget import capture, gating, surrogates




def main():
    ap = parser()
    ap.add_argument("--layer", type=int, default=15)
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"batch {args.windows} × {args.length}, bfloat16")
    model, ids, fits = model_and_windows(args, torch.bfloat16)
    mlp = capture.mlps(model)
    L, d = len(mlp), model.config.hidden_size
    with capture.MLPCapture(model, layers=[args.layer], max_tokens=ids.numel()) as cap, \
            torch.no_grad():
        model(input_ids=ids)
    x = cap[f"blocks.{args.layer}.mlp.in"].view(*ids.shape, d)
    fl = gating.flops_per_token(model, args.length)
    print(f"FLOPs per token: MLP {fl.mlp / 1e6:.2f} M, surrogate {fl.surrogate / 1e6:.2f} M, "
          f"gate {fl.gate / 1e3:.1f} k; forward {fl.total / 1e6:.0f} M "
          f"(MLPs {L * fl.mlp / fl.total:.0%})")

    for dtype in (torch.bfloat16, torch.float32):
        print(f"\n(a) one MLP layer (layer {args.layer}), {dtype}")
        print(f"{'routed':>7} {'full ms':>8} {'hybrid ms':>10} {'realized':>9} "
              f"{'predicted':>10} {'ratio':>6}")
        m_l, s_l, xd = mlp[args.layer].to(dtype), fits[args.layer], x.to(dtype)
        sur = surrogates.LinearSurrogate(s_l.W.to(dtype), s_l.b.to(dtype))
        with torch.no_grad():
            t_full = timed(lambda: m_l(xd), args.repeats, warmup=True)
            for f in (0.25, 0.5, 0.75, 0.9):
                gate = random_gate(d, 0)
                thr = gating.threshold_for_fraction(gate(xd), f)
                h = gating.HybridMLP(m_l, sur, gate, thr, keep_first=1)
                t = timed(lambda: h(xd), args.repeats, warmup=True)
                real = 1 - t / t_full
                pred = (h.fraction * (fl.mlp - fl.surrogate) - fl.gate) / fl.mlp
                print(f"{h.fraction:>7.0%} {1e3 * t_full:>8.1f} {1e3 * t:>10.1f} "
                      f"{real:>9.1%} {pred:>10.1%} {real / pred:>6.2f}")
    model.to(torch.bfloat16)

    print("\n(b) the whole model, every layer gated")
    print(f"{'routed':>7} {'full s':>7} {'hybrid s':>9} {'realized':>9} {'predicted':>10} "
          f"{'ratio':>6}")
    with torch.no_grad():
        t_full = timed(lambda: model(input_ids=ids), max(3, args.repeats // 2), warmup=True)
        with capture.MLPCapture(model, max_tokens=ids.numel()) as cap:
            model(input_ids=ids)
        xs = {l: cap[f"blocks.{l}.mlp.in"] for l in range(L)}
        for f in (0.25, 0.5, 0.75, 0.9):
            hyb = {}
            for l in range(L):
                gate = random_gate(d, l)
                hyb[l] = gating.HybridMLP(mlp[l], fits[l], gate,
                                          gating.threshold_for_fraction(gate(xs[l]), f))
            with surrogates.replaced(model, hyb):
                t = timed(lambda: model(input_ids=ids), max(3, args.repeats // 2), warmup=True)
            routed = [h.fraction for h in hyb.values()]
            real, pred = 1 - t / t_full, fl.saved(routed)
            print(f"{sum(routed) / L:>7.0%} {t_full:>7.2f} {t:>9.2f} {real:>9.1%} "
                  f"{pred:>10.1%} {real / pred:>6.2f}")


if __name__ == "__main__":
    main()
