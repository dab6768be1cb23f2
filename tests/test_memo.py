"""Shared measurements (nlbudget.assets.memo): a hit is exactly what a fresh computation gives, and
anything that changes the result changes the key."""

import pytest
import torch

from nlbudget.assets import memo, models
from nlbudget import surrogates
from nlbudget.capture import mlps


@pytest.fixture
def tiny(isolated_cache):
    m = models.build_tiny("neox-par", 0, vocab_size=64, n_layer=2, d_model=16, context=16).eval()
    w = torch.randint(0, 64, (6, 16), generator=torch.Generator().manual_seed(1))
    return m, w


def _variants(model, fits):
    return {"keep-first": {l: surrogates.KeepFirst(mlps(model)[l], f) for l, f in fits.items()}}


def test_sweep_read_back_equals_fresh_computation(tiny, monkeypatch):
    model, w = tiny
    fits, r2 = surrogates.fit_layers(model, w[:4], skip_first=True)
    fits2, r2b = surrogates.fit_layers(model, w[:4], skip_first=True)  # a hit
    assert r2 == r2b and all(torch.equal(fits[l].W, fits2[l].W) for l in fits)
    a = surrogates.linearization_sweep(model, w, _variants(model, fits))
    assert list((memo.paths.cache_dir() / "memo" / "sweep").iterdir())
    calls = []
    monkeypatch.setattr(surrogates, "_sweep", lambda *x, **k: calls.append(x))
    b = surrogates.linearization_sweep(model, w, _variants(model, fits2))  # all read back
    assert calls == []
    assert torch.equal(a.baseline, b.baseline)
    for l in fits:
        assert torch.equal(a.linear["keep-first"][l], b.linear["keep-first"][l])


def test_memo_off_recomputes(tiny, monkeypatch):
    model, w = tiny
    fits, _ = surrogates.fit_layers(model, w[:4])
    surrogates.linearization_sweep(model, w, _variants(model, fits))
    monkeypatch.setenv("NLBUDGET_MEMO", "0")
    calls = []
    real = surrogates._sweep
    monkeypatch.setattr(surrogates, "_sweep", lambda *x: calls.append(1) or real(*x))
    surrogates.linearization_sweep(model, w, _variants(model, fits))
    assert calls == [1]


def test_partial_hit_computes_only_what_is_missing(tiny, monkeypatch):
    model, w = tiny
    fits, _ = surrogates.fit_layers(model, w[:4])
    surrogates.linearization_sweep(model, w, {"v": {0: fits[0]}})
    seen = []
    real = surrogates._sweep
    monkeypatch.setattr(surrogates, "_sweep",
                        lambda m, win, var, *a: seen.append({v: sorted(x) for v, x in var.items()})
                        or real(m, win, var, *a))
    full = surrogates.linearization_sweep(model, w, {"v": {0: fits[0], 1: fits[1]}})
    assert seen == [{"v": [1]}]
    ref = surrogates.naive_sweep(model, w, {"v": {0: fits[0], 1: fits[1]}})
    for l in (0, 1):
        assert torch.allclose(full.linear["v"][l], ref.linear["v"][l], atol=1e-5)


def test_keys_change_with_what_changes_the_result(tiny):
    model, w = tiny
    mk = memo.model_key(model)
    assert mk == memo.model_key(model)
    f = surrogates.fit_ridge(torch.randn(40, 16), torch.randn(40, 16))
    base = memo.key("sweep", mk, w, 8, 0, f)
    assert base == memo.key("sweep", mk, w, 8, 0, f)
    other = model.__class__(model.config)
    assert memo.model_key(other) != mk  # other weights
    assert memo.key("sweep", mk, w[:5], 8, 0, f) != base  # other windows
    assert memo.key("sweep", mk, w, 4, 0, f) != base  # other batching
    assert memo.key("sweep", mk, w, 8, 1, f) != base  # other layer
    g = surrogates.LinearSurrogate(f.W + 1e-3, f.b)
    assert memo.key("sweep", mk, w, 8, 0, g) != base  # other surrogate
    k1 = surrogates.KeepFirst(mlps(model)[0], f, k=1)
    k2 = surrogates.KeepFirst(mlps(model)[0], f, k=2)
    assert memo.key(k1) != memo.key(k2)  # module settings count


def test_random_routing_is_never_shared():
    from nlbudget import gating

    assert not surrogates._memoizable(gating.RandomRouting.__new__(gating.RandomRouting))
    assert surrogates._memoizable(surrogates.Ablated())


def test_a_fit_of_some_layers_is_read_from_a_fit_of_every_layer(tiny, monkeypatch):
    """Chapter 04's one-layer illustration reads the layer out of chapter 03's all-layer fit
    of the same windows: the same tensors, no capture."""
    model, w = tiny
    every, r2 = surrogates.fit_layers(model, w[:4], skip_first=True)
    monkeypatch.setattr(surrogates, "fit_ridge", lambda *a, **k: pytest.fail("refitted"))
    one, r2_one = surrogates.fit_layers(model, w[:4], layers=[1], skip_first=True)
    assert list(one) == [1] and r2_one == {1: r2[1]}
    torch.testing.assert_close(one[1].W, every[1].W, rtol=0, atol=0)
