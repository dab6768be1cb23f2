"""Exercise checks of chapter 07 (Part V): each names the exercise it checks."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from nlbudget import random_features, surrogates
from nlbudget.teaching.machinery import (CheckFailed, _randn, chapter_results, check_function,
                                         check_prediction)


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


def spearman(student) -> None:
    """Exercise 7.2: Spearman's ρ of two lenses across layers (no ties)."""
    from scipy import stats as sps

    cases = []
    for s, n in enumerate((30, 12, 5)):
        x, y = _randn(n, seed=60 + s), _randn(n, seed=65 + s)
        cases.append((f"{n} layers, seed {s}", (x, y + (0.5 * s) * x)))
    hints = [(lambda x, y: float(sps.pearsonr(x.numpy(), y.numpy()).statistic),
              "that is Pearson's r of the values: Spearman's ρ is Pearson's r of their ranks")]
    return check_function("Spearman ρ", lambda x, y: float(student(x.numpy(), y.numpy())),
                          lambda x, y: float(sps.spearmanr(x.numpy(), y.numpy()).statistic),
                          cases, atol=1e-9, rtol=1e-9, hints=hints)


def predict_cv_lambda_larger(predicted, profile: str, results_dir=None) -> None:
    """Exercise 7.3: does cross-validation choose, at every layer, a ridge λ larger than the
    0.01 P3 uses for the linear surrogate?"""
    if not isinstance(predicted, bool):
        raise CheckFailed(f"a prediction is True or False, got {predicted!r}")
    rows = chapter_results("07", profile, results_dir)["figures"]["measured"]["per_layer"]
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
