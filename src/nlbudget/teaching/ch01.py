"""Exercise checks of chapter 01 (Part I): each names the exercise it checks."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from nlbudget import bilinear
from nlbudget.teaching.machinery import (CheckFailed, _call, _randn, chapter_results,
                                         check_function, check_prediction)


def _qkv(cls, act, d, n, seed):
    torch.manual_seed(seed)
    m = cls(d, n, act=act).double()
    return m, m.q.weight.detach(), m.k.weight.detach(), m.v.weight.detach()


def _qkv_cases(seeds=(0, 1, 2)):
    out = []
    for i, act in enumerate(("silu", "relu", "gelu", "linear")):
        for s in seeds:
            d, n = 3 + s, 4 + 2 * s
            x = _randn(5, d, seed=100 + s)
            out.append((f"σ = {act}, d = {d}, n = {n}, seed {s}", (act, d, n, s, x)))
    return out


def _qkv_check(name: str, cls, student, hints=()) -> None:
    def ref(act, d, n, s, x):
        return _qkv(cls, act, d, n, s)[0](x).detach()

    def stu(act, d, n, s, x):
        _, Q, K, V = _qkv(cls, act, d, n, s)
        return student(x, Q, K, V, act)

    def as_case(form):  # a known wrong form, called with the case's arguments
        return lambda act, d, n, s, x: form(x, *_qkv(cls, act, d, n, s)[1:], act)
    return check_function(name, stu, ref, _qkv_cases(),
                          hints=[(as_case(f), h) for f, h in hints])


def _act(act):
    return bilinear.ACTIVATIONS[act]


#: Known wrong forms of the two MLPs (Q, K, V in `nn.Linear`'s layout).
_SIGMA_ON_UP = (lambda x, Q, K, V, act: ((x @ Q.T) * _act(act)(x @ K.T)) @ V.T,
                "σ is on the wrong branch: it acts on the gate xQᵀ; the up branch xKᵀ stays linear")
_SYMMETRIC = (lambda x, Q, K, V, act: _act(act)((x @ Q.T) * (x @ K.T)) @ V.T,
              "that is the symmetric form, eq. (4): the gated form puts σ on one branch only")
_GATED = (lambda x, Q, K, V, act: (_act(act)(x @ Q.T) * (x @ K.T)) @ V.T,
          "that is the gated form, eq. (5): the symmetric form puts σ around the product")


def gated_mlp(student) -> None:
    """Exercise 1.1 (a): eq. (5), (σ(x Qᵀ) ⊙ x Kᵀ) Vᵀ with weights in `nn.Linear`'s layout."""
    return _qkv_check("gated_mlp (eq. 5)", bilinear.GatedMLP, student, [_SIGMA_ON_UP, _SYMMETRIC])


def symmetric_mlp(student) -> None:
    """Exercise 1.1 (b): eq. (4), σ((x Qᵀ) ⊙ (x Kᵀ)) Vᵀ."""
    return _qkv_check("symmetric_mlp (eq. 4)", bilinear.SymmetricBilinearMLP, student, [_GATED])


def exchange_error(student) -> None:
    """Exercise 1.2: ‖f(x) − f'(x)‖ / ‖f(x)‖ for the gated MLP f and its exchanged copy f'."""
    def ref(act, d, n, s, x):
        m = _qkv(bilinear.GatedMLP, act, d, n, s)[0]
        return bilinear.relative_error(m, bilinear.exchanged(m), x)

    def stu(act, d, n, s, x):
        _, Q, K, V = _qkv(bilinear.GatedMLP, act, d, n, s)
        return float(student(x, Q, K, V, act))
    @torch.no_grad()
    def absolute(act, d, n, s, x):
        m = _qkv(bilinear.GatedMLP, act, d, n, s)[0]
        return float((m(x) - bilinear.exchanged(m)(x)).norm())

    @torch.no_grad()
    def over_exchanged(act, d, n, s, x):
        m = _qkv(bilinear.GatedMLP, act, d, n, s)[0]
        e = bilinear.exchanged(m)
        return float((m(x) - e(x)).norm() / e(x).norm())
    hints = [(absolute, "that is ‖f(x) − f'(x)‖ itself: divide by ‖f(x)‖, so the error does not "
                        "grow with the scale of x"),
             (over_exchanged, "divide by ‖f(x)‖, the original's output, not the exchanged "
                              "copy's")]
    return check_function("exchange_error", stu, ref, _qkv_cases(), atol=1e-9, rtol=1e-6,
                          hints=hints)


def predict_exchange_symmetric(predicted, profile: str, results_dir=None) -> None:
    """Exercise 1.3: the activations for which the gated MLP is exchange-symmetric."""
    acts = set(bilinear.ACTIVATIONS) & {"relu", "gelu", "silu", "linear"}
    if not isinstance(predicted, (set, frozenset)) or not set(predicted) <= acts:
        raise CheckFailed(f"a prediction is a set of activation names from {sorted(acts)}, "
                          f"got {predicted!r}")
    errors = chapter_results("01", profile, results_dir)["figures"]["exchange_error_gated"]
    measured = {a for a, e in errors.items() if e < 1e-9}
    detail = "Relative errors: " + ", ".join(f"{a} {e:.2g}" for a, e in errors.items()) + "."
    return check_prediction("exchange symmetry", set(predicted), measured, profile, detail,
                            why=WHY_EXCHANGE_SYMMETRIC)


def passing_pair(student) -> None:
    """Exercise 1.4: nonzero q, k with which the gated form σ(q·x)(k·x) of the SiLU passes the
    exchange test — its branches exchanged give the same output on every x."""
    name = "passing_pair"
    for d in (3, 8):
        q, k = (torch.as_tensor(v, dtype=torch.float64).flatten()
                for v in _call(name, f"d = {d}", student, d))
        if q.shape != (d,) or k.shape != (d,):
            raise CheckFailed(f"✗ {name}: wrong for d = {d}\n  what differs: shapes\n"
                              f"  expected: two vectors of {d}\n  got:      {tuple(q.shape)}, "
                              f"{tuple(k.shape)}")
        x = _randn(200, d, seed=d)
        a, b = x @ q, x @ k
        y, y_ex = F.silu(a) * b, F.silu(b) * a
        err = float((y - y_ex).norm() / y.norm()) if float(y.norm()) > 0 else math.nan
        if float(q.norm()) == 0 or float(k.norm()) == 0 or not err < 1e-9:
            if float(q.norm()) == 0 or float(k.norm()) == 0:
                hint = ("with q or k zero both sides are σ(0)·0 = 0: the test then compares "
                        "nothing. Find nonzero q and k")
            elif abs(float(torch.nn.functional.cosine_similarity(q, k, dim=0))) > 1 - 1e-9:
                c = float(k @ q / (q @ q))
                hint = (f"k is a multiple of q, k = c·q with c = {c:.3g} ("
                        + ("the same direction, another length" if c > 0 else
                           "the opposite direction") + "): then σ(a)·c·a = σ(c·a)·a must hold "
                        "for every a, which the SiLU (not odd, not linear) satisfies only at "
                        "one c — which?")
            else:
                hint = ("σ(a)b = σ(b)a for all a, b only holds for linear σ (exercise 1.4's "
                        "proof); with the SiLU it can only hold when a = b for every x")
            raise CheckFailed(f"✗ {name}: wrong for d = {d}\n  what differs: the exchange "
                              f"error\n  expected: 0 with q, k ≠ 0\n  got:      {err:.3g} "
                              f"(‖q‖ = {float(q.norm()):.3g}, ‖k‖ = {float(k.norm()):.3g})\n"
                              f"  hint: {hint}")
    print(f"✓ {name}: the SiLU passes the exchange test with your q, k (d = 3 and 8) — a "
          "test that cannot tell this σ from a linear one")


#: Why the prediction of `predict_exchange_symmetric` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_EXCHANGE_SYMMETRIC = (
    "Exchange symmetry asks $\\sigma(a)\\,b = \\sigma(b)\\,a$ for every $a, b$. Put $b = 1$: "
    "$\\sigma(a) = \\sigma(1)\\,a$ — only a linear $\\sigma$ can pass (exercise 1.4 writes the "
    "proof out). The measured errors show how far each nonlinear activation is from "
    "passing, not just that it fails.")
