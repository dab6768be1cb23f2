"""Exercise checks of chapter 05 (Part III): each names the exercise it checks."""

from __future__ import annotations

import math

import torch

from nlbudget import tasks, universal
from nlbudget.teaching.machinery import (CheckFailed, _call, _randn, chapter_results,
                                         check_function, check_prediction)


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


def _width_without_splits(H, L, d, residual):
    """Exercise 5.2's known mistake: the blocks counted without each word's k + 1 splits."""
    return d * sum((1 if t == L else 2 * H)
                   * (sum(math.comb(t, k) * H ** k for k in range(t + 1)) if residual else H ** t)
                   for t in range(L + 1))


def width(student) -> None:
    """Exercise 5.2: the width m of the sparse universal transformer (Theorem 3.1's
    construction, as the book builds it)."""
    cases = [(f"H = {H}, L = {L}, d = {d}, residual = {r}", (H, L, d, r))
             for H, L, d in ((1, 1, 3), (2, 2, 4), (4, 3, 2), (3, 4, 1), (1, 5, 6))
             for r in (True, False)]
    hints = [(lambda H, L, d, r: universal.width(H, L, d, False),
              "with residual = True a path may skip a layer: words with fewer value factors "
              "than layers count too"),
             (lambda H, L, d, r: universal.width(H, L, d, True),
              "with residual = False there is no path that skips a layer: only words with a "
              "value factor from every layer survive"),
             (lambda H, L, d, r: universal.width(H, L, d, r) // d,
              "that is the number of blocks: each block is d dimensions wide"),
             (_width_without_splits,
              "a word with k value factors has k + 1 places to split it (the (k + 1) factor)")]
    return check_function("width", lambda *a: int(student(*a)), universal.width, cases,
                          atol=0, rtol=0, hints=hints)


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
                            "m/d for H = 4, L = 1, 2, …: " + ", ".join(f"{m:,}" for m in w) + ".",
                            why=WHY_WIDTH_EXPLODES)


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


#: Why the prediction of `predict_width_explodes` comes out as it does: shown by the
#: check once the prediction is right (or given up: `reveal`), never before.
WHY_WIDTH_EXPLODES = (
    "The width counts words over $H+1$ letters, so it grows towards $(H+1)$ times per layer"
    " — but a factor polynomial in $L$ makes the first layers grow faster, so extrapolating"
    " from the asymptotic rate alone overshoots the answer by a layer. This construction's "
    "width is exponential in depth; P2's theorem is not — the gap the chapter and the "
    "instructors' note discuss.")
