"""Benchmarks for Part II.a (prints figures; not a test).

(a) capture overhead: a forward pass with every MLP captured vs a bare forward pass
    (target ≤ 1.10×);
(b) the linearization sweep with prefix reuse vs the naive sweep of one full pass per layer
    (target ≤ 0.6×);
(c) evaluation tokens/s in float32 vs bfloat16 on the CPU, and the perplexity difference.

    python benchmarks/bench_surrogates.py [--windows 8] [--length 256] [--repeats 3]
"""

import statistics
import time

import torch

from common import parser, timed
from nlbudget import capture, evaluation, surrogates
from nlbudget.assets import corpora, models




def main():
    ap = parser()
    ap.add_argument("--sweep-windows", type=int, default=4)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")

    model, tok = models.load(args.model, dtype=torch.bfloat16)
    text = corpora.load("pydocs").text("validation")
    ids = corpora.token_windows(text, tok, args.length, args.windows)
    L = len(capture.mlps(model))

    # (a) capture overhead
    def bare():
        with torch.no_grad():
            model(input_ids=ids)

    def captured():
        with capture.MLPCapture(model, max_tokens=ids.numel()) as cap, torch.no_grad():
            model(input_ids=ids)
        assert cap.n == ids.numel()

    bare()  # warm up
    t_bare, t_cap = [], []
    for _ in range(args.repeats):  # interleaved, so drifting machine load hits both alike
        t_bare.append(timed(bare, 1))
        t_cap.append(timed(captured, 1))
    t_bare, t_cap = statistics.median(t_bare), statistics.median(t_cap)
    print(f"(a) forward {tuple(ids.shape)}: bare {t_bare:.2f} s, all {L} MLPs captured "
          f"{t_cap:.2f} s -> {t_cap / t_bare:.3f}x (target <= 1.10x)")

    # (b) prefix reuse vs naive sweep, one variant
    sw = ids[: args.sweep_windows]
    fits, _ = surrogates.fit_layers(model, ids, dtype=torch.bfloat16)
    t = time.perf_counter()
    fast = surrogates.linearization_sweep(model, sw, {"plain": fits}, batch_size=len(sw))
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    slow = surrogates.naive_sweep(model, sw, {"plain": fits}, batch_size=len(sw))
    t_slow = time.perf_counter() - t
    diff = max(abs(fast.cost("plain", l) - slow.cost("plain", l)) for l in range(L))
    print(f"(b) sweep of {L} layers on {tuple(sw.shape)}: prefix reuse {t_fast:.1f} s, naive "
          f"{t_slow:.1f} s -> {t_fast / t_slow:.3f}x (target <= 0.6x); "
          f"max |cost difference| {diff:.2e}")
    lay, bl = capture.layout(model), capture.blocks(model)
    with torch.no_grad():
        h, kw = lay.embed(model, sw)
        t = time.perf_counter()
        for b in bl:
            h = b(h, **kw)
        t_blocks = time.perf_counter() - t
        t = time.perf_counter()
        evaluation.token_nll(lay.head(model, h), sw)
        t_head = time.perf_counter() - t
    print(f"    one pass = {L} blocks {t_blocks:.2f} s + LM head and loss {t_head:.2f} s: "
          f"the head is paid once per swapped layer by both methods")

    # (c) float32 vs bfloat16 evaluation
    model32, _ = models.load(args.model, dtype=torch.float32)
    for name, m in (("float32", model32), ("bfloat16", model)):
        surrogates.eval_nll(m, ids[:1])
        t = time.perf_counter()
        nll = surrogates.eval_nll(m, ids, batch_size=args.windows)
        dt = time.perf_counter() - t
        print(f"(c) {name}: {ids.numel() / dt:.0f} tokens/s, PPL {surrogates.perplexity(nll):.4f}")


if __name__ == "__main__":
    main()
