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


def predict_exchange_symmetric(predicted, profile: str, results_dir=None) -> None:
    """Exercise 1.2: the activations for which the gated MLP is exchange-symmetric."""
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
    """Exercise 1.3: nonzero q, k with which the gated form σ(q·x)(k·x) of the SiLU passes the
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
                hint = ("σ(a)b = σ(b)a for all a, b only holds for linear σ (exercise 1.3's "
                        "proof); with the SiLU it can only hold when a = b for every x")
            raise CheckFailed(f"✗ {name}: wrong for d = {d}\n  what differs: the exchange "
                              f"error\n  expected: 0 with q, k ≠ 0\n  got:      {err:.3g} "
                              f"(‖q‖ = {float(q.norm()):.3g}, ‖k‖ = {float(k.norm()):.3g})\n"
                              f"  hint: {hint}")
    print(f"✓ {name}: the SiLU passes the exchange test with your q, k (d = 3 and 8) — a "
          "test that cannot tell this σ from a linear one")


def _module_units(Q, K, V):
    """Per unit j: |cos(q_j, k_j)| (1 when either is zero) and ‖v_j‖."""
    qn, kn = Q.norm(dim=1), K.norm(dim=1)
    cos = ((Q * K).sum(1) / (qn * kn)).abs().nan_to_num(1.0)
    return torch.where((qn == 0) | (kn == 0), torch.ones_like(cos), cos), V.norm(dim=0)


def symmetric_module(student) -> None:
    """Exercise 1.4: `student(d, n)` returns (Q, K, V) — n × d, n × d, d × n, `nn.Linear`'s
    layout — of a SiLU gated MLP whose every unit counts (q_j, k_j linearly independent,
    v_j ≠ 0) and that equals its exchanged copy on every input. Any such weights pass."""
    name = "symmetric_module"
    for d, n in ((3, 4), (6, 8)):
        out = _call(name, f"d = {d}, n = {n}", student, d, n)
        Q, K, V = (torch.as_tensor(w, dtype=torch.float64) for w in out)
        if Q.shape != (n, d) or K.shape != (n, d) or V.shape != (d, n):
            raise CheckFailed(f"✗ {name}: wrong for d = {d}, n = {n}\n  what differs: shapes"
                              f"\n  expected: Q {(n, d)}, K {(n, d)}, V {(d, n)}\n  got:      "
                              f"Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)}")
        cos, vnorm = _module_units(Q, K, V)
        x = _randn(400, d, seed=40 + d)
        y, y_ex = ((F.silu(x @ A.T) * (x @ B.T)) @ V.T for A, B in ((Q, K), (K, Q)))
        err = float((y - y_ex).norm() / y.norm()) if float(y.norm()) > 0 else math.nan
        parallel = [j for j in range(n) if float(cos[j]) > 1 - 1e-6]
        silent = [j for j in range(n) if float(vnorm[j]) < 1e-9 * max(float(vnorm.max()), 1.0)]
        if parallel:
            got = f"unit {parallel[0]}'s q and k parallel (|cos| = {float(cos[parallel[0]]):.6f})"
            hint = ("that is exercise 1.3's way, one unit at a time: here every unit's q and k "
                    "must point in different directions, as they do in any trained model")
        elif silent:
            got = f"unit {silent[0]}'s value v = 0"
            hint = ("a unit with v = 0 adds nothing whatever σ does: the test cannot see it. "
                    "Give every unit a nonzero value")
        elif not err < 1e-9:
            got = f"exchange error {err:.3g}"
            hint = ("one unit with independent q and k fails for the SiLU (section 5 of the "
                    "chapter): no single unit can pass. The exchange swaps q and k in every "
                    "unit at once — what if unit j's exchanged copy is another unit of the "
                    "module?")
        else:
            continue
        raise CheckFailed(f"✗ {name}: wrong for d = {d}, n = {n}\n  what differs: every unit "
                          f"counting, and the exchange error\n  expected: independent q_j, k_j,"
                          f" v_j ≠ 0, error 0\n  got:      {got}\n  hint: {hint}")
    print(f"✓ {name}: every unit counts, σ is the SiLU, and your module passes the exchange "
          "test (d = 3 and 6) — a test on these weights cannot tell σ from a linear one")


#: Why the prediction of `predict_exchange_symmetric` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_EXCHANGE_SYMMETRIC = (
    "Exchange symmetry asks $\\sigma(a)\\,b = \\sigma(b)\\,a$ for every $a, b$. Put $b = 1$: "
    "$\\sigma(a) = \\sigma(1)\\,a$ — only a linear $\\sigma$ can pass (exercise 1.3 writes the "
    "proof out). The measured errors show how far each nonlinear activation is from "
    "passing, not just that it fails.")
