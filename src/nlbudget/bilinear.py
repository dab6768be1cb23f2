"""Part I, numerically: the MLP forms of P1's chain as torch modules, and their symmetries.

Notation of P1: rows q_j, k_j, v_j of Q, K, V (n memory units, width d).
(1) `KeyValueMLP`          σ(x W1ᵀ) W2
(3) `BilinearAttentionMLP` Σ_j σ(x Q_j K_jᵀ xᵀ) v_j    (one d×d matrix per unit)
(4) `SymmetricBilinearMLP` σ((x Qᵀ) ⊙ (x Kᵀ)) V        (rank-1: Q_j K_jᵀ = q_jᵀ k_j)
(5) `GatedMLP`             (σ(x Qᵀ) ⊙ (x Kᵀ)) V        (Llama's down(act(gate(x)) * up(x)))
§4  `RankRBilinearMLP`     σ(Σ_s (x Q_sᵀ) ⊙ (x K_sᵀ)) V (rank r per unit)
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact erf form, as in symbolic.ACTIVATIONS
    "silu": F.silu,
    "linear": lambda t: t,
}


def _act(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; valid: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


class KeyValueMLP(nn.Module):
    """Eq. (1): keys are the rows of W1 (`keys.weight`), values the rows of W2."""

    def __init__(self, d: int, n: int, act: str = "gelu"):
        super().__init__()
        self.act = act
        self.keys = nn.Linear(d, n, bias=False)
        self.values = nn.Linear(n, d, bias=False)

    def forward(self, x):  # (..., d)
        return self.values(_act(self.act)(self.keys(x)))


class _QKV(nn.Module):
    """Shared layout: q, k map d → n·r, v maps n → d; no biases (as in P1)."""

    rank = 1

    def __init__(self, d: int, n: int, act: str = "silu", rank: int = 1):
        super().__init__()
        _act(act)
        self.act, self.rank, self.n = act, rank, n
        self.q = nn.Linear(d, n * rank, bias=False)
        self.k = nn.Linear(d, n * rank, bias=False)
        self.v = nn.Linear(n, d, bias=False)


class SymmetricBilinearMLP(_QKV):
    """Eq. (4): σ((x Qᵀ) ⊙ (x Kᵀ)) V — σ applied to the product."""

    def forward(self, x):  # (..., d)
        return self.v(_act(self.act)(self.q(x) * self.k(x)))


class GatedMLP(_QKV):
    """Eq. (5): (σ(x Qᵀ) ⊙ (x Kᵀ)) V — σ on the q ("gate") branch only."""

    def forward(self, x):
        return self.v(_act(self.act)(self.q(x)) * self.k(x))


class RankRBilinearMLP(_QKV):
    """P1 §4: per unit j, Q_j K_jᵀ ≈ Σ_{s<r} q_{js}ᵀ k_{js}; score_j = Σ_s (x·q_{js})(x·k_{js})."""

    def __init__(self, d: int, n: int, rank: int = 2, act: str = "silu"):
        super().__init__(d, n, act, rank)

    def forward(self, x):
        prod = (self.q(x) * self.k(x)).unflatten(-1, (self.n, self.rank))  # (..., n, r)
        return self.v(_act(self.act)(prod.sum(-1)))


class BilinearAttentionMLP(nn.Module):
    """Eq. (3): Σ_j σ(x A_j xᵀ) v_j with a full d×d matrix A_j = Q_j K_jᵀ per unit."""

    def __init__(self, d: int, n: int, act: str = "silu"):
        super().__init__()
        self.act = act
        self.A = nn.Parameter(torch.randn(n, d, d) / d)
        self.v = nn.Linear(n, d, bias=False)

    @classmethod
    def from_low_rank(cls, m: _QKV) -> "BilinearAttentionMLP":
        """A_j = Σ_s q_{js}ᵀ k_{js} from a rank-r (or rank-1 symmetric) module."""
        d = m.q.in_features
        out = cls(d, m.n, m.act).to(m.q.weight.dtype)
        q = m.q.weight.detach().view(m.n, m.rank, d)
        k = m.k.weight.detach().view(m.n, m.rank, d)
        with torch.no_grad():
            out.A.copy_(torch.einsum("nsi,nsj->nij", q, k))
            out.v.weight.copy_(m.v.weight)
        return out

    def forward(self, x):
        scores = torch.einsum("...i,nij,...j->...n", x, self.A, x)
        return self.v(_act(self.act)(scores))


def exchanged(m: _QKV) -> _QKV:
    """A copy with the q and k branches swapped (the exchange symmetry)."""
    out = copy.deepcopy(m)
    with torch.no_grad():
        out.q.weight.copy_(m.k.weight)
        out.k.weight.copy_(m.q.weight)
    return out


def inverse_scaled(m: _QKV, alpha: float) -> _QKV:
    """A copy with q → α q and k → k / α (the inverse-scaling symmetry)."""
    out = copy.deepcopy(m)
    with torch.no_grad():
        out.q.weight.mul_(alpha)
        out.k.weight.div_(alpha)
    return out


@torch.no_grad()
def relative_error(f: nn.Module, g: nn.Module, x: torch.Tensor) -> float:
    """‖f(x) − g(x)‖_F / ‖f(x)‖_F."""
    fx = f(x)
    return float((fx - g(x)).norm() / fx.norm())


# ---------------------------------------------------------------- variants at equal parameters

#: The MLP forms compared in "Does breaking the exchange symmetry matter?":
#: name -> (class, activation, rank, weights per hidden unit in units of d).
VARIANTS = {
    "standard-gelu": (KeyValueMLP, "gelu", None, 2),
    "symmetric-silu": (SymmetricBilinearMLP, "silu", 1, 3),
    "gated-silu": (GatedMLP, "silu", 1, 3),
    "gated-gelu": (GatedMLP, "gelu", 1, 3),
    "gated-relu": (GatedMLP, "relu", 1, 3),
    "bilinear": (GatedMLP, "linear", 1, 3),
    "rank2-silu": (RankRBilinearMLP, "silu", 2, 5),
    "rank4-silu": (RankRBilinearMLP, "silu", 4, 9),
}


def hidden_width(variant: str, d: int, budget: int) -> int:
    """Hidden units n that give `variant` about `budget` weights at width d
    (standard 2dn, gated/symmetric 3dn, rank r (2r + 1)dn)."""
    per_unit = VARIANTS[variant][3] * d
    return max(1, round(budget / per_unit))


def make_mlp(variant: str, d: int, budget: int) -> nn.Module:
    """An MLP of the given form with about `budget` weights (no biases, as in P1)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    cls, act, rank, _ = VARIANTS[variant]
    n = hidden_width(variant, d, budget)
    if cls is RankRBilinearMLP:
        return cls(d, n, rank=rank, act=act)
    return cls(d, n, act=act)


def n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())
