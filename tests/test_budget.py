"""Part V's budget (`nlbudget.budget`): the greedy path over full / gated / linear per layer,
the choice under a budget, and the bookkeeping of realized against predicted savings."""

import contextlib

import pytest
import torch

from nlbudget import budget, gating
from nlbudget.budget import Option


def test_the_greedy_path_takes_the_cheapest_cost_per_flop_first():
    opts = [Option(0, "gated", 0.010, 2.0), Option(0, "linear", 0.050, 4.0),
            Option(1, "gated", -0.002, 2.0), Option(1, "linear", 0.004, 4.0),
            Option(2, "gated", 0.030, 1.0), Option(2, "linear", 0.030, 4.0)]
    path = budget.greedy_path(opts)
    # layer 1 gated lowers the cost: first; then 1 → linear (+0.006 for 2 FLOPs = 0.003);
    # then 0 gated (0.005 per FLOP) and 2 linear (0.0075); 0 → linear (0.02) last
    assert [(o.layer, o.state) for o in path] == [(1, "gated"), (1, "linear"), (0, "gated"),
                                                 (2, "linear"), (0, "linear")]
    # 2 never passes through its gated state: the move to linear is cheaper per FLOP
    assert all(not (o.layer == 2 and o.state == "gated") for o in path)
    end = budget.configuration(path, len(path))
    assert {l: o.state for l, o in end.items()} == {0: "linear", 1: "linear", 2: "linear"}
    assert budget.configuration(path, 1) == {1: opts[2]}
    assert budget.configuration(path, 0) == {}


def test_a_state_that_removes_nothing_more_is_never_a_move():
    # a gate routing so few tokens that it removes no FLOPs: only the linear move remains
    path = budget.greedy_path([Option(0, "gated", 0.0, -1.0), Option(0, "linear", 0.2, 3.0)])
    assert [o.state for o in path] == ["linear"]


def test_the_budget_keeps_the_longest_prefix_under_it_as_measured():
    costs = [0.001, -0.002, 0.008, 0.012, 0.009, 0.04, 0.03, 0.2]  # costs compound, unevenly
    assert budget.longest_under(costs, 0.01) == 5  # after 0.012 at move 4, 0.009 at move 5
    assert budget.longest_under(costs, 0.05) == 7
    assert budget.longest_under([0.02, 0.03], 0.01) == 0  # nothing fits: the original model


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Toy(torch.nn.Module):
    """A 'model' whose forward pass advances a fake clock by the time of what is installed,
    each pass off by up to ± `noise` of it (seeded), every 7th by an outlier the median
    ignores."""

    def __init__(self, clock, noise=0.0):
        super().__init__()
        self.clock, self.installed, self.calls, self.noise = clock, {}, 0, noise
        self.gen = torch.Generator().manual_seed(0)

    def forward(self, input_ids):
        self.calls += 1
        jitter = 0.5 if self.calls % 7 == 0 else 0.0
        wobble = 1 + self.noise * (2 * float(torch.rand(1, generator=self.gen)) - 1)
        self.clock.t += input_ids.numel() * (1.0 - 0.1 * len(self.installed)) * wobble + jitter


@contextlib.contextmanager
def _replace(m, mods):
    m.installed = mods
    yield m
    m.installed = {}


def test_realized_saving_against_the_prediction(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(budget.time, "perf_counter", clock)
    model = Toy(clock)
    threads = torch.get_num_threads()
    rows = budget.realized(model, {"two": ({0: None, 1: None}, 0.25),
                                   "one": ({0: None}, lambda: 0.2)},
                           {1: torch.zeros(1, 10), 4: torch.zeros(4, 10)}, repeats=5,
                           threads=1, replace=_replace)
    assert torch.get_num_threads() == threads  # restored
    # 2 batches × (the original twice, 2 configurations) × (warm-up + 5 rounds)
    assert model.calls == 2 * 4 * 6
    by = {(r["config"], r["batch"]): r for r in rows}
    assert by["two", 1]["realized"] == pytest.approx(0.2)
    assert by["two", 1]["ratio"] == pytest.approx(0.8)
    assert by["one", 4]["realized"] == pytest.approx(0.1)
    assert by["one", 4]["predicted"] == 0.2 and by["one", 4]["ratio"] == pytest.approx(0.5)
    assert by["two", 4]["full_tps"] == pytest.approx(1.0)
    assert by["two", 4]["budget_tps"] == pytest.approx(1 / 0.8)
    for r in rows:
        lo, hi = r["realized_ci"]
        assert lo <= r["realized"] <= hi and r["rounds"] == 5


def test_a_saving_inside_the_timing_noise_gets_no_ratio(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(budget.time, "perf_counter", clock)
    model = Toy(clock, noise=0.05)  # each pass ± 5 %
    rows = budget.realized(model, {"two": ({0: None, 1: None}, 0.25),
                                   "tiny": ({}, 0.002)},
                           {8: torch.zeros(8, 10)}, repeats=30, threads=1, replace=_replace)
    by = {r["config"]: r for r in rows}
    assert 0.002 < by["two"]["noise"] < 0.1  # the original against itself
    assert by["tiny"]["inside_noise"] and by["tiny"]["ratio"] is None
    assert by["tiny"]["ratio_ci"] is None
    lo, hi = by["tiny"]["realized_ci"]
    assert lo < 0 < hi  # the same model: nothing saved, inside its interval
    two = by["two"]
    assert not two["inside_noise"] and two["ratio_ci"][0] < 0.8 < two["ratio_ci"][1]
    assert two["ratio_ci"][1] - two["ratio_ci"][0] < 0.5  # 30 rounds pin it down


def test_the_median_interval_is_the_binomial_order_statistics():
    values = list(range(1, 31))  # 30 values: ranks 10 and 21 (95.7 %)
    assert budget.median_interval(values) == (15.5, 10, 21)
    assert budget.median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)  # too few: the range


def test_the_flops_a_state_removes():
    fl = gating.Flops(mlp=1000, surrogate=100, gate=10, blocks=50_000, head=10_000)
    assert fl.removed("full", 0.0, 100) == 0.0
    # keep-first: the surrogate everywhere, the MLP on 1 position of 100
    assert fl.removed("linear", 0.0, 100) == pytest.approx(1000 - 10 - 100)
    # gated: the routed share swaps MLP for surrogate; the gate runs on every token
    assert fl.removed("gated", 0.5, 100) == pytest.approx(0.5 * 900 - 10)
    assert fl.removed("gated", 0.5, 100) == pytest.approx(fl.saved([0.5]) * fl.total)
