"""Exercise checks of chapter 04 (Part II): each names the exercise it checks."""

from __future__ import annotations

import math

import torch

from nlbudget import gating
from nlbudget.teaching.machinery import (CheckFailed, _call, _gen, _randn, chapter_results, data,
                                         check_function, check_prediction)
from nlbudget.verdicts import stats


def _deltas():
    out = []
    for s, shift in enumerate((0.0, 0.3, -0.2, 2.0)):
        d = _randn(6, 17, seed=70 + s) * 0.5 + shift
        out.append((f"a (6, 17) δ, mean about {shift:+.1f}", (d,)))
    return out


def delta_labels(student) -> None:
    """Exercise 4.1: P3's "linear OK" labels and their threshold."""
    def ref(delta):
        lab, thr, _ = gating.delta_labels(delta)
        return lab, thr

    def stu(delta):
        lab, thr = student(delta.clone())
        return torch.as_tensor(lab).bool().flatten(), float(thr)
    def median(lower):  # always the median: interpolated, or torch's lower median
        def wrong(delta):
            d = delta.double().flatten()
            m = d.median() if lower else d.quantile(0.5)
            return d <= m, float(m)
        return wrong
    rule = ("when fewer than 5 % of the tokens have δ < 0, P3's threshold drops to the 25th "
            "percentile")
    lower = ("torch.median gives the lower of the two middle values; the threshold is the "
             "interpolated quantile (torch.quantile)" + f" — and {rule}")
    return check_function("delta_labels", stu, ref, _deltas(), atol=1e-9, rtol=1e-9,
                          hints=[(median(False), rule), (median(True), lower)])


def auc(student) -> None:
    """Exercise 4.2: P(score of a positive > score of a negative), ties count ½."""
    cases = []
    for s in range(4):
        scores = _randn(60, seed=80 + s)
        labels = torch.rand(60, generator=_gen(90 + s)) < 0.4
        scores = scores + labels * s * 0.5
        if s == 3:
            scores = scores.round()  # many ties
        cases.append((f"60 scores, seed {s}" + (", rounded (ties)" if s == 3 else ""),
                      (scores, labels)))
    def ties(weight):
        def wrong(sc, lb):
            diff = sc[lb][:, None] - sc[~lb][None, :]
            return float(((diff > 0).double() + weight * (diff == 0).double()).mean())
        return wrong
    hint = "a tie between a positive and a negative counts ½"
    return check_function("auc", lambda sc, lb: float(student(sc, lb)), stats.auc, cases,
                          atol=1e-9, rtol=1e-9, hints=[(ties(1.0), hint), (ties(0.0), hint)])


@data
def gate_task(seed: int, n: int = 4000, d: int = 64):
    """Exercise 4.3's tokens, skewed as chapter 04 finds δ: (X_train, δ_train, X_test, δ_test),
    n tokens each, features X (n, d) of which one direction tells (noisily) which tokens lose
    a lot when their layer is linear; most tokens lose almost nothing."""
    g = _gen(seed)
    w = torch.randn(d, generator=g, dtype=torch.float64)
    w /= w.norm()
    X = torch.randn(2 * n, d, generator=g, dtype=torch.float64)
    z = X @ w + 0.8 * torch.randn(2 * n, generator=g, dtype=torch.float64)
    delta = torch.where(z > 1.2, 0.5 + z, 0.02 * torch.randn(2 * n, generator=g,
                                                             dtype=torch.float64))
    return X[:n], delta[:n], X[n:], delta[n:]


def _held_out(fit, seed: int):
    """A gate trained by `fit(X, labels)` on the training tokens (P3's labels, δ ≤ median),
    scored on the held-out ones: (AUC, gated loss, random loss)."""
    Xtr, dtr, Xte, dte = gate_task(seed)
    score = fit(Xtr.clone(), dtr <= dtr.median())
    with torch.no_grad():
        s = torch.as_tensor(score(Xte.clone())).double().flatten()
    return (stats.auc(s.numpy(), (dte <= dte.median()).numpy()), *_routing_costs(dte, s, 0.5))


def _library_gate(X, labels):
    gate = gating.fit_gate("linear", X.float(), labels, 0)
    return lambda x: gate.logit(x.float())


def gate_beats_random(student) -> None:
    """Exercise 4.3: `student(X, labels)` trains a gate on the training tokens — labels True
    where a token is safe to linearize (δ ≤ median, P3's) — and returns its score function
    (higher: safer). On held-out tokens, any gate whose AUC is within 0.02 of P3's d+1 logistic
    gate passes; the check then shows what routing half the tokens by it costs against random
    routing of as many."""
    name = "gate_beats_random"
    for seed in range(3):
        want = _held_out(_library_gate, seed)[0]
        auc, gated, rnd = _call(name, f"task seed {seed}", lambda: _held_out(student, seed))
        if not auc >= want - 0.02:
            hint = ("your scores are reversed: a higher score must mean safer to linearize "
                    "(the label True)" if auc < 0.5 - 0.02 else
                    "a held-out AUC near ½ is chance: fit the scores to the training labels "
                    "(a logistic regression on X is the d+1 gate)")
            raise CheckFailed(f"✗ {name}: wrong for task seed {seed}\n"
                              f"  what differs: AUC on held-out tokens\n"
                              f"  expected: at least {want - 0.02:.3f} (P3's d+1 gate: {want:.3f})"
                              f"\n  got:      {auc:.3f}\n  hint: {hint}")
    print(f"✓ {name}: on held-out tokens your gate's AUC is {auc:.3f} (P3's d+1 gate "
          f"{want:.3f}); routing half the tokens by it adds {gated:.4f} nats per token, random "
          f"routing of as many {rnd:.4f}: {1 - gated / rnd:.0%} of random routing's loss avoided")


def predict_flop_ratio(predicted, profile: str, results_dir=None) -> None:
    """Exercise 4.4: how many times the FLOPs of SmolLM2's MLP a ridge surrogate costs."""
    if not isinstance(predicted, (int, float)) or isinstance(predicted, bool) or predicted <= 0:
        raise CheckFailed(f"a prediction is a positive number, got {predicted!r}")
    models = chapter_results("04", profile, results_dir)["figures"]["pretrained"]
    f = next(iter(models.values()))["flops"]
    measured = f["mlp"] / f["surrogate"]
    return check_prediction("MLP / surrogate FLOPs", predicted, round(measured, 3), profile,
                            f"(MLP {f['mlp']:,} FLOPs per token, surrogate {f['surrogate']:,}; "
                            f"within 1 % counts.)", math.isclose(predicted, measured, rel_tol=0.01),
                            why=WHY_FLOP_RATIO)


def _routing_costs(delta, scores, fraction):
    """Exercise 4.5's reference: the loss added per token of the text when the `fraction` of
    tokens with the highest gate scores take the linear path, and when as many are chosen at
    random (in expectation)."""
    delta, scores = delta.double().flatten(), scores.double().flatten()
    k = round(fraction * delta.numel())
    routed = torch.zeros_like(delta, dtype=torch.bool)
    routed[scores.argsort(descending=True)[:k]] = True
    return float((delta * routed).sum() / delta.numel()), float(k / delta.numel() * delta.mean())


def _skewed(n, seed):
    """δ as a linearized layer's: most tokens near zero, a few that lose a lot."""
    g = _gen(seed)
    d = torch.randn(n, generator=g, dtype=torch.float64) * 0.02
    big = torch.rand(n, generator=g) < 0.1
    return torch.where(big, d.abs() * 40 + 0.3, d)


def routing_costs(student) -> None:
    """Exercise 4.5: the loss a gate adds by routing the top-scored fraction of tokens to the
    linear path, against random routing of as many."""
    cases = []
    for i, (n, f) in enumerate(((400, 0.5), (333, 0.25), (1000, 0.75))):
        delta = _skewed(n, i)
        scores = -delta + torch.randn(n, generator=_gen(50 + i), dtype=torch.float64) * 0.5
        cases.append((f"{n} tokens, fraction {f}", (delta, scores, f)))
    return check_function("routing_costs",
                          lambda d, s, f: tuple(float(v) for v in student(d.clone(), s.clone(), f)),
                          _routing_costs, cases, atol=1e-9, rtol=1e-6)


#: Why the prediction of `predict_flop_ratio` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_FLOP_RATIO = (
    "Per token, a gated MLP runs three $d\\times n$ products and the surrogate one $d\\times "
    "d$ product: the ratio is $3n/d$. Routing a token saves that MLP minus the surrogate; "
    "the gate itself costs one dot product on every token. Chapter 04 counts FLOPs this "
    "way, and chapter 07 asks how much of it turns into wall-clock.")
