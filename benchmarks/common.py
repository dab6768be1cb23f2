"""What the benchmark scripts share: a timer and the common command-line options."""

import argparse
import statistics
import time


def timed(fn, repeats: int, warmup: bool = False) -> float:
    """Median wall-clock seconds of `fn()` over `repeats` calls (after one unmeasured call
    with `warmup`)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def parser(repeats: int = 7) -> argparse.ArgumentParser:
    """--model, --windows, --length, --repeats; scripts add their own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=repeats)
    return ap


def random_gate(d: int, seed: int):
    """A d+1 gate with a random direction (what a route costs does not depend on *which*
    tokens it picks; a threshold sets how many)."""
    import torch
    from torch import nn

    from nlbudget import gating

    g = torch.Generator().manual_seed(seed)
    net = nn.Linear(d, 1)
    with torch.no_grad():
        net.weight.copy_(torch.randn(1, d, generator=g))
        net.bias.zero_()
    return gating.Gate(torch.zeros(d), torch.ones(d), net, "linear", d + 1)


def model_and_windows(args, dtype):
    """The model in `dtype`, `args.windows` validation windows of `args.length` tokens of the
    shipped corpus, and keep-first ridge surrogates of every layer fit on twice as many
    training windows: (model, ids, fits)."""
    from nlbudget import surrogates
    from nlbudget.assets import corpora, models

    model, tok = models.load(args.model, dtype=dtype)
    text = corpora.load("pydocs")
    ids = corpora.token_windows(text.text("validation"), tok, args.length, args.windows)
    fit = corpora.token_windows(text.text("train"), tok, args.length, 2 * args.windows)
    fits, _ = surrogates.fit_layers(model, fit, skip_first=True, dtype=dtype)
    return model, ids, fits
