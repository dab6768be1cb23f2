"""The nonlinearity budget (Part V): per layer, keep the MLP, gate it (P3's d+1 router) or
replace it by its linear surrogate, removing as many MLP FLOPs as a perplexity budget allows —
and what that choice saves in wall-clock.

The choice is a multiple-choice knapsack; `greedy_path` walks it by measured single-layer
costs, cheapest cost per FLOP first. Costs do not add (chapter 04 measures every gate at once
far above the sum of its layers), so the caller measures the combined model along the path and
keeps the longest prefix under the budget.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from nlbudget import surrogates
from nlbudget.evaluation import bootstrap_cost, eval_nll, perplexity

#: A layer's states, from most to least nonlinearity.
STATES = ("full", "gated", "linear")


@dataclass(frozen=True)
class Option:
    """One layer in one state: its measured cost alone (relative perplexity change) and the
    MLP FLOPs per token it removes."""

    layer: int
    state: str
    cost: float
    flops: float


def greedy_path(options: list[Option]) -> list[Option]:
    """From every layer full, repeatedly take the move — one layer to a state that removes more
    FLOPs than its current one — that adds the least cost per FLOP removed (moves that lower
    the cost come first), until no move is left. Returns the moves in order; a layer may move
    twice (full → gated → linear)."""
    by_layer: dict[int, list[Option]] = {}
    for o in options:
        by_layer.setdefault(o.layer, []).append(o)
    current = {l: Option(l, "full", 0.0, 0.0) for l in by_layer}
    path = []
    while True:
        moves = [((o.cost - current[l].cost) / (o.flops - current[l].flops), l, o)
                 for l, os in by_layer.items() for o in os if o.flops > current[l].flops]
        if not moves:
            return path
        _, l, o = min(moves, key=lambda m: (m[0], m[1], STATES.index(m[2].state)))
        current[l] = o
        path.append(o)


def configuration(path: list[Option], k: int) -> dict[int, Option]:
    """Where the first k moves of a path leave every layer they moved: {layer: its option}."""
    out = {}
    for o in path[:k]:
        out[o.layer] = o
    return out


def longest_under(costs: list[float], budget: float) -> int:
    """The most moves k whose measured cost (costs[k − 1]) is at most `budget`; 0 if none."""
    under = [k for k, c in enumerate(costs, start=1) if c <= budget]
    return max(under) if under else 0


@torch.no_grad()
def measure_combined(model, windows: torch.Tensor, modules: dict, batch_size: int,
                     baseline: torch.Tensor, n_boot: int = 0, seed: int = 0) -> dict:
    """The model with several layers replaced at once (`modules`, {layer: module}; a gated
    layer's routing counters reset first), on `windows`: its per-token losses, perplexity,
    cost against `baseline` (the unmodified model's per-token losses on the same windows),
    with a bootstrap interval over windows where `n_boot` > 0, and the share each gated layer
    routed. Costs do not add: this is how every combination in the book is measured."""
    for m in modules.values():
        if hasattr(m, "reset"):
            m.reset()
    with surrogates.replaced(model, modules):
        nll = eval_nll(model, windows, batch_size)
    return {"nll": nll, "ppl": perplexity(nll),
            "cost": perplexity(nll) / perplexity(baseline) - 1,
            "ci": (bootstrap_cost(baseline, nll, n_boot, seed) if n_boot
                   else (float("nan"), float("nan"))),
            "routed": {l: m.fraction for l, m in modules.items() if hasattr(m, "fraction")}}


@torch.no_grad()
def realized(model, configs: dict, batches: dict, repeats: int = 5, threads: int = 2,
             replace=None) -> list[dict]:
    """The original model and each configuration ({name: (modules by layer, predicted
    saving — or a function of no arguments that gives it once the timing is done)}) side by side in one process on `threads` CPU threads, at each batch ({label:
    ids}): after one warm-up pass each, `repeats` rounds that time the original and every
    configuration in turn (so drift in the machine's speed falls on all alike). The realized
    saving is the median over rounds of 1 − t_budget / t_full, each against the original timed
    in the same round; its ratio to the predicted saving; tokens per second of the original at
    its median time, and of the configuration as that times the realized speed-up. `replace` is the context manager that installs modules
    (`surrogates.replaced`)."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rows = []
        for b, ids in batches.items():
            runs = {None: {}, **{name: mods for name, (mods, _) in configs.items()}}
            times = {name: [] for name in runs}
            for r in range(repeats + 1):
                for name, mods in runs.items():
                    with replace(model, mods):
                        t = time.perf_counter()
                        model(input_ids=ids)
                        if r:  # the first round warms up
                            times[name].append(time.perf_counter() - t)
            full = ids.numel() / statistics.median(times[None])
            for name, (_, predicted) in configs.items():
                # paired: each round's saving against the original timed beside it
                saved = statistics.median(1 - a / f for a, f in zip(times[name], times[None]))
                predicted = predicted() if callable(predicted) else predicted
                rows.append({"config": name, "batch": b, "tokens": int(ids.numel()),
                             "full_tps": full, "budget_tps": full / (1 - saved),
                             "realized": saved, "predicted": predicted,
                             "ratio": saved / predicted if predicted > 0 else None})
        return rows
    finally:
        torch.set_num_threads(old)
