"""P2's tasks, generated on the fly from a seed: Dyck-1 recognition and k-hop induction heads.

Dyck-1 (token 0 = "(", 1 = ")"): is a string of parentheses balanced? Positives are uniform
among balanced strings of the length; negatives are uniform among strings with as many "(" as
")" that are *not* balanced (some prefix closes more than it opened), so counting alone cannot
tell them apart: a model must track the running depth. Classes are balanced 50/50.

k-hop induction heads (Sanford, Hsu & Telgarsky 2024): find(X, i) is the position right
after the most recent earlier occurrence of X_i (0 if there is none); hop_k(X)_i =
X_{find^k(X, i)}, a label at every position i, as Sanford et al. define the task: models train
on every position's label (`khop(..., every=True)`) and are tested on the last position's.

Each generator has a slow reference (`*_reference`), a direct transcription of the definition,
used by the tests to check labels on thousands of samples.
"""

from __future__ import annotations

import numpy as np
import torch


#: The share of Dyck-1 strings held out for testing (`split="test"`), fixed by the string.
HOLDOUT = 0.2


def held_out(x: np.ndarray) -> np.ndarray:
    """For (n, length) 0/1 strings: True for the strings of the test split. A fixed hash of
    the string itself, so a string is in the same split whichever seed or batch drew it."""
    bits = np.asarray(x, dtype=np.uint64)
    h = np.zeros(len(bits), dtype=np.uint64)
    for j in range(bits.shape[1]):
        h = (h * np.uint64(1_000_003) + bits[:, j] + np.uint64(1)) % np.uint64(2**61 - 1)
    return (h * np.uint64(2654435761) % np.uint64(1000)) < np.uint64(int(1000 * HOLDOUT))


def dyck(n: int, length: int, seed: int, split: str | None = None
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` strings of even `length` ((n, length) ids) and labels (n,) bool, half balanced.
    With `split` = "train" or "test", only strings of that split (`held_out`): no test string
    is ever drawn for training."""
    if length % 2:
        raise ValueError(f"Dyck-1 strings have even length, got {length}")
    if split not in (None, "train", "test"):
        raise ValueError(f"split must be None, 'train' or 'test', got {split!r}")
    rng = np.random.default_rng(seed)
    want = {True: n - n // 2, False: n // 2}
    got = {True: [], False: []}
    while any(len(got[k]) < want[k] for k in got):
        # strings with equal counts, uniformly: a random order of length/2 of each
        keys = rng.random((4 * n + 64, length))
        x = (np.argsort(keys, axis=1) >= length // 2).astype(np.int64)  # 1 = ")"
        if split is not None:
            x = x[held_out(x) == (split == "test")]
        depth = np.cumsum(1 - 2 * x, axis=1)
        ok = depth.min(axis=1) >= 0
        for k in got:
            need = want[k] - len(got[k])
            if need > 0:
                got[k].extend(x[ok == k][:need])
    ids = np.concatenate([np.array(got[True]), np.array(got[False])])
    labels = np.r_[np.ones(want[True], bool), np.zeros(want[False], bool)]
    order = rng.permutation(n)
    return torch.from_numpy(ids[order]), torch.from_numpy(labels[order])


def dyck_reference(s) -> bool:
    """Balanced, by a counter: never below zero, zero at the end."""
    depth = 0
    for c in s:
        depth += 1 if int(c) == 0 else -1
        if depth < 0:
            return False
    return depth == 0


def hop_all(x: np.ndarray, k: int) -> np.ndarray:
    """hop_k at every position, with a table of each position's previous occurrence."""
    last, prev = {}, np.zeros(len(x), dtype=np.int64)
    for i, v in enumerate(x):
        prev[i] = last.get(int(v), -1) + 1  # position after the previous occurrence, or 0
        last[int(v)] = i
    i = np.arange(len(x))
    for _ in range(k):
        i = prev[i]
    return np.asarray(x)[i]


def hop(x: np.ndarray, k: int) -> int:
    """hop_k at the last position."""
    return int(hop_all(x, k)[-1])


def hop_reference(x, k: int) -> int:
    """hop_k at the last position, straight from the definition (scan back at every hop)."""
    i = len(x) - 1
    for _ in range(k):
        j = 0
        for p in range(i - 1, -1, -1):
            if x[p] == x[i]:
                j = p + 1
                break
        i = j
    return int(x[i])


def khop(n: int, length: int, k: int, vocab: int, seed: int,
         every: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` uniform random sequences over `vocab` tokens, (n, length), and hop_k labels: (n,) at
    the last position, or (n, length) at every position with `every`."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, vocab, size=(n, length))
    y = np.stack([hop_all(row, k) for row in x])
    return torch.from_numpy(x), torch.from_numpy(y if every else y[:, -1].copy())
