"""Exercise checks of chapter 06 (Part IV): each names the exercise it checks."""

from __future__ import annotations

import math

import torch

from nlbudget import preprojection
from nlbudget.teaching.machinery import (CheckFailed, _gen, _randn, chapter_results,
                                         check_function, check_prediction)


def _probe_params(d, k):
    return (sum(p.numel() for p in preprojection.PreProjection(d, k).parameters())
            + sum(p.numel() for p in preprojection.ContentSkip(d, k).parameters()))


def probe_params(student) -> None:
    """Exercise 6.1 (a): trainable parameters of one layer's pre-projection of hidden width k
    plus its content skip of rank k, at model width d."""
    cases = [(f"d = {d}, k = {k}", (d, k)) for d, k in ((576, 16), (96, 8), (768, 1), (10, 10))]
    hints = [(lambda d, k: sum(p.numel() for p in preprojection.PreProjection(d, k).parameters()),
              "that is the pre-projection alone: the content skip (its two maps and its gate's "
              "logit) counts too"),
             (lambda d, k: 4 * d * k, "the weights alone: the pre-projection's two biases (k and "
                                      "d) and the skip's gate logit count too"),
             (lambda d, k: _probe_params(d, k) - 1, "one short: the content skip's gate has one "
                                                    "trainable logit")]
    return check_function("probe_params", lambda d, k: int(student(d, k)), _probe_params, cases,
                          atol=0, rtol=0, hints=hints)


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
                            f"(checked on {', '.join(studies)}.)", why=WHY_STEP0_CHANGES)


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
    maps = {"a pre-projection with random weights": pre, "a rotary map": _Rotary()}
    cases = [(f"{k}, permutation seed {s}", (f, _randn(2, 6, 8, seed=s),
                                             torch.randperm(6, generator=_gen(s))))
             for k, f in maps.items() for s in (0, 1)]
    with torch.no_grad():
        return check_function("position_gap", lambda f, x, p: float(student(f, x, p)),
                              _position_gap, cases, atol=1e-9, rtol=1e-6)


#: Why the prediction of `predict_step0_changes` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_STEP0_CHANGES = (
    "Every probe ends in a matrix initialised at zero (the pre-projection's $W_2$, the "
    "skip's $S_\\uparrow$, LoRA's $B$): each adds exactly zero until it is trained, so the "
    "model's outputs at step 0 are the base model's. That is what lets a frozen-probe "
    "comparison start every variant from the same point.")
