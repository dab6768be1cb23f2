"""P2's lens on one MLP (`nlbudget.random_features`): a frozen random nonlinearity with a
ridge read-out nests the linear surrogate and recovers a nonlinear map the linear one misses."""

import torch
from torch.nn import functional as F

from nlbudget import random_features as rf
from nlbudget.surrogates import fit_ridge, r_squared


def data(n, seed, linear=False):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 16, generator=g) * 2
    B = torch.randn(16, 64, generator=torch.Generator().manual_seed(1)) / 4
    C = torch.randn(64, 8, generator=torch.Generator().manual_seed(2)) / 8
    return X, (X @ B @ C if linear else F.silu(X @ B) @ C)


def test_random_features_recover_what_the_linear_surrogate_misses():
    X, Y = data(4000, 0)
    Xh, Yh = data(2000, 3)
    lin = fit_ridge(X, Y)
    sur = rf.fit_random_features(X, Y, width=256, seed=0)
    assert sur.width == 256 and sur(Xh).shape == Yh.shape
    r_lin, r_rf = r_squared(lin, Xh, Yh), r_squared(sur, Xh, Yh)
    assert r_lin < 0.9 and r_rf > r_lin + 0.05, (r_lin, r_rf)
    # nested: on the fit tokens it never does worse than the linear surrogate
    assert r_squared(sur, X, Y) >= r_squared(lin, X, Y) - 1e-6


def test_a_linear_map_is_recovered_and_the_draw_is_the_seeds():
    X, Y = data(3000, 0, linear=True)
    assert r_squared(rf.fit_random_features(X, Y, width=32, seed=0), X, Y) > 0.999
    a = rf.fit_random_features(X, Y, width=32, seed=5)
    b = rf.fit_random_features(X, Y, width=32, seed=5)
    c = rf.fit_random_features(X, Y, width=32, seed=6)
    assert torch.equal(a.A, b.A) and torch.equal(a(X), b(X)) and not torch.equal(a.A, c.A)


def test_the_readout_is_p3s_ridge_estimator():
    X, Y = data(500, 7)
    Phi = torch.cat([X, X[:, :3] ** 2], 1).double()
    a, b = rf.ridge_readout(Phi, Y.double(), 0.01), fit_ridge(Phi, Y, dtype=torch.float64)
    assert torch.allclose(a.W, b.W, atol=1e-8) and torch.allclose(a.b, b.b, atol=1e-8)
