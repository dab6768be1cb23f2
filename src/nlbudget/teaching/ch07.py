"""Exercise checks of chapter 07 (Part V): each names the exercise it checks."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from nlbudget import budget, random_features, surrogates
from nlbudget.teaching.machinery import (CheckFailed, _call, _gen, _randn, chapter_results,
                                         check_function, check_prediction, data)


def _rf_case(s, n=9, d=5, m=7):
    A, c = _randn(d, m, seed=90 + s) / d ** 0.5, _randn(m, seed=95 + s)
    x = _randn(n, d, seed=80 + s) * (1 + s)
    mu = x.mean(0)
    return x, A, mu, ((x - mu) @ A).std(0), c


def random_feature_map(student) -> None:
    """Exercise 7.1: the features [x, σ((x − μ)A/s + c)] of P2's lens (σ: SiLU)."""
    def ref(x, A, mu, sd, c):
        lin = surrogates.LinearSurrogate(torch.zeros(A.shape[0] + A.shape[1], 1,
                                                     dtype=x.dtype), torch.zeros(1))
        return random_features.RandomFeatureSurrogate(A, mu, sd, c, lin).features(x)
    cases = [(f"x of shape (9, 5), width 7, seed {s}", _rf_case(s)) for s in range(3)]
    hints = [(lambda x, A, mu, sd, c: ref(x, A, mu, sd, c)[:, x.shape[1]:],
              "the features start with x itself: [x, σ(…)], so the linear surrogate is nested "
              "in the lens"),
             (lambda x, A, mu, sd, c: torch.cat([x, F.silu(x @ A / sd + c)], 1),
              "centre x first: (x − μ)A / s"),
             (lambda x, A, mu, sd, c: torch.cat([x, F.silu((x - mu) @ A + c)], 1),
              "divide by s, each unit's spread, so every unit sits in σ's curved range")]
    return check_function("random feature map", lambda *a: student(*(t.clone() for t in a)),
                          ref, cases, hints=hints)


@data
def budget_layers(seed: int, layers: int = 8):
    """Exercise 7.3's model: for every layer, its options (`budget.Option`: the layer gated or
    linear, the cost of that change *alone* — a relative perplexity increase — and the MLP
    FLOPs per token it removes), and `measure(config)`, the cost of the model with every
    layer of `config` ({layer: "gated" or "linear"}; the others full) changed at once.
    As in SmolLM2 (chapter 04 measures every gate at once far above the sum of its layers),
    costs compound and neighbours interact: the combined cost is more than the sum."""
    g = _gen(300 + seed)
    u = torch.rand(layers, 2, generator=g, dtype=torch.float64)
    gated = (0.002 + 0.02 * u[:, 0]).tolist()
    linear = [c * (1.5 + 6 * float(v)) for c, v in zip(gated, u[:, 1])]
    flops = 3.0 * 576 * 1536  # one SmolLM2 MLP's multiply-adds per token
    options = [budget.Option(l, "gated", gated[l], 0.5 * flops) for l in range(layers)] + [
        budget.Option(l, "linear", linear[l], 0.95 * flops) for l in range(layers)]
    alone = {(o.layer, o.state): o.cost for o in options}

    def measure(config: dict) -> float:
        c = [alone[(l, s)] if s != "full" else 0.0 for l, s in
             ((l, config.get(l, "full")) for l in range(layers))]
        ppl = 1.0
        for x in c:
            ppl *= 1 + x
        ppl *= 1 + 1.0 * sum((a * b) ** 0.5 for a, b in zip(c, c[1:]))
        return ppl - 1
    return options, measure


def _budget_reference(options, measure, limit: float) -> dict:
    """Chapter 07's way: the greedy path by cost per FLOP, the combined model measured after
    every move, the longest prefix whose measured cost is within the budget."""
    path = budget.greedy_path(options)
    costs = [measure({l: o.state for l, o in budget.configuration(path, k).items()})
             for k in range(1, len(path) + 1)]
    k = budget.longest_under(costs, limit)
    return {l: o.state for l, o in budget.configuration(path, k).items()}


def _summed_plan(options, limit: float) -> dict:
    """The known mistake: the greedy path cut where the *sum* of single-layer costs reaches
    the budget — a prediction, never measured."""
    path, total, out = budget.greedy_path(options), {}, {}
    for o in path:
        total[o.layer] = o.cost
        if sum(total.values()) > limit:
            break
        out[o.layer] = o.state
    return out


def _saved(options, config: dict) -> float:
    flops = {(o.layer, o.state): o.flops for o in options}
    return sum(flops[(l, s)] for l, s in config.items() if s != "full")


def budget_plan(student) -> None:
    """Exercise 7.3: `student(options, measure, limit)` returns a configuration ({layer:
    "gated" or "linear"}) whose *measured* cost is within `limit` and that removes at least as
    many FLOPs as chapter 07's greedy path measured move by move. Any such plan passes (a
    search over more configurations too)."""
    name, limit = "budget_plan", 0.05
    for seed in range(3):
        options, measure = budget_layers(seed)
        calls = []
        counted = lambda config: calls.append(1) or measure(dict(config))  # noqa: E731
        plan = _call(name, f"model seed {seed}", student, list(options), counted, limit)
        if not (isinstance(plan, dict) and all(
                l in range(8) and s in budget.STATES for l, s in plan.items())):
            raise CheckFailed(f"✗ {name}: wrong for model seed {seed}\n  what differs: the "
                              f"plan's form\n  expected: a dict {{layer: \"gated\" or "
                              f"\"linear\"}}, layers 0–7\n  got:      {plan!r}")
        ref = _budget_reference(options, measure, limit)
        cost, want = measure(plan), _saved(options, ref)
        if cost <= limit and _saved(options, plan) >= want * (1 - 1e-9):
            continue
        if cost > limit:
            what, exp, got = ("the measured cost", f"at most {limit:.1%}",
                              f"{cost:.2%} for {_saved(options, plan) / 1e6:.2f} M FLOPs saved")
            hint = ("you stopped where the single-layer costs add up to the budget: costs do not"
                    " add. Measure the combined model (`measure`) after every move and keep the"
                    " longest prefix within the budget" if plan == _summed_plan(options, limit)
                    else "measure your plan as a whole: `measure(plan)` must be within the "
                    "budget")
        else:
            what, exp, got = ("MLP FLOPs removed", f"at least {want / 1e6:.2f} M per token "
                              "(the greedy path, measured move by move)",
                              f"{_saved(options, plan) / 1e6:.2f} M")
            hint = ("take moves by the cost they add per FLOP they remove, gated and linear "
                    "alike (a layer may go full → gated → linear), and stop only where the "
                    "measured cost passes the budget for good")
        raise CheckFailed(f"✗ {name}: wrong for model seed {seed}\n  what differs: {what}\n"
                          f"  expected: {exp}\n  got:      {got}\n  hint: {hint}")
    print(f"✓ {name}: your plans keep the measured cost within {limit:.0%} and remove as many "
          f"FLOPs as the greedy path measured move by move (3 models; your last plan measured "
          f"{len(calls)} configurations)")


def predict_cv_lambda_larger(predicted, profile: str, results_dir=None) -> None:
    """Exercise 7.2: does cross-validation choose, at every layer, a ridge λ larger than the
    0.01 P3 uses for the linear surrogate?"""
    if not isinstance(predicted, bool):
        raise CheckFailed(f"a prediction is True or False, got {predicted!r}")
    atlas = chapter_results("07", profile, results_dir)["figures"]["atlas"]
    rows = next(iter(atlas.values()))["measured"]["per_layer"]  # the chapter's first model
    lams = [r["lambda_rf"] for r in rows]
    return check_prediction("cross-validation chooses a λ larger than P3's, every layer",
                            predicted, min(lams) > surrogates.RIDGE_LAMBDA, profile,
                            f"λ chosen: {min(lams):.3g} to {max(lams):.3g} over {len(rows)} "
                            f"layers, against P3's {surrogates.RIDGE_LAMBDA:g}.",
                            why=WHY_CV_LAMBDA_LARGER)


#: Why the prediction of `predict_cv_lambda_larger` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_CV_LAMBDA_LARGER = (
    "A ridge read-out's optimism on its own tokens grows with its inputs per output over "
    "its tokens. P3's $\\lambda = 0.01$ barely shrinks $d+1$ inputs fit on ten thousand "
    "tokens; $d+m$ inputs fit on the same tokens memorise them with it. Cross-validation "
    "over whole windows trades that variance for a little bias — and because the penalty "
    "now differs, the random-feature fit is no longer guaranteed to match the linear one "
    "even on its own tokens.")
