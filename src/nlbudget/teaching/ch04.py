"""Exercise checks of chapter 04 (Part II): each names the exercise it checks."""

from __future__ import annotations

import math

import torch

from nlbudget import gating
from nlbudget.teaching.machinery import (CheckFailed, _call, _gen, _randn, chapter_results,
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


def threshold_for_fraction(student) -> None:
    """Exercise 4.3: the threshold with a given fraction of scores above it. Judged by what
    the threshold does, not by its value: any t with ⌊f·n⌋ or ⌈f·n⌉ of the n scores above it
    is right (`torch.quantile`'s interpolation and a threshold read off the sorted scores
    both are), and the hint names the known wrong ones."""
    name = "threshold_for_fraction"
    cases = [(n, f) for n, f in ((100, 0.5), (37, 0.2), (64, 0.9), (10, 0.0))]
    for n, f in cases:
        scores = _randn(n, seed=n)
        t = float(_call(name, f"{n} scores, fraction {f}", student, scores.clone(), f))
        above = int((scores > t).sum())
        ok = {math.floor(f * n), math.ceil(f * n)}
        if above not in ok:
            hint = ("the fraction *below* your threshold is the one asked for: route where "
                    "g > t, so take the (1 − f) quantile" if n - above in ok else
                    "count how many scores lie above your threshold; it should be f·n")
            raise CheckFailed(f"✗ {name}: wrong for {n} scores, fraction {f}\n"
                              f"  what differs: how many scores lie above the threshold\n"
                              f"  expected: {' or '.join(map(str, sorted(ok)))}\n"
                              f"  got:      {above} (your threshold {t:.4g})\n  hint: {hint}")
    print(f"✓ {name}: routes the asked fraction on all {len(cases)} seeded cases")


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
