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
from scipy.stats import binom

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


def median_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """The median of `values` and a distribution-free interval for it: the order statistics
    at the ranks a Binomial(n, ½) leaves outside the level (with 30 values, the 10th and 21st,
    95.7 %); with too few values for that, the smallest and largest."""
    v = sorted(values)
    n = len(v)
    k = max(1, int(binom.ppf((1 - level) / 2, n, 0.5)))  # 1-based rank of the lower end
    return statistics.median(v), v[k - 1], v[n - k]


def _timed_rounds(model, runs: dict, ids: torch.Tensor, rounds: int, replace) -> dict:
    """{name: seconds per round}: after one warm-up pass each, `rounds` rounds that time every
    run in turn (drift in the machine's speed falls on all alike); the original (`None`) is
    timed twice a round, the second time as "again" (the noise: the original against
    itself)."""
    order = [None, *[n for n in runs if n is not None], "again"]
    times = {name: [] for name in order}
    for r in range(rounds + 1):
        for name in order:
            with replace(model, runs.get(name, {})):
                t = time.perf_counter()
                model(input_ids=ids)
                if r:  # the first round warms up
                    times[name].append(time.perf_counter() - t)
    return times


def _saving(times: dict, name) -> list[float]:
    """Each round's saving against the original timed in the same round (paired)."""
    return [1 - a / f for a, f in zip(times[name], times[None])]


@torch.no_grad()
def realized(model, configs: dict, batches: dict, repeats: int = 30, threads: int = 2,
             replace=None) -> list[dict]:
    """The original model and each configuration ({name: (modules by layer, predicted
    saving — or a function of no arguments that gives it once the timing is done)}) side by
    side in one process on `threads` CPU threads, at each batch ({label: ids}), over `repeats`
    paired rounds (`_timed_rounds`). Per configuration and batch: the realized saving, the
    median over rounds of 1 − t_budget / t_full, with its interval (`median_interval`); the
    noise, the largest end of the same interval for the original against itself; the
    predicted saving, and — unless it is within the noise (`inside_noise`: no timing this
    long could tell it from nothing) — the ratio realized / predicted with its interval;
    tokens per second of the original at its median time, and of the configuration as that
    times the realized speed-up. `replace` installs modules (`surrogates.replaced`)."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rows = []
        for b, ids in batches.items():
            times = _timed_rounds(model, {name: mods for name, (mods, _) in configs.items()},
                                  ids, repeats, replace)
            full = ids.numel() / statistics.median(times[None])
            noise = max(abs(e) for e in median_interval(_saving(times, "again"))[1:])
            for name, (_, predicted) in configs.items():
                saved, lo, hi = median_interval(_saving(times, name))
                predicted = predicted() if callable(predicted) else predicted
                inside = predicted <= noise
                rows.append({"config": name, "batch": b, "tokens": int(ids.numel()),
                             "rounds": repeats, "full_tps": full,
                             "budget_tps": full / (1 - saved), "realized": saved,
                             "realized_ci": [lo, hi], "noise": noise, "predicted": predicted,
                             "inside_noise": inside,
                             "ratio": None if inside else saved / predicted,
                             "ratio_ci": None if inside else [lo / predicted, hi / predicted]})
        return rows
    finally:
        torch.set_num_threads(old)
