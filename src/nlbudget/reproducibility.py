"""Same machine, same numbers: seeds and deterministic kernels for a chapter run."""

from __future__ import annotations

import random


def seed_everything(seed: int, threads: int | None = None) -> None:
    """Seed Python, NumPy and torch, and make torch use its deterministic kernels.

    With more than one CPU thread, some of torch's kernels (e.g. the backward of indexing an
    embedding table, which accumulates rows) sum in an order that varies from run to run; the
    last-digit differences grow through training — chapter 04's k-hop accuracies moved by
    several points between two runs of the same commit. Ops without a deterministic kernel
    warn instead of failing (`warn_only`). `threads` fixes torch's CPU threads (a chapter's
    `THREADS`), so its numbers do not depend on how it was launched."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    if threads:
        torch.set_num_threads(threads)
