"""P2's lens on an MLP layer: how much of its nonlinearity does a *fixed, untrained*
nonlinearity recover?

Fixed universal transformers are programmed only through their inputs: their weights are
random and stay so. The same question, asked of one MLP layer of a trained model: replace the
MLP by a frozen random nonlinearity of the MLP's own width, and fit only its read-out, in
closed form, by P3's ridge estimator (as `surrogates.fit_ridge`, float64):

    f̂(x) = [x, σ(z(x))] W + b,    z(x) = (x − μ) A / s + c,

with A a d × m Gaussian matrix (m = the MLP's hidden width), μ the inputs' mean, s each unit's
spread on the fit tokens (so every unit is in σ's curved range), c a random offset per unit, and
σ the model's own activation (SiLU for SmolLM2). The linear surrogate is nested in it (the
read-out sees x itself), so on the fit tokens it can only do better; the cost of the layer with
`RandomFeatureSurrogate` against the cost with the linear surrogate is what the random
nonlinearity buys on held-out tokens.

The read-out has d + m inputs per output, fit on a few thousand tokens: P3's λ = 0.01 (chosen
for the linear surrogate's d + 1) lets it memorise its fit tokens. `ridge_cv` chooses λ by
K-fold cross-validation over whole windows (tokens of one window are not independent), from a
grid scaled to the Gram matrix's mean eigenvalue; the fold with the smallest pooled held-out
error decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from nlbudget.surrogates import RIDGE_LAMBDA, LinearSurrogate

#: ridge_cv's grid: λ as these multiples of the centred Gram matrix's mean eigenvalue.
LAMBDA_GRID = tuple(10.0 ** k for k in range(-7, 3))


@dataclass(frozen=True)
class CV:
    """Choose the ridge λ by cross-validation (`ridge_cv`): `groups` a window index per row,
    `folds` how many folds of whole windows, `grid` λ as multiples of the mean eigenvalue."""
    groups: torch.Tensor
    folds: int = 5
    grid: tuple = LAMBDA_GRID


class RandomFeatureSurrogate(nn.Module):
    """f̂(x) = [x, σ((x − μ) A / s + c)] W + b: a frozen random feature map of width m and a
    fitted linear read-out (a `LinearSurrogate` on the d + m features)."""

    def __init__(self, A: torch.Tensor, mu: torch.Tensor, s: torch.Tensor, c: torch.Tensor,
                 readout: LinearSurrogate, activation=F.silu):
        super().__init__()
        for name, t in (("A", A), ("mu", mu), ("s", s), ("c", c)):
            self.register_buffer(name, t)
        self.readout, self.activation = readout, activation

    @property
    def width(self) -> int:
        return self.A.shape[1]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.A.dtype)
        z = ((x - self.mu) @ self.A) / self.s + self.c
        return torch.cat([x, self.activation(z)], dim=-1)

    def forward(self, x):  # (..., d) -> (..., d_out)
        return self.readout(self.features(x)).to(x.dtype)


def fit_random_features(X: torch.Tensor, Y: torch.Tensor, width: int, seed: int = 0,
                        lam: float = RIDGE_LAMBDA, activation=F.silu,
                        dtype: torch.dtype = torch.float32) -> RandomFeatureSurrogate:
    """Draw the feature map from `seed` (A, c: standard Gaussian; A scaled by 1/√d), set μ and
    s from the fit inputs `X` (N, d), and fit the read-out to `Y` (N, d_out) by ridge with
    `lam` (a number, or `ridge_cv`'s choice: `lam=CV(groups, folds, grid)`; the choice is kept
    as the surrogate's `cv`)."""
    g = torch.Generator().manual_seed(seed)
    X64 = X.to(torch.float64)
    d = X64.shape[1]
    A = torch.randn(d, width, generator=g, dtype=torch.float64) / d ** 0.5
    c = torch.randn(width, generator=g, dtype=torch.float64)
    mu = X64.mean(0)
    s = ((X64 - mu) @ A).std(0).clamp_min(1e-12)
    rf = RandomFeatureSurrogate(A, mu, s, c, LinearSurrogate(torch.zeros(d + width, 1),
                                                             torch.zeros(1)), activation)
    with torch.no_grad():
        Phi, Y64 = rf.features(X64), Y.to(torch.float64)
        rf.cv, moments = None, None
        if isinstance(lam, CV):
            rf.cv, moments = _cv(Phi, Y64, lam.groups, lam.folds, lam.grid)
            lam = rf.cv["lambda"]
        rf.readout = _solve(*(moments or _centred(Phi, Y64)), lam)
    return rf.to(dtype)


def ridge_readout(Phi: torch.Tensor, Y: torch.Tensor, lam: float) -> LinearSurrogate:
    """P3's ridge estimator (`surrogates.fit_ridge`: centred data, λ on the Gram matrix) for a
    read-out of d + m features, solved by Cholesky: (ΦcᵀΦc + λI) W = ΦcᵀYc, b = ȳ − φ̄W. The
    Gram matrix is positive definite for λ > 0, and a Cholesky solve is a small fraction of
    an eigendecomposition of the same matrix."""
    return _solve(*_centred(Phi, Y), lam)


def _solve(G: torch.Tensor, B: torch.Tensor, p_mean: torch.Tensor, y_mean: torch.Tensor,
           lam: float) -> LinearSurrogate:
    G = G.clone()
    G.diagonal().add_(lam)
    W = torch.cholesky_solve(B, torch.linalg.cholesky(G))
    return LinearSurrogate(W, y_mean - p_mean @ W)


def _centred(Phi: torch.Tensor, Y: torch.Tensor):
    """(ΦcᵀΦc, ΦcᵀYc, φ̄, ȳ) of rows Φ, Y."""
    pm, ym = Phi.mean(0), Y.mean(0)
    Pc = Phi - pm
    return Pc.T @ Pc, Pc.T @ (Y - ym), pm, ym


def ridge_cv(Phi: torch.Tensor, Y: torch.Tensor, groups: torch.Tensor, folds: int = 5,
             grid: tuple = LAMBDA_GRID) -> dict:
    """λ for `ridge_readout` by K-fold cross-validation over whole groups (windows): groups are
    dealt to `folds` folds in turn; each fold is predicted by the read-out fit on the others,
    for every λ of the grid (multiples of the mean eigenvalue of the full Gram matrix) at the
    cost of one eigendecomposition per fold. Returns {"lambda": the λ with the least pooled
    held-out squared error, "grid": the λs, "r2": each λ's pooled held-out R², "edge": whether
    the choice lies at an end of the grid}."""
    return _cv(Phi, Y, groups, folds, grid)[0]


def _cv(Phi, Y, groups, folds, grid):
    """`ridge_cv`'s choice, and the full data's (ΦcᵀΦc, ΦcᵀYc, φ̄, ȳ) for the final fit.

    The data are centred once; each fold's sums and cross-products are taken on its own rows,
    and a training set's centred moments are the totals less its held-out fold's, corrected to
    the training mean — one pass over the rows instead of one per fold. Per fold, in the
    eigenbasis (e, V) of its training Gram matrix, the prediction at λ is P D VB with
    P = (Φ_te − φ̄)V, VB = VᵀB and D = diag(1/(e + λ)), so its squared error
    ‖R − P D VB‖² = ‖R‖² − 2 dᵀa + dᵀ(PᵀP ∘ VB VBᵀ)d, with a = rowsum(PᵀR ∘ VB): each λ costs
    O(p²), not a product over the fold's rows."""
    ids = torch.unique(groups)
    if len(ids) < folds:
        raise ValueError(f"ridge_cv needs at least {folds} groups (windows), got {len(ids)}")
    fold_of = {int(g): i % folds for i, g in enumerate(ids.tolist())}
    fold = torch.tensor([fold_of[int(g)] for g in groups.tolist()])
    pm, ym = Phi.mean(0), Y.mean(0)
    Pc, Yc = Phi - pm, Y - ym
    parts = []
    for k in range(folds):
        te = fold == k
        P_k, Y_k = Pc[te], Yc[te]
        parts.append((P_k, Y_k, P_k.T @ P_k, P_k.T @ Y_k))
    G, B = sum(p[2] for p in parts), sum(p[3] for p in parts)
    lams = [m * float(G.diagonal().mean()) for m in grid]
    sse = torch.zeros(len(lams), dtype=torch.float64)
    sst, N = 0.0, Phi.shape[0]
    for P_k, Y_k, S_k, C_k in parts:
        n = N - P_k.shape[0]
        p_tr, y_tr = -P_k.sum(0) / n, -Y_k.sum(0) / n  # the training rows' means (Pc sums to 0)
        e, V = torch.linalg.eigh(G - S_k - n * torch.outer(p_tr, p_tr))
        VB = V.T @ (B - C_k - n * torch.outer(p_tr, y_tr))
        P, R = (P_k - p_tr) @ V, Y_k - y_tr
        sst += float((Y_k - Y_k.mean(0)).square().sum())
        a, K, C = ((P.T @ R) * VB).sum(1), P.T @ P, VB @ VB.T
        KC, rr = K * C, float(R.square().sum())
        for i, lam in enumerate(lams):
            d = 1 / (e.clamp_min(0) + lam)
            sse[i] += rr - 2 * (d @ a) + d @ KC @ d
    best = int(torch.argmin(sse))
    return ({"lambda": lams[best], "grid": lams, "r2": (1 - sse / sst).tolist(),
             "edge": best in (0, len(lams) - 1)}, (G, B, pm, ym))
