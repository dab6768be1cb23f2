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


def test_cross_validation_over_windows_picks_lambda_from_held_out_error():
    """Few noisy rows and many features: the least λ memorises, cross-validation chooses a
    larger one that does better on fresh data; a noiseless linear map takes a small λ."""
    g = torch.Generator().manual_seed(0)
    n, p = 240, 160
    Phi = torch.randn(n, p, generator=g, dtype=torch.float64)
    w = torch.zeros(p, 3, dtype=torch.float64)
    w[:4] = torch.randn(4, 3, generator=g, dtype=torch.float64)
    Y = Phi @ w + 2.0 * torch.randn(n, 3, generator=g, dtype=torch.float64)
    groups = torch.arange(n) // 12  # 20 "windows" of 12 rows
    cv = rf.ridge_cv(Phi, Y, groups, folds=5)
    assert cv["lambda"] > cv["grid"][0] and len(cv["r2"]) == len(cv["grid"])
    fresh = torch.randn(2000, p, generator=g, dtype=torch.float64)
    err = {lam: (rf.ridge_readout(Phi, Y, lam)(fresh) - fresh @ w).square().mean()
           for lam in (cv["grid"][0], cv["lambda"])}
    assert err[cv["lambda"]] < 0.5 * err[cv["grid"][0]], err
    clean = rf.ridge_cv(Phi, Phi @ w, groups, folds=5)
    assert clean["lambda"] == clean["grid"][0] and clean["edge"] and max(clean["r2"]) > 0.999
    # whole windows go to one fold: a window's rows never train the model that predicts them
    try:
        rf.ridge_cv(Phi, Y, torch.zeros(n, dtype=torch.long), folds=5)
    except ValueError as e:
        assert "groups" in str(e)
    else:
        raise AssertionError("one window cannot be cross-validated")


def test_cross_validation_equals_refitting_each_fold():
    """The fast path (moments per fold, errors in the eigenbasis) gives what refitting each
    fold's training rows with `ridge_readout` and scoring its held-out rows gives."""
    g = torch.Generator().manual_seed(1)
    n, p = 300, 40
    Phi = torch.randn(n, p, generator=g, dtype=torch.float64) * 3 + 5  # far from centred
    Y = torch.tanh(Phi[:, :6]) @ torch.randn(6, 4, generator=g, dtype=torch.float64) + 1
    Y += 0.3 * torch.randn(n, 4, generator=g, dtype=torch.float64)
    groups = torch.arange(n) // 10
    cv = rf.ridge_cv(Phi, Y, groups, folds=4)
    fold = (groups % 4)  # 30 windows dealt in turn, as ridge_cv deals them
    sse, sst = torch.zeros(len(cv["grid"]), dtype=torch.float64), 0.0
    for k in range(4):
        tr, te = fold != k, fold == k
        sst += float((Y[te] - Y[te].mean(0)).square().sum())
        for i, lam in enumerate(cv["grid"]):
            sse[i] += (rf.ridge_readout(Phi[tr], Y[tr], lam)(Phi[te]) - Y[te]).square().sum()
    assert torch.allclose(torch.tensor(cv["r2"], dtype=torch.float64), 1 - sse / sst,
                          rtol=1e-9, atol=1e-9)
    assert cv["lambda"] == cv["grid"][int(torch.argmin(sse))]


def test_fit_random_features_keeps_the_cross_validated_choice():
    X, Y = data(600, 0)
    groups = torch.arange(600) // 50
    sur = rf.fit_random_features(X, Y, width=64, seed=0, lam=rf.CV(groups, folds=4))
    assert sur.cv["lambda"] in sur.cv["grid"]
    assert rf.fit_random_features(X, Y, width=64, seed=0).cv is None
