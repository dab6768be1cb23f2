"""Part I, continued: does breaking the exchange symmetry matter?

Two experiments the gated-MLP paper (P1) never ran — the MLP forms of `bilinear.VARIANTS`
trained at equal parameters on language modelling and on modular addition — and a
measurement of how far the gates of a trained gated MLP (SmolLM2) are from exchange and
inverse-scaling symmetry.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nlbudget import bilinear
from nlbudget.assets import devices
from nlbudget.capture import blocks
from nlbudget.verdicts import stats


def install_mlps(model, variant: str, budget: int, seed: int) -> None:
    """Replace every block's MLP of a from-scratch model by `variant` (seeded init)."""
    torch.manual_seed(seed)
    d = model.config.hidden_size
    for b in blocks(model):
        b.mlp = bilinear.make_mlp(variant, d, budget)


# over seeds: `stats.t_interval` and `stats.welch_interval` (scipy's t intervals)
mean_interval = stats.t_interval
welch_interval = stats.welch_interval


# ---------------------------------------------------------------- modular addition

class ModularAdder(nn.Module):
    """a, b ↦ MLP(E_a[a] + E_b[b]) U: one MLP of the given form between embeddings and an
    unembedding, so the MLP alone must combine a and b."""

    def __init__(self, p: int, d: int, variant: str, budget: int):
        super().__init__()
        self.embed_a, self.embed_b = nn.Embedding(p, d), nn.Embedding(p, d)
        self.mlp = bilinear.make_mlp(variant, d, budget)
        self.unembed = nn.Linear(d, p, bias=False)

    def forward(self, a, b):
        return self.unembed(self.mlp(self.embed_a(a) + self.embed_b(b)))


@dataclass
class ModularResult:
    variant: str
    seed: int
    train_acc: float
    test_acc: float
    params_mlp: int


def train_modular(variant: str, p: int, d: int, budget: int, steps: int, seed: int,
                  train_fraction: float = 0.5, lr: float = 1e-2,
                  weight_decay: float = 1.0, device: str = "cpu") -> ModularResult:
    """Full-batch AdamW on a random `train_fraction` of all (a, b) pairs; accuracy of
    (a + b) mod p on the rest. The model runs on `device` (`devices.attach`)."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.flatten(), b.flatten()
    y = (a + b) % p
    perm = torch.randperm(p * p, generator=g)
    n_train = int(train_fraction * p * p)
    tr, te = perm[:n_train], perm[n_train:]
    torch.manual_seed(seed)
    model = devices.attach(ModularAdder(p, d, variant, budget), device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                            betas=(0.9, 0.98))
    for _ in range(steps):
        loss = F.cross_entropy(model(a[tr], b[tr]), y[tr])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        pred = model(a, b).argmax(-1)
    return ModularResult(variant, seed, float((pred[tr] == y[tr]).float().mean()),
                         float((pred[te] == y[te]).float().mean()),
                         bilinear.n_params(model.mlp))


# ---------------------------------------------------------------- real gates

@torch.no_grad()
def gate_asymmetry(mlp, x: torch.Tensor, alphas=(0.5, 2.0)) -> dict:
    """For a Llama-style gated MLP down(act(gate(x)) * up(x)) on real inputs x (n, d):
    the relative output change ‖y − y'‖ / ‖y‖ when gate and up are exchanged, and under
    inverse scaling gate → α·gate, up → up/α."""
    act = mlp.act_fn
    g, u = mlp.gate_proj(x).double(), mlp.up_proj(x).double()
    W = mlp.down_proj.weight.double()

    def out(h):
        return h @ W.T

    y = out(act(g) * u)
    norm = y.norm()
    res = {"exchange": float((y - out(act(u) * g)).norm() / norm)}
    for al in alphas:
        res[f"scale {al:g}"] = float((y - out(act(al * g) * u / al)).norm() / norm)
    # how often the gate is "closing": SiLU(z) ≈ 0 for z ≪ 0, ≈ z for z ≫ 0
    res["gate z < 0"] = float((g < 0).double().mean())
    return res


def random_counterpart(mlp, seed: int = 0):
    """A copy of a Llama-style gated MLP with i.i.d. Gaussian weights of the same shapes and
    the same RMS per projection: the untrained baseline for `gate_asymmetry`."""
    import copy

    out = copy.deepcopy(mlp)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in ("gate_proj", "up_proj", "down_proj"):
            w = getattr(out, name).weight
            rms = w.double().pow(2).mean().sqrt()
            w.copy_((torch.randn(w.shape, generator=gen, dtype=torch.float64) * rms).to(w.dtype))
    return out
