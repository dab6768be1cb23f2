"""Checks for the exercise notebooks (`notebooks/exercises/`): a student's function against
the library's own, on seeded cases.

A function check calls the student's function and the reference on the same inputs; it prints
one line (✓) when every case agrees, and otherwise raises `CheckFailed`, naming the case, what
was expected, what came back and the largest difference. A stub that still raises
`NotImplementedError` is not caught: the notebook stops there.

A prediction check compares a prediction with the chapter's results file (what this build
measured). A prediction is a claim about data, not code: a wrong one is reported (✗, with the
measured value); it raises only for a prediction of the wrong form.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from nlbudget import (bilinear, evaluation, gating, preprojection, random_features, surrogates,
                      symmetry, tasks, universal)
from nlbudget.book import profiles
from nlbudget.verdicts import claims, results, stats


class CheckFailed(AssertionError):
    """The student's function disagrees with the reference; the message says where."""


# ------------------------------------------------------------------ machinery

def _show(v, width: int = 160) -> str:
    if isinstance(v, torch.Tensor):
        flat = v.detach().flatten()[:6].tolist()
        s = f"tensor of shape {tuple(v.shape)}, {v.dtype}: first values {flat}"
    else:
        s = repr(v)
    return s if len(s) <= width else s[:width] + "…"


def _difference(got, want, atol: float, rtol: float):
    """None when `got` matches `want`, else (what differs, largest difference or None)."""
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor, got {type(got).__name__}", None
        if got.shape != want.shape:
            return f"shape {tuple(got.shape)} instead of {tuple(want.shape)}", None
        if want.dtype == torch.bool or got.dtype == torch.bool:
            bad = int((got.bool() != want.bool()).sum())
            return (f"{bad} of {want.numel()} entries differ", None) if bad else None
        diff = (got.double() - want.double()).abs()
        tol = atol + rtol * want.double().abs()
        if not torch.isfinite(got.double()).all():
            return "non-finite values", None
        if bool((diff > tol).any()):
            return "values differ", float(diff.max())
        return None
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"expected {len(want)} results, got {_show(got)}", None
        for i, (g, w) in enumerate(zip(got, want)):
            d = _difference(g, w, atol, rtol)
            if d is not None:
                return f"result {i}: {d[0]}", d[1]
        return None
    if isinstance(want, bool):
        return None if got == want else ("differs", None)
    if isinstance(want, (int, float)):
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return f"expected a number, got {type(got).__name__}", None
        if not math.isclose(got, want, rel_tol=rtol, abs_tol=atol):
            return "values differ", abs(got - want)
        return None
    return None if got == want else ("differs", None)


def _call(name: str, desc: str, student, *args):
    """The student's function on one case; a stub's NotImplementedError passes through (the
    exercise is still to do), any other error becomes a `CheckFailed` naming the case."""
    try:
        return student(*args)
    except NotImplementedError:
        raise
    except Exception as e:
        raise CheckFailed(f"✗ {name}: your function raised {type(e).__name__} for {desc}: "
                          f"{e}") from e


def check_function(name: str, student, reference, cases: list[tuple[str, tuple]],
                   atol: float = 1e-6, rtol: float = 1e-5, hints=()) -> None:
    """Call `student(*args)` and `reference(*args)` for every (description, args) case.
    Prints a success line or raises `CheckFailed` (nothing is returned, so a notebook's check
    cell shows only the line). `hints`: (a known wrong answer, called like the reference; what
    to say) — where the student's result is that wrong answer's, the message says so."""
    for desc, args in cases:
        want = reference(*args)
        got = _call(name, desc, student, *args)
        d = _difference(got, want, atol, rtol)
        if d is not None:
            what, largest = d
            msg = [f"✗ {name}: wrong for {desc}", f"  what differs: {what}",
                   f"  expected: {_show(want)}", f"  got:      {_show(got)}"]
            if largest is not None:
                msg.append(f"  largest difference: {largest:.3g} (tolerance {atol:g} + "
                           f"{rtol:g}·|expected|)")
            msg += [f"  hint: {h}" for wrong, h in hints if _same(got, wrong, args, atol, rtol)]
            raise CheckFailed("\n".join(msg))
    print(f"✓ {name}: matches the library on all {len(cases)} seeded cases")


def _same(got, wrong, args, atol, rtol) -> bool:
    """Whether `got` is what the known wrong answer `wrong` gives on `args` (to a looser
    tolerance than the check's: the same mistake, computed another way, still counts)."""
    try:
        return _difference(got, wrong(*args), max(atol, 1e-6), max(rtol, 1e-4)) is None
    except Exception:  # a wrong answer that cannot even run on this case
        return False


def check_prediction(name: str, predicted, measured, profile: str, detail: str = "",
                     right: bool | None = None) -> bool:
    """Compare a prediction with what the build measured (equal, unless `right` says);
    report either way: ✓, or ✗ with the measured value. Returns whether it was right."""
    ok = bool((predicted == measured) if right is None else right)
    if ok:
        print(f"✓ {name}: you predicted {predicted!r}; the book measured {measured!r} "
              f"(profile {profile}). {detail}".rstrip())
    else:
        print(f"✗ {name}: you predicted {predicted!r}, but the book measured {measured!r} "
              f"(profile {profile}). {detail}".rstrip())
    return ok


#: This notebook's checks so far: {check: passed}. `start` clears it, `score` reports it.
_SCORE: dict[str, bool] = {}


def _scored(check):
    """Record a check's outcome: passed unless it raised `CheckFailed` or reported a wrong
    prediction (a stub's NotImplementedError records nothing: the exercise is not done)."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            out = check(*args, **kwargs)
        except CheckFailed:
            _SCORE[check.__name__] = False
            raise
        _SCORE[check.__name__] = out is not False
    return run


def score() -> tuple[int, int]:
    """For auto-grading: how many of this notebook's checks have passed, of those run (a check
    that raises stops a notebook: grade cell by cell, or execute with nbclient's
    `allow_errors=True`). Prints one line; returns (passed, run)."""
    passed = sum(_SCORE.values())
    failed = sorted(k for k, v in _SCORE.items() if not v)
    print(f"score: {passed} of {len(_SCORE)} checks passed"
          + (f" (not yet: {', '.join(failed)})" if failed else ""))
    return passed, len(_SCORE)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed), dtype=dtype)


def _valid(key: str, profile: str) -> None:
    profiles.chapter(key)
    if profile not in profiles.PROFILES:
        raise profiles.ParameterError(f"unknown profile {profile!r}; valid profiles: "
                                      f"{', '.join(profiles.PROFILES)}")


def start(key: str, profile: str) -> None:
    """An exercise notebook's first cell: a known chapter and profile (or a message that names
    the valid ones), and a fresh `score`."""
    _valid(key, profile)
    _SCORE.clear()


def chapter_results(key: str, profile: str, results_dir=None) -> dict:
    """The chapter's results file at `profile` (the figures a prediction is checked against).
    Fails at once for an unknown profile; says which command writes a missing file."""
    _valid(key, profile)
    return results.read(profiles.chapter(key).stem, profile, results_dir)


# ------------------------------------------------------------------ Part I: chapter 01

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
    return check_function("exchange_error", stu, ref, _qkv_cases(), atol=1e-9, rtol=1e-6)


def predict_exchange_symmetric(predicted, profile: str, results_dir=None) -> None:
    """Exercise 1.3: the activations for which the gated MLP is exchange-symmetric."""
    acts = set(bilinear.ACTIVATIONS) & {"relu", "gelu", "silu", "linear"}
    if not isinstance(predicted, (set, frozenset)) or not set(predicted) <= acts:
        raise CheckFailed(f"a prediction is a set of activation names from {sorted(acts)}, "
                          f"got {predicted!r}")
    errors = chapter_results("01", profile, results_dir)["figures"]["exchange_error_gated"]
    measured = {a for a, e in errors.items() if e < 1e-9}
    detail = "Relative errors: " + ", ".join(f"{a} {e:.2g}" for a, e in errors.items()) + "."
    return check_prediction("exchange symmetry", set(predicted), measured, profile, detail)


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
                hint = ("q and k point the same way, but with different lengths: σ(c·a)·a and "
                        "σ(a)·c·a differ unless σ is linear — which multiple c is left?")
            else:
                hint = ("σ(a)b = σ(b)a for all a, b only holds for linear σ (exercise 1.4's "
                        "proof); with the SiLU it can only hold when a = b for every x")
            raise CheckFailed(f"✗ {name}: wrong for d = {d}\n  what differs: the exchange "
                              f"error\n  expected: 0 with q, k ≠ 0\n  got:      {err:.3g} "
                              f"(‖q‖ = {float(q.norm()):.3g}, ‖k‖ = {float(k.norm()):.3g})\n"
                              f"  hint: {hint}")
    print(f"✓ {name}: the SiLU passes the exchange test with your q, k (d = 3 and 8) — a "
          "test that cannot tell this σ from a linear one")


# ------------------------------------------------------------------ Part I: chapter 02

def hidden_width(student) -> None:
    """Exercise 2.1: hidden units that give a variant `budget` weights at width d."""
    cases = [(f"{v}, d = {d}, budget = {b}", (v, d, b))
             for v in bilinear.VARIANTS for d, b in ((64, 8 * 64 * 64), (96, 20_000), (7, 100))]
    return check_function("hidden_width", lambda *a: int(student(*a)), bilinear.hidden_width,
                          cases, atol=0, rtol=0)


def _llama_mlp(Wg, Wu, Wd):
    lin = [torch.nn.Linear(1, 1, bias=False) for _ in range(3)]
    for l, w in zip(lin, (Wg, Wu, Wd)):
        l.weight = torch.nn.Parameter(w)
    return SimpleNamespace(gate_proj=lin[0], up_proj=lin[1], down_proj=lin[2], act_fn=F.silu)


def llama_exchange(student) -> None:
    """Exercise 2.2: the relative output change of a Llama-style MLP
    down(SiLU(gate x) ⊙ up x) when its gate and up projections are exchanged."""
    cases = []
    for s in range(4):
        d, n = 4 + s, 6 + 3 * s
        Wg, Wu = _randn(n, d, seed=10 * s), _randn(n, d, seed=10 * s + 1)
        Wd, x = _randn(d, n, seed=10 * s + 2), _randn(8, d, seed=10 * s + 3)
        cases.append((f"d = {d}, n = {n}, seed {s}", (Wg, Wu, Wd, x)))

    def ref(Wg, Wu, Wd, x):
        with torch.no_grad():
            return symmetry.gate_asymmetry(_llama_mlp(Wg, Wu, Wd), x)["exchange"]
    return check_function("llama_exchange", lambda *a: float(student(*a)), ref, cases,
                          atol=1e-9, rtol=1e-6)


def predict_gated_width(predict, profile: str, results_dir=None) -> None:
    """Exercise 2.3: the hidden units of the gated MLP at the standard MLP's budget, 8d²
    weights, as a function `predict(d)` of the width."""
    doc = chapter_results("02", profile, results_dir)
    d = doc["parameters"]["lm_d_model"]
    got = predict(d)
    if not isinstance(got, int) or isinstance(got, bool) or got < 1:
        raise CheckFailed(f"a prediction is a number of hidden units (an integer ≥ 1); "
                          f"predict({d}) gave {got!r}")
    table = doc["figures"]["param_table"]
    measured = table["gated-silu"]["hidden units"]
    detail = f"At d = {d}: " + ", ".join(f"{v} {r['hidden units']}" for v, r in table.items())
    return check_prediction(f"gated hidden units at d = {d}", got, measured, profile,
                            detail + ".")


def _verdict_of(effect_lo, effect_hi, min_effect):
    return claims.effect(effect_lo, effect_hi, min_effect=min_effect).verdict


def _decide_reference(gated, symmetric, min_effect):
    """The chapter's rule: the claim "the gated form has lower perplexity by at least
    `min_effect`" on the paired interval of symmetric − gated over seeds."""
    _, lo, hi = stats.paired_interval(symmetric, gated)
    return _verdict_of(lo, hi, min_effect)


#: Per-seed perplexities (gated, symmetric), min effect: one case per verdict and the traps.
_DECIDE_CASES = [
    ("a clear gain", ([40.1, 41.0, 39.6], [44.0, 45.2, 43.1], 1.0)),
    ("a gain too small to count", ([40.1, 41.0, 39.6], [40.3, 41.1, 39.9], 1.0)),
    ("seeds that differ more than the forms", ([35.0, 41.0, 47.0], [36.2, 42.3, 48.1], 0.5)),
    ("a noisy gain", ([40.0, 43.0, 38.0], [41.0, 41.5, 42.0], 1.0)),
    ("the symmetric form better", ([44.0, 45.2, 43.1], [40.1, 41.0, 39.6], 1.0)),
]


def decide(student) -> None:
    """Exercise 2.4: the verdict on per-seed pairs — a paired interval over seeds, and a
    minimum effect below which a gain does not count."""
    name = "decide"
    for desc, (g, sym, m) in _DECIDE_CASES:
        want = _decide_reference(g, sym, m)
        got = _call(name, desc, student, list(g), list(sym), m)
        if got == want:
            continue
        _, wlo, whi = stats.welch_interval(sym, g)
        _, plo, phi = stats.paired_interval(sym, g)
        hints = []
        if got == _verdict_of(wlo, whi, m):
            hints.append("the same seed trains both forms: difference the pairs first "
                         "(a paired interval), not the two groups")
        if got == _verdict_of(plo, phi, 0.0):
            hints.append("a gain smaller than the minimum effect does not count: an interval "
                         "that lies below it says `not reproduced`")
        mean = float(sum(s - x for s, x in zip(sym, g)) / len(g))
        if got == ("reproduced" if mean > m else "not reproduced"):
            hints.append("decide on the interval, not on the mean alone")
        raise CheckFailed(f"✗ {name}: wrong for {desc} (gated {g}, symmetric {sym}, minimum "
                          f"effect {m})\n  expected: {want!r}\n  got:      {got!r}"
                          + "".join(f"\n  hint: {h}" for h in hints))
    print(f"✓ {name}: your verdicts agree with the book's rule on all {len(_DECIDE_CASES)} "
          "cases")


# ------------------------------------------------------------------ Part II: chapter 03

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


def predict_pair_uses_mlps(predicted, profile: str, results_dir=None) -> None:
    """Exercise 3.2: does zeroing every MLP of the trained pair raise its perplexity?"""
    if not isinstance(predicted, bool):
        raise CheckFailed(f"a prediction is True or False, got {predicted!r}")
    pair = chapter_results("03", profile, results_dir)["figures"]["pair"]
    costs = {k: v["ablation"]["cost"] for k, v in pair.items()}
    measured = all(c > 0 for c in costs.values())
    detail = "Ablation costs: " + ", ".join(f"{k} {c:+.1%}" for k, c in costs.items()) + "."
    return check_prediction("the pair uses its MLPs", predicted, measured, profile, detail)


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
    return check_prediction("linearity by scale", predicted, measured, profile, detail)


# ------------------------------------------------------------------ Part II: chapter 04

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
                            f"within 1 % counts.)", math.isclose(predicted, measured, rel_tol=0.01))


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


# ------------------------------------------------------------------ Part III: chapter 05

def causal_softmax(student) -> None:
    """Exercise 5.1: row-wise softmax over positions up to the row's own."""
    cases = [(f"scores of shape {sh}", (_randn(*sh, seed=i) * 3,))
             for i, sh in enumerate(((1, 1), (4, 4), (2, 3, 5, 5), (7, 7)))]
    def masked(keep):
        return lambda sc: sc.masked_fill(~keep(sc.shape[-1]), float("-inf")).softmax(-1)
    hints = [(lambda sc: sc.softmax(-1), "mask the future: row t may attend to positions ≤ t "
              "only"),
             (masked(lambda T: torch.ones(T, T, dtype=torch.bool).triu()),
              "the mask is transposed: keep the diagonal and below (earlier keys), mask above")]
    return check_function("causal_softmax", lambda s: torch.as_tensor(student(s.clone())),
                          universal.causal_softmax, cases, atol=1e-9, rtol=1e-9, hints=hints)


def width(student) -> None:
    """Exercise 5.2: the width m of the sparse universal transformer (Theorem 3.1's
    construction, as the book builds it)."""
    cases = [(f"H = {H}, L = {L}, d = {d}, residual = {r}", (H, L, d, r))
             for H, L, d in ((1, 1, 3), (2, 2, 4), (4, 3, 2), (3, 4, 1), (1, 5, 6))
             for r in (True, False)]
    return check_function("width", lambda *a: int(student(*a)), universal.width, cases,
                          atol=0, rtol=0)


def is_balanced(student) -> None:
    """Exercise 5.3: is a 0/1 string ("(" = 0, ")" = 1) a balanced Dyck-1 word?"""
    ids, _ = tasks.dyck(40, 10, seed=3)
    cases = [(f"the string {''.join('()'[int(c)] for c in s)}", (s.tolist(),)) for s in ids]
    cases += [("the empty string", ([],)), ("the string )(", ([1, 0],))]
    return check_function("is_balanced", lambda s: bool(student(list(s))), tasks.dyck_reference,
                          cases)


def predict_width_explodes(predicted, profile: str, results_dir=None) -> None:
    """Exercise 5.4: the fewest layers at which the construction for H = 4 heads needs
    more than a million dimensions per model dimension (m/d > 10⁶)."""
    if not isinstance(predicted, int) or isinstance(predicted, bool) or predicted < 1:
        raise CheckFailed(f"a prediction is a number of layers (an integer ≥ 1), got {predicted!r}")
    w = chapter_results("05", profile, results_dir)["figures"]["width_per_d"]["4"]
    over = [L for L, m in enumerate(w, start=1) if m > 1_000_000]
    measured = over[0] if over else None
    return check_prediction("layers to a million", predicted, measured, profile,
                            "m/d for H = 4, L = 1, 2, …: " + ", ".join(f"{m:,}" for m in w) + ".")


def program_dyck(student) -> None:
    """Exercise 5.5: program a frozen random transformer on Dyck-1 through its embedding
    alone — E, P and U trained, every internal weight as drawn — to well above chance on
    strings it never saw."""
    name = "program_dyck"
    model = universal.FrozenTransformer("random", vocab=2, n_out=2, H=2, L=2, d=2, m=32, seed=0,
                                        max_len=16)
    frozen = {k: v.detach().clone() for k, v in model.named_parameters()
              if k not in ("E", "P", "U")}
    program = {k: getattr(model, k).detach().clone() for k in ("E", "P", "U")}
    ids, y = tasks.dyck(2048, 12, seed=1, split="train")
    _call(name, "2,048 Dyck-1 strings of length 12", student, model, ids, y)
    case = f"{name}: wrong for 2,048 Dyck-1 strings of length 12"
    moved = [k for k, v in frozen.items() if not torch.equal(getattr(model, k).detach(), v)]
    if moved:
        raise CheckFailed(f"✗ {case}\n  what differs: the frozen weights\n  expected: "
                          f"Q, K, V as drawn\n  got:      {', '.join(moved)} changed\n"
                          "  hint: only the embedding is the program — train E, P and U, "
                          "freeze the rest (P2's fixed transformer)")
    if all(torch.equal(getattr(model, k).detach(), v) for k, v in program.items()):
        raise CheckFailed(f"✗ {case}\n  what differs: the program\n  expected: E, P and U "
                          "trained\n  got:      E, P and U as drawn\n"
                          "  hint: pass them (only them) to the optimizer and take steps")
    test_ids, test_y = tasks.dyck(1000, 12, seed=2, split="test")
    acc = universal.accuracy(model, test_ids, test_y)
    if acc < 0.7:
        raise CheckFailed(f"✗ {case}\n  what differs: held-out accuracy\n  expected: ≥ 70 % "
                          f"(chance 50 %)\n  got:      {acc:.1%}\n  hint: more steps, or a "
                          "larger learning rate (Adam, ≈ 3e-3); the labels are the last "
                          "position's")
    print(f"✓ {name}: {acc:.1%} on 1,000 held-out strings with only E, P and U trained")


# ------------------------------------------------------------------ Part IV: chapter 06

def _probe_params(d, k):
    return (sum(p.numel() for p in preprojection.PreProjection(d, k).parameters())
            + sum(p.numel() for p in preprojection.ContentSkip(d, k).parameters()))


def probe_params(student) -> None:
    """Exercise 6.1 (a): trainable parameters of one layer's pre-projection of hidden width k
    plus its content skip of rank k, at model width d."""
    cases = [(f"d = {d}, k = {k}", (d, k)) for d, k in ((576, 16), (96, 8), (768, 1), (10, 10))]
    return check_function("probe_params", lambda d, k: int(student(d, k)), _probe_params, cases,
                          atol=0, rtol=0)


def _lora_rank(d, k, shapes):
    """The rank whose LoRA count per layer is nearest the probe's, as
    `preprojection.matched_budget` chooses it (ranks 1 … 4k, the smaller on a tie)."""
    per_rank, target = sum(i + o for i, o in shapes), _probe_params(d, k)
    return min(range(1, 4 * k + 1), key=lambda r: abs(r * per_rank - target))


#: (d, k, one layer's adapted projections): SmolLM2-135M (grouped keys and values), a GPT-2
#: style fused query-key-value map, a tiny model where the nearest rank is 1.
_LORA_CASES = ((576, 16, ((576, 576), (576, 192), (576, 192), (576, 576))),
               (768, 8, ((768, 2304), (768, 768))), (96, 4, ((96, 96),) * 4),
               (64, 1, ((64, 64),) * 4))


def lora_rank(student) -> None:
    """Exercise 6.1 (b): the LoRA rank whose parameter count matches the probes' at width k."""
    cases = [(f"d = {d}, k = {k}, {len(sh)} adapted maps", (d, k, sh))
             for d, k, sh in _LORA_CASES]
    hints = [(lambda d, k, sh: k, "the rank that spends the same *parameters*, not the "
              "probe's width k"),
             (lambda d, k, sh: max(1, math.ceil(_probe_params(d, k) / sum(i + o for i, o in sh))),
              "the *nearest* count, which may lie below the probe's (round, do not round up)")]
    return check_function("lora_rank", lambda d, k, sh: int(student(d, k, [tuple(x) for x in sh])),
                          _lora_rank, cases, atol=0, rtol=0, hints=hints)


def predict_step0_changes(predicted, profile: str, results_dir=None) -> None:
    """Exercise 6.2: which variants change the model's output before their first step."""
    variants = set(preprojection.VARIANTS)
    if not isinstance(predicted, (set, frozenset)) or not set(predicted) <= variants:
        raise CheckFailed(f"a prediction is a set of variant names from {sorted(variants)}, "
                          f"got {predicted!r}")
    studies = chapter_results("06", profile, results_dir)["figures"]["studies"]
    measured = {v for s in studies.values() for v, r in s.items()
                if r.get("step0_identical") is False}
    return check_prediction("outputs changed at step 0", set(predicted), measured, profile,
                            f"(checked on {', '.join(studies)}.)")


class _Rotary(torch.nn.Module):
    """A position-dependent map: rotate feature pairs by an angle that grows with position."""

    def forward(self, x):  # (B, T, d), d even
        T, d = x.shape[1], x.shape[2]
        ang = torch.arange(T, dtype=x.dtype)[:, None] * 0.3 * torch.arange(1, d // 2 + 1,
                                                                           dtype=x.dtype)
        a, b = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = a * ang.cos() - b * ang.sin()
        out[..., 1::2] = a * ang.sin() + b * ang.cos()
        return out


def _position_gap(f, x, perm):
    y = f(x)
    return float((f(x[:, perm]) - y[:, perm]).norm() / y.norm())


def position_gap(student) -> None:
    """Exercise 6.3: how far a map of (B, T, d) activations is from commuting with a
    permutation of the positions: ‖f(x[:, π]) − f(x)[:, π]‖ / ‖f(x)‖."""
    pre = preprojection.PreProjection(8, 16).double()
    with torch.no_grad():
        torch.nn.init.normal_(pre.down.weight, std=0.3, generator=_gen(7))
    maps = {"a trained pre-projection": pre, "a rotary map": _Rotary()}
    cases = [(f"{k}, permutation seed {s}", (f, _randn(2, 6, 8, seed=s),
                                             torch.randperm(6, generator=_gen(s))))
             for k, f in maps.items() for s in (0, 1)]
    with torch.no_grad():
        return check_function("position_gap", lambda f, x, p: float(student(f, x, p)),
                              _position_gap, cases, atol=1e-9, rtol=1e-6)


# ------------------------------------------------------------------ Part V: chapter 07

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
    return check_function("random feature map", lambda *a: student(*(t.clone() for t in a)),
                          ref, cases)


def spearman(student) -> None:
    """Exercise 7.2: Spearman's ρ of two lenses across layers (no ties)."""
    from scipy import stats as sps

    cases = []
    for s, n in enumerate((30, 12, 5)):
        x, y = _randn(n, seed=60 + s), _randn(n, seed=65 + s)
        cases.append((f"{n} layers, seed {s}", (x, y + (0.5 * s) * x)))
    return check_function("Spearman ρ", lambda x, y: float(student(x.numpy(), y.numpy())),
                          lambda x, y: float(sps.spearmanr(x.numpy(), y.numpy()).statistic),
                          cases, atol=1e-9, rtol=1e-9)


def predict_rf_fits_better(predicted, profile: str, results_dir=None) -> None:
    """Exercise 7.3: on the tokens the read-outs were fit on, is the random-feature
    surrogate's R² at least the linear surrogate's at every layer?"""
    if not isinstance(predicted, bool):
        raise CheckFailed(f"a prediction is True or False, got {predicted!r}")
    rows = chapter_results("07", profile, results_dir)["figures"]["measured"]["per_layer"]
    gaps = [r["r2_rf"] - r["r2_linear"] for r in rows]
    return check_prediction("random features fit the fit tokens at least as well, every layer",
                            predicted, min(gaps) >= -1e-6, profile,
                            f"R² gain on the fit tokens: {min(gaps):+.3f} to {max(gaps):+.3f} "
                            f"over {len(rows)} layers.")


# every check records its outcome for `score`
for _name, _fn in list(globals().items()):
    if (callable(_fn) and getattr(_fn, "__module__", None) == __name__ and not _name.startswith("_")
            and _name not in ("check_function", "check_prediction", "chapter_results", "start",
                              "score", "CheckFailed")):
        globals()[_name] = _scored(_fn)
