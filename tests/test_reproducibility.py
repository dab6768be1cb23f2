import numpy as np
import torch

from nlbudget import universal
from nlbudget.reproducibility import seed_everything


def _train():
    seed_everything(3)
    model = universal.FrozenTransformer("random", 4, 4, 2, 2, 4, m=32, seed=0, layernorm=True)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, 4, (64, 12), generator=g), torch.randint(0, 4, (64,), generator=g))
            for _ in range(30)]
    return universal.train_program(model, lambda step: data[step], 30, lr=1e-2), np.random.rand()


def test_seed_everything_seeds_and_turns_on_deterministic_kernels():
    before = torch.are_deterministic_algorithms_enabled()
    try:
        a, b = _train(), _train()
        assert torch.are_deterministic_algorithms_enabled()
        assert a == b  # losses bit for bit, and NumPy's global stream
    finally:
        torch.use_deterministic_algorithms(before)
