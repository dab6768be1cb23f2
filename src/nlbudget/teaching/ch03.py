"""Exercise checks of chapter 03 (Part II): each names the exercise it checks."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from nlbudget import evaluation, surrogates
from nlbudget.teaching.machinery import (CheckFailed, _call, _gen, _randn, chapter_results, data,
                                         check_function, check_prediction)


def _logits_cases():
    out = []
    for s, (B, T, V) in enumerate(((1, 5, 7), (3, 8, 11), (2, 2, 4))):
        logits = _randn(B, T, V, seed=s, dtype=torch.float32) * 2
        ids = torch.randint(0, V, (B, T), generator=_gen(50 + s))
        out.append((f"B = {B}, T = {T}, vocabulary {V}", (logits, ids)))
    return out


def token_nll(student) -> None:
    """Exercise 3.1 (a): per-token next-token loss, (B, T−1)."""
    unshifted = (lambda l, i: F.cross_entropy(l[:, 1:].transpose(1, 2).float(), i[:, 1:],
                                              reduction="none"),
                 "the logits at position t predict token t + 1: compare logits[:, :-1] with "
                 "ids[:, 1:]")
    return check_function("token_nll", lambda l, i: torch.as_tensor(student(l, i)),
                          evaluation.token_nll, _logits_cases(), atol=1e-5, rtol=1e-5,
                          hints=[unshifted])


def perplexity(student) -> None:
    """Exercise 3.1 (b): exp of the mean per-token loss."""
    cases = [(desc, (evaluation.token_nll(l, i),)) for desc, (l, i) in _logits_cases()]
    cases.append(("a (2, 3) loss of all zeros", (torch.zeros(2, 3),)))
    hints = [(lambda n: math.exp(float(n.double().sum())),
              "exp of the *mean* loss per token, not of the sum"),
             (lambda n: float(n.double().exp().mean()), "exp of the mean, not the mean of exp")]
    return check_function("perplexity", lambda n: float(student(n)), evaluation.perplexity,
                          cases, atol=1e-9, rtol=1e-9, hints=hints)


@data
def sink_layer(seed: int, windows: int = 24, T: int = 16, d: int = 6, sink: float = 30.0):
    """Exercise 3.4's layer, with an attention sink as chapter 03 finds in SmolLM2: position 0's
    inputs are `sink` times larger than the others', and its output another function of them.
    Returns (X, Y), each (windows, T, d)."""
    g = _gen(seed)
    A = torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5
    B = torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5
    X = torch.randn(windows, T, d, generator=g, dtype=torch.float64)
    X[:, 0] *= sink
    Y = X @ A + 0.3 * torch.tanh(X) @ B
    Y[:, 0] = 5 * torch.tanh(X[:, 0] @ B)
    return X, Y


def _held_out_r2(fit, X, Y) -> float:
    """R² of `fit(X_train, Y_train)` on positions 1 … of the held-out windows (a third)."""
    n = 2 * X.shape[0] // 3
    f = fit(X[:n].clone(), Y[:n].clone())
    Xt, Yt = X[n:, 1:].reshape(-1, X.shape[-1]), Y[n:, 1:].reshape(-1, Y.shape[-1])
    return surrogates.r_squared(lambda x: torch.as_tensor(f(x.clone())).reshape(Yt.shape),
                                Xt, Yt)


def _fit_rows(X, Y, keep_first: bool):
    X, Y = (X[:, 1:], Y[:, 1:]) if keep_first else (X, Y)
    return surrogates.fit_ridge(X.flatten(0, 1), Y.flatten(0, 1), dtype=torch.float64)


def keep_first_fit(student) -> None:
    """Exercise 3.4: `student(X, Y)` fits a linear surrogate of a layer from its inputs and
    outputs X, Y (windows × positions × d) for every position but the first, and returns it (a
    function of inputs (…, d)). Any fit that predicts the held-out positions 1 … as well as the
    ridge surrogate does (R² within 0.01) passes; one that lets position 0 in is named."""
    name = "keep_first_fit"
    for seed in range(3):
        X, Y = sink_layer(seed)
        want = _held_out_r2(lambda a, b: _fit_rows(a, b, True), X, Y)
        got = _call(name, f"layer seed {seed}", lambda: _held_out_r2(student, X, Y))
        if not got >= want - 0.01:
            plain = _held_out_r2(lambda a, b: _fit_rows(a, b, False), X, Y)
            hint = ("position 0 is in your fit: its inputs are 30 times larger than the others',"
                    " so least squares bends to fit it and misses every other position — leave"
                    " it out (X[:, 1:])" if abs(got - plain) < 0.05 else
                    "fit Y on X by least squares over the rows of positions 1 … (with a bias, or "
                    "centred data), and return a function that applies the fit")
            raise CheckFailed(f"✗ {name}: wrong for layer seed {seed}\n"
                              f"  what differs: R² on the held-out windows' positions 1 …\n"
                              f"  expected: at least {want - 0.01:.3f} (the ridge surrogate "
                              f"fit without position 0: {want:.3f})\n"
                              f"  got:      {got:.3f}\n  hint: {hint}")
    print(f"✓ {name}: your surrogate predicts the held-out positions as well as the ridge "
          "surrogate fit without position 0 (3 layers)")


def predict_pair_uses_mlps(predicted, profile: str, results_dir=None) -> None:
    """Exercise 3.2: does zeroing every MLP of the trained pair raise its perplexity?"""
    if not isinstance(predicted, bool):
        raise CheckFailed(f"a prediction is True or False, got {predicted!r}")
    pair = chapter_results("03", profile, results_dir)["figures"]["pair"]
    costs = {k: v["ablation"]["cost"] for k, v in pair.items()}
    measured = all(c > 0 for c in costs.values())
    detail = "Ablation costs: " + ", ".join(f"{k} {c:+.1%}" for k, c in costs.items()) + "."
    return check_prediction("the pair uses its MLPs", predicted, measured, profile, detail,
                            why=WHY_PAIR_USES_MLPS)


_SCALES = (0.03, 0.3, 3.0, 30.0)


def _linearity_by_scale(kind: str, scales=_SCALES, d: int = 16, n: int = 64, N: int = 3000,
                       seed: int = 0) -> list[float]:
    """Exercise 3.3's experiment: R² on held-out inputs of a ridge surrogate fit to a random
    MLP — "gelu": GELU(x W₁ᵀ) Vᵀ, "gated": (SiLU(x W₁ᵀ) ⊙ x W₂ᵀ) Vᵀ — for Gaussian inputs x
    of each spread in `scales`."""
    g = _gen(seed)
    W1 = torch.randn(n, d, generator=g, dtype=torch.float64) / d ** 0.5
    W2 = torch.randn(n, d, generator=g, dtype=torch.float64) / d ** 0.5
    V = torch.randn(d, n, generator=g, dtype=torch.float64) / n ** 0.5
    f = {"gelu": lambda x: F.gelu(x @ W1.T) @ V.T,
         "gated": lambda x: (F.silu(x @ W1.T) * (x @ W2.T)) @ V.T}[kind]
    out = []
    for s in scales:
        X, Xh = (torch.randn(N, d, generator=g, dtype=torch.float64) * s for _ in range(2))
        sur = surrogates.fit_ridge(X, f(X), lam=1e-6 * s * s, dtype=torch.float64)
        out.append(surrogates.r_squared(sur, Xh, f(Xh)))
    return out


def predict_linearity_by_scale(predicted, profile: str = "ci", results_dir=None) -> None:
    """Exercise 3.3: as the inputs' spread grows from 0.03 to 30, does a linear surrogate's R²
    rise or fall — for a GELU MLP, and for a gated (SiLU) MLP? Measured here, on the spot."""
    if not (isinstance(predicted, dict) and set(predicted) == {"gelu", "gated"}
            and set(predicted.values()) <= {"rises", "falls"}):
        raise CheckFailed('a prediction is {"gelu": "rises" or "falls", "gated": "rises" or '
                          f'"falls"}}, got {predicted!r}')
    r2 = {k: _linearity_by_scale(k) for k in ("gelu", "gated")}
    measured = {k: "rises" if v[-1] > v[0] else "falls" for k, v in r2.items()}
    detail = "R² at spreads " + ", ".join(f"{s:g}" for s in _SCALES) + ": " + "; ".join(
        f"{k} " + ", ".join(f"{x:.2f}" for x in v) for k, v in r2.items()) + "."
    return check_prediction("linearity by scale", predicted, measured, profile, detail,
                            why=WHY_LINEARITY_BY_SCALE)


#: Why the prediction of `predict_pair_uses_mlps` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_PAIR_USES_MLPS = (
    "Chapter 03 reads a cheap linearization as \"this layer's nonlinearity is not needed\". "
    "That reading only makes sense if the model needs its MLPs at all: zeroing every MLP of"
    " a trained model should cost perplexity. If it did not, a low linearization cost would"
    " mean nothing.")


#: Why the prediction of `predict_linearity_by_scale` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_LINEARITY_BY_SCALE = (
    "Near zero $\\mathrm{GELU}(a)\\approx a/2$, so the GELU MLP *is* a linear map and a "
    "surrogate captures it; far out it is piecewise linear and one map misses the kinks. "
    "The gated MLP near zero is $\\mathrm{SiLU}(a)\\,b\\approx ab/2$, a quadratic form with no"
    " linear part for symmetric inputs; far out "
    "$\\mathrm{SiLU}(a)\\,b\\approx\\mathrm{ReLU}(a)\\,b = \\tfrac12 ab + \\tfrac12 |a|\\,b$: "
    "still quadratic in $x$, linear on neither half-space; its even part $\\tfrac12 ab$ has no "
    "linear projection for symmetric inputs, but its odd part $\\tfrac12|a|\\,b$ has one, "
    "which a linear map catches: that odd part is what \"half linear\" means. Where a trained"
    " model's MLP inputs sit on this scale decides how linear its layers look.")
