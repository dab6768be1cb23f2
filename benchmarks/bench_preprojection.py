"""Benchmark for Part IV (prints figures; not a test): what do the pre-projection and the
content skip cost at decode time?

Greedy generation with the K/V cache, base model against the wrapped model (pre+skip at the
chapter's `ci` width k = 16, the same trained-or-not cost), at batch 1 and 8. The time per
decoded token is (t(n tokens) − t(1 token)) / (n − 1), so the prefill is not counted. Base
and wrapped runs are interleaved, `--repeats` rounds, and the medians are printed with the
overhead (target ≤ 15 %). `--model` also takes a directory saved with `save_pretrained`
(e.g. the Pythia-style checkpoint under `data/cache/checkpoints/`). Two forms of the wrapped model are timed: as trained (float32
modules called as nn.Modules on a bfloat16 model) and `preprojection.inference_form`
(functional calls, gate folded into U; still float32 — bfloat16 products this small are
several times slower on a CPU). The K/V cache bytes are printed for both models.

    python benchmarks/bench_preprojection.py [--model smollm2-135m] [--k 16]
        [--prompt 32] [--tokens 32] [--repeats 7] [--dtype bfloat16]
"""

import torch

from common import parser
from nlbudget.assets import models
from nlbudget import preprojection as pp


def main():
    ap = parser(repeats=7)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    args = ap.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    dtype = getattr(torch, args.dtype)
    base, _ = models.load(args.model, dtype=dtype)
    budget = pp.matched_budget(base, args.k)
    trained = pp.variant_model(base, "pre+skip", budget)
    with torch.no_grad():  # move the zero-initialised weights, as training would
        for p in trained.parameters():
            if p.requires_grad:
                p.add_(0.01 * torch.randn_like(p))
    fast = pp.inference_form(pp.variant_model(base, "pre+skip", budget))
    print(f"{args.model} ({args.dtype}), pre+skip k={args.k}: "
          f"{pp.trainable(trained):,} new parameters; prompt {args.prompt}, "
          f"{args.tokens} new tokens, {args.repeats} interleaved repeats")
    ids = torch.randint(0, 1000, (2, 16))
    cb = pp.cache_bytes(pp.cache_tensors(base, ids))
    cw = pp.cache_bytes(pp.cache_tensors(trained, ids))
    print(f"K/V cache after 16+4 tokens, batch 2: base {cb:,} bytes, wrapped {cw:,} bytes")
    print(f"{'batch':>5} {'base ms/tok':>12} {'as trained':>11} {'overhead':>9} "
          f"{'inference':>10} {'overhead':>9}")
    for batch in (1, 8):
        med = pp.decode_seconds({"base": base, "trained": trained, "fast": fast}, batch,
                                args.prompt, args.tokens, reps=args.repeats)
        print(f"{batch:>5} {1e3 * med['base']:>12.2f} {1e3 * med['trained']:>11.2f} "
              f"{med['trained'] / med['base'] - 1:>+9.1%} {1e3 * med['fast']:>10.2f} "
              f"{med['fast'] / med['base'] - 1:>+9.1%}")

if __name__ == "__main__":
    main()
