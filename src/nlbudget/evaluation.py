"""Evaluation: how well a model predicts, measured the same way by every chapter.

Per-token next-token losses (`token_nll`; `hidden_nll` from a residual stream, the LM head
chunked), perplexity, a change's relative perplexity cost with its interval over windows
(`bootstrap_cost`), and LAMBADA-style last-word scoring (`encode_items`, `last_word_eval`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from nlbudget.verdicts import stats


LOSS_ROWS = 64  # rows per chunk: the float32 logits of a chunk stay in the CPU cache


def token_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Per-token cross-entropy of next-token prediction, in float32: (B, T−1).
    Computed in chunks of rows (the same numbers, about twice as fast on a CPU)."""
    lg = logits[:, :-1].reshape(-1, logits.shape[-1])
    y = ids[:, 1:].reshape(-1)
    out = torch.empty(y.shape[0])
    for i in range(0, y.shape[0], LOSS_ROWS):
        out[i:i + LOSS_ROWS] = F.cross_entropy(lg[i:i + LOSS_ROWS].float(), y[i:i + LOSS_ROWS],
                                               reduction="none")
    return out.view(ids.shape[0], -1)


def hidden_nll(model, lay, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """token_nll(head(h)) with the LM head applied chunk by chunk, never materialising all
    (B, T, vocab) logits (the head acts on each position separately)."""
    rows = h[:, :-1].reshape(-1, h.shape[-1])
    y = ids[:, 1:].reshape(-1)
    out = torch.empty(y.shape[0])
    for i in range(0, y.shape[0], LOSS_ROWS):
        logits = lay.head(model, rows[None, i:i + LOSS_ROWS])[0]
        out[i:i + LOSS_ROWS] = F.cross_entropy(logits.float(), y[i:i + LOSS_ROWS],
                                               reduction="none")
    return out.view(ids.shape[0], -1)


def perplexity(nll: torch.Tensor) -> float:
    """exp of the token-weighted mean cross-entropy."""
    return math.exp(float(nll.double().mean()))


def batches(windows: torch.Tensor, batch_size: int):
    for i in range(0, windows.shape[0], batch_size):
        yield slice(i, i + batch_size), windows[i:i + batch_size]


@torch.no_grad()
def eval_nll(model, windows: torch.Tensor, batch_size: int = 8) -> torch.Tensor:
    """Per-token loss of the model as it is: (N, T−1)."""
    return torch.cat([token_nll(model(input_ids=ids).logits, ids)
                      for _, ids in batches(windows, batch_size)])


def bootstrap_cost(base: torch.Tensor, lin: torch.Tensor, n_boot: int = 1000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the relative PPL change, resampling eval windows (rows)."""
    return stats.bootstrap_ppl_ratio(base.double().numpy(), lin.double().numpy(), n_boot,
                                     seed, level)


def encode_items(items: list[dict], tokenizer, max_context: int) -> list[tuple[list, list]]:
    """(context ids, target ids) per item; the target is the word with its leading space,
    the context keeps its last `max_context` − len(target) tokens."""
    out = []
    for it in items:
        c = tokenizer(it["context"], add_special_tokens=False)["input_ids"]
        t = tokenizer(" " + it["target"], add_special_tokens=False)["input_ids"]
        out.append((c[-(max_context - len(t)):], t))
    return out


@torch.no_grad()
def last_word_eval(model, encoded: list[tuple[list, list]], batch_size: int = 8) -> dict:
    """LAMBADA scoring: an item is correct when greedy prediction gets every token of the
    target word right (teacher-forced, which equals greedy decoding of the word); also the
    target's summed NLL. Returns tensors `correct` (bool) and `nll`, one entry per item."""
    order = sorted(range(len(encoded)), key=lambda i: sum(map(len, encoded[i])))
    correct = torch.zeros(len(encoded), dtype=torch.bool)
    nll = torch.zeros(len(encoded))
    for s in range(0, len(order), batch_size):
        rows = order[s:s + batch_size]
        ids = torch.zeros(len(rows), max(sum(map(len, encoded[i])) for i in rows),
                          dtype=torch.long)  # right-padded: causal attention ignores it
        for r, i in enumerate(rows):
            c, t = encoded[i]
            ids[r, :len(c) + len(t)] = torch.tensor(c + t)
        # the LM head only where a row predicts a target token (the vocabulary is large)
        keep = sorted({p for i in rows for p in range(len(encoded[i][0]) - 1,
                                                      sum(map(len, encoded[i])) - 1)})
        col = {p: j for j, p in enumerate(keep)}
        logits = model(input_ids=ids, logits_to_keep=torch.tensor(keep)).logits
        for r, i in enumerate(rows):
            c, t = encoded[i]
            lg = logits[r, [col[p] for p in range(len(c) - 1, len(c) + len(t) - 1)]].float()
            y = torch.tensor(t)
            correct[i] = bool((lg.argmax(-1) == y).all())
            nll[i] = F.cross_entropy(lg, y, reduction="sum")
    return {"correct": correct, "nll": nll}
