"""Exercise checks of chapter 06 (Part IV): each names the exercise it checks."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from nlbudget import preprojection
from nlbudget.teaching.machinery import (CheckFailed, _call, _gen, _randn, chapter_results, data,
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


@data
def frozen_layer(seed: int, d: int = 12, hidden: int = 48, n: int = 768):
    """Exercise 6.3's frozen layer and its data: base(x) = GELU(x A + c) B, whose weights
    still ask for gradients (freezing them is the exercise's part), and pairs (x, y) with
    y = base(x M + t): the layer would fit its targets if its inputs were first mixed by M and
    shifted by t — a change in what each input says, which a probe in front of the layer can
    learn without touching it. Returns (base, X, Y), X and Y of shape (n, d)."""
    g = _gen(600 + seed)
    base = torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.GELU(),
                               torch.nn.Linear(hidden, d)).double()
    with torch.no_grad():
        for p in base.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64)
                    / (p.shape[-1] ** 0.5 if p.dim() == 2 else 2))
        M = torch.eye(d, dtype=torch.float64) + 0.4 * _randn(d, d, seed=610 + seed) / d ** 0.5
        X = _randn(n, d, seed=620 + seed)
        Y = base(X @ M + 0.3 * _randn(d, seed=630 + seed))
    return base, X, Y


def _mse(base, probe, X, Y) -> float:
    with torch.no_grad():
        return float(F.mse_loss(base(probe(X) if probe is not None else X), Y))


def frozen_probe(student) -> None:
    """Exercise 6.3: `student(base, probe, X, Y)` trains the pre-projection `probe` in front of
    the frozen layer `base` (the model is base(probe(x))) on (X, Y). Passes when `base` is
    untouched, bit for bit, and the probe halves the held-out error of the layer alone —
    whatever optimiser, step size or number of steps got it there."""
    name = "frozen_probe"
    for seed in (0, 1):
        base, X, Y = frozen_layer(seed)
        n = 3 * len(X) // 4
        torch.manual_seed(seed)
        probe = preprojection.PreProjection(X.shape[1], 32).double()
        alone = _mse(base, None, X[n:], Y[n:])
        assert _mse(base, probe, X[n:], Y[n:]) == alone  # step zero: the identity
        before = {k: v.clone() for k, v in base.state_dict().items()}
        start = [p.detach().clone() for p in probe.parameters()]
        _call(name, f"layer seed {seed}", student, base, probe, X[:n].clone(), Y[:n].clone())
        moved = [k for k, v in base.state_dict().items() if not torch.equal(v, before[k])]
        held, fit = _mse(base, probe, X[n:], Y[n:]), _mse(base, probe, X[:n], Y[:n])
        if moved:
            what, exp, got = ("the frozen layer's weights", "unchanged",
                              f"{', '.join(moved)} changed")
            hint = ("the base moved: a frozen probe trains the probe alone — give the optimiser "
                    "`probe.parameters()` only, or `base.requires_grad_(False)` first")
        elif all(torch.equal(a, b) for a, b in zip(start, probe.parameters())):
            what, exp, got = "the probe's weights", "trained", "unchanged"
            hint = ("nothing trained: the loss is that of base(probe(x)) against y; call "
                    "`loss.backward()` and the optimiser's `step()` in a loop")
        elif not held <= 0.5 * alone:
            what, exp, got = ("held-out mean squared error", f"at most {0.5 * alone:.4f} "
                              f"(half the layer alone's {alone:.4f})", f"{held:.4f}")
            hint = ("it fits its own pairs but not held-out ones: fewer steps or a smaller "
                    "probe" if fit < 0.5 * held else "train longer or with a larger step: "
                    "full-batch Adam at lr 1e-2 for a few hundred steps gets there")
        else:
            continue
        raise CheckFailed(f"✗ {name}: wrong for layer seed {seed}\n  what differs: {what}\n"
                          f"  expected: {exp}\n  got:      {got}\n  hint: {hint}")
    print(f"✓ {name}: the layer untouched, your probe brought its held-out error from "
          f"{alone:.4f} to {held:.4f} (2 layers)")


#: Why the prediction of `predict_step0_changes` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_STEP0_CHANGES = (
    "Every probe ends in a matrix initialised at zero (the pre-projection's $W_2$, the "
    "skip's $S_\\uparrow$, LoRA's $B$): each adds exactly zero until it is trained, so the "
    "model's outputs at step 0 are the base model's. That is what lets a frozen-probe "
    "comparison start every variant from the same point.")
