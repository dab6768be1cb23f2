from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from nlbudget import capture, evaluation, surrogates
from nlbudget.assets import models
from nlbudget.chapters import ch03_linear_surrogates as ch03
from nlbudget.chapters import ch04_adaptive_gating as ch04

VOCAB = 97


def _tiny(family: str):
    torch.manual_seed(0)
    if family == "llama":
        cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                          num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=64)
        return AutoModelForCausalLM.from_config(cfg).eval()
    if family == "qwen2":
        from transformers import Qwen2Config

        cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                          num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=64)
        return AutoModelForCausalLM.from_config(cfg).eval()
    if family == "gemma3_text":
        # a sliding window (8) shorter than the test windows (16, 24 tokens), a global layer
        # between sliding ones, a head width apart from d / heads, and capped logits
        Gemma3TextConfig = pytest.importorskip("transformers").Gemma3TextConfig
        cfg = Gemma3TextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                               num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                               head_dim=16, max_position_embeddings=64, sliding_window=8,
                               layer_types=["sliding_attention", "full_attention",
                                            "sliding_attention"],
                               final_logit_softcapping=3.0, attn_implementation="eager")
        return AutoModelForCausalLM.from_config(cfg).eval()
    kind = {"gpt2": "gpt2-seq", "gpt_neox": "neox-par"}[family]
    return models.build_tiny(kind, seed=0, vocab_size=VOCAB, n_layer=3, d_model=32, n_head=4,
                             context=64).eval()


FAMILIES = ["gpt2", "gpt_neox", "llama", "qwen2", "gemma3_text"]


def _ids(n=6, t=16, seed=1):
    return torch.randint(0, VOCAB, (n, t), generator=torch.Generator().manual_seed(seed))


def test_ridge_matches_lstsq_on_augmented_system():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12)) * rng.uniform(0.1, 10, size=12) + 3
    Y = X @ rng.normal(size=(12, 7)) + rng.normal(size=(300, 7)) * 0.1 + 1.5
    lam = 0.01
    f = surrogates.fit_ridge(torch.tensor(X), torch.tensor(Y), lam=lam, dtype=torch.float64)
    xm, ym = X.mean(0), Y.mean(0)
    A = np.vstack([X - xm, np.sqrt(lam) * np.eye(12)])
    B = np.vstack([Y - ym, np.zeros((12, 7))])
    W = np.linalg.lstsq(A, B, rcond=None)[0]
    np.testing.assert_allclose(f.W.numpy(), W, atol=1e-8, rtol=0)
    np.testing.assert_allclose(f.b.numpy(), ym - xm @ W, atol=1e-8, rtol=0)


def test_ridge_recovers_an_exact_linear_map():
    X = torch.randn(500, 8, dtype=torch.float64)
    W = torch.randn(8, 5, dtype=torch.float64)
    f = surrogates.fit_ridge(X, X @ W + 2.0, lam=1e-12, dtype=torch.float64)
    torch.testing.assert_close(f.W, W, atol=1e-8, rtol=0)
    assert surrogates.r_squared(f, X, X @ W + 2.0) > 1 - 1e-12


def test_ridge_equals_the_papers_svd_form():
    """W = V diag(s / (s² + λ)) Uᵀ Y_c, as P3 writes it, on activations with one outlier row
    (an attention-sink position) three orders of magnitude larger than the rest."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(2000, 24, generator=g, dtype=torch.float64)
    X[::50] *= 1000.0
    Y = torch.tanh(X) @ torch.randn(24, 24, generator=g, dtype=torch.float64)
    f = surrogates.fit_ridge(X, Y, dtype=torch.float64)
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    U, s, Vh = torch.linalg.svd(Xc, full_matrices=False)
    W = (Vh.T * (s / (s**2 + surrogates.RIDGE_LAMBDA))) @ (U.T @ Yc)
    torch.testing.assert_close(f.W, W, rtol=1e-7, atol=1e-9 * W.abs().max().item())


def test_both_fits_from_one_capture_equal_separate_fits():
    model = _tiny(FAMILIES[0])
    ids = _ids()
    both = surrogates.fit_layers_both(model, ids, layers=[0, 1])
    for sf in (False, True):
        keep = torch.ones(ids.shape, dtype=torch.bool)
        keep[:, 0] = not sf
        with capture.MLPCapture(model, layers=[0, 1], max_tokens=ids.numel()) as cap:
            cap.keep = keep
            model(input_ids=ids)
        for l in (0, 1):
            ref = surrogates.fit_ridge(cap[f"blocks.{l}.mlp.in"], cap[f"blocks.{l}.mlp.out"])
            torch.testing.assert_close(both[sf][0][l].W, ref.W, rtol=0, atol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_capture_returns_exact_mlp_io(family):
    model = _tiny(family)
    ids = _ids()
    with capture.MLPCapture(model, max_tokens=1000) as cap:
        model(input_ids=ids)
    assert cap.n == ids.numel()
    # manual forward: run the blocks, and at each MLP compute its output from its input
    lay, bl = capture.layout(model), capture.blocks(model)
    with torch.no_grad():
        h, kw = lay.embed(model, ids)
        for l, block in enumerate(bl):
            x_in = cap[f"blocks.{l}.mlp.in"].view(*ids.shape, -1)
            torch.testing.assert_close(cap[f"blocks.{l}.mlp.out"].view(*ids.shape, -1),
                                       block.mlp(x_in), rtol=0, atol=1e-6)
            seen = {}
            hk = block.mlp.register_forward_hook(lambda m, a, o: seen.update(x=a[0]))
            h = block(h, **lay.kwargs(kw, l))
            hk.remove()
            torch.testing.assert_close(seen["x"], x_in, rtol=0, atol=0)
    assert not any(m._forward_hooks for m in capture.mlps(model)), "hooks removed on exit"


def test_capture_keep_mask_and_capacity():
    model = _tiny("llama")
    ids = _ids(n=4, t=10)
    keep = torch.ones_like(ids, dtype=torch.bool)
    keep[:, 0] = False
    with capture.MLPCapture(model, layers=[1], max_tokens=30) as cap:
        cap.keep = keep
        model(input_ids=ids)
    assert cap.n == 30 and cap.full
    assert set(cap.inputs) == {1}


@pytest.mark.parametrize("family", FAMILIES)
def test_replace_and_restore_is_bit_identical(family):
    model = _tiny(family)
    ids = _ids()
    with torch.no_grad():
        before = model(input_ids=ids).logits
        lin = surrogates.LinearSurrogate(torch.zeros(32, 32), torch.zeros(32))
        with surrogates.replaced(model, {0: lin, 2: lin}):
            during = model(input_ids=ids).logits
        after = model(input_ids=ids).logits
    assert torch.equal(before, after)
    assert not torch.equal(before, during)


def _fitted_variants(model, ids):
    with capture.MLPCapture(model, max_tokens=ids.numel()) as cap:
        model(input_ids=ids)
    fits = {l: surrogates.fit_ridge(cap[f"blocks.{l}.mlp.in"], cap[f"blocks.{l}.mlp.out"])
            for l in range(3)}
    mlp = capture.mlps(model)
    return {"plain": fits,
            "keep-first": {l: surrogates.KeepFirst(mlp[l], f) for l, f in fits.items()}}


@pytest.mark.parametrize("family", FAMILIES)
def test_prefix_reuse_sweep_equals_naive_sweep(family):
    model = _tiny(family)
    ids = _ids(n=5, t=24)
    variants = _fitted_variants(model, _ids(n=8, t=24, seed=7))
    fast = surrogates.linearization_sweep(model, ids, variants, batch_size=2)
    slow = surrogates.naive_sweep(model, ids, variants, batch_size=2)
    base_fast, base_slow = evaluation.perplexity(fast.baseline), evaluation.perplexity(slow.baseline)
    assert abs(base_fast / base_slow - 1) < 1e-4
    for v in variants:
        for l in range(3):
            assert abs(fast.cost(v, l) - slow.cost(v, l)) < 1e-4 * (1 + abs(slow.cost(v, l)))
            assert abs(evaluation.perplexity(fast.linear[v][l])
                       / evaluation.perplexity(slow.linear[v][l]) - 1) < 1e-4


def test_keep_first_runs_mlp_at_position_zero_only():
    model = _tiny("llama")
    mlp = capture.mlps(model)[0]
    zero = surrogates.LinearSurrogate(torch.zeros(32, 32), torch.zeros(32))
    x = torch.randn(2, 5, 32)
    y = surrogates.KeepFirst(mlp, zero)(x)
    torch.testing.assert_close(y[:, 0], mlp(x[:, :1])[:, 0])
    assert torch.equal(y[:, 1:], torch.zeros(2, 4, 32))


def test_bootstrap_interval_brackets_the_estimate():
    g = torch.Generator().manual_seed(0)
    base = torch.rand(40, 50, generator=g) + 2
    lin = base + 0.05 + 0.01 * torch.randn(40, 50, generator=g)
    lo, hi = evaluation.bootstrap_cost(base, lin, seed=0)
    point = evaluation.perplexity(lin) / evaluation.perplexity(base) - 1
    assert lo < point < hi and lo > 0
    lo2, hi2 = evaluation.bootstrap_cost(base, base, seed=0)
    assert lo2 == hi2 == 0.0


def test_fit_layers_skip_first_leaves_out_position_zero():
    model = _tiny("llama")
    ids = _ids(n=4, t=12)
    fits, r2 = surrogates.fit_layers(model, ids, layers=[0, 2], skip_first=True)
    assert set(fits) == {0, 2} and all(0 < v <= 1 for v in r2.values())
    with capture.MLPCapture(model, layers=[0], max_tokens=ids.numel()) as cap:
        model(input_ids=ids)
    x = cap["blocks.0.mlp.in"].view(4, 12, -1)[:, 1:].reshape(-1, 32)
    y = cap["blocks.0.mlp.out"].view(4, 12, -1)[:, 1:].reshape(-1, 32)
    torch.testing.assert_close(fits[0].W, surrogates.fit_ridge(x, y).W)


def test_progressive_linearization_freezes_surrogates_and_control_does_not():
    model = models.build_tiny("neox-par", seed=0, vocab_size=VOCAB, n_layer=3, d_model=32,
                              n_head=4, context=16)
    stream = torch.randint(0, VOCAB, (2000,), generator=torch.Generator().manual_seed(0))
    kw = dict(order=[1, 2], fit_windows=_ids(n=4, t=16), train_stream=stream,
              val_windows=_ids(n=3, t=16, seed=5), steps_per_stage=2, final_steps=1, lr=1e-3,
              batch_size=4, context=16, seed=0)
    rec = ch03.progressive_linearization(model, **kw)
    assert [r["stage"] for r in rec] == ["start", "L1", "L2", "final"]
    assert rec[-1]["linear_layers"] == [1, 2] and rec[-1]["steps"] == 5
    ctl = ch03.progressive_linearization(model, linearize=False, **kw)
    assert ctl[-1]["linear_layers"] == [] and ctl[-1]["steps"] == 5
    assert rec[0]["val_ppl"] == ctl[0]["val_ppl"]
    assert isinstance(capture.mlps(model)[1], torch.nn.Module) and \
        not isinstance(capture.mlps(model)[1], surrogates.LinearSurrogate), "input model untouched"


def test_centre_out_and_middle():
    assert surrogates.centre_out(24, 5) == [12, 11, 13, 10, 14]  # P3 §5's order
    assert surrogates.centre_out(6, 3) == [3, 2, 4]
    assert surrogates.middle_layers(30) == list(range(10, 20))
    assert surrogates.middle_layers(6) == [2, 3]


@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_every_layer_report_is_consistent(family):
    model = _tiny(family)
    fit, ev, S = _ids(n=8, t=24, seed=3), _ids(n=6, t=24), {"batch_size": 3, "n_boot": 50, "seed": 0}
    fits = surrogates.fit_layers_both(model, fit, batch_size=3)
    variants = ch03.variants(model, fits)
    sweep = surrogates.linearization_sweep(model, ev, variants, 3)
    rep = ch03.layer_report(model, fits, sweep, ch03.middle_third(model, variants, ev, sweep, S),
                            fit, S)
    assert rep["n_layers"] == 3 and len(rep["first_position_ratio"]) == 3
    for v in ("plain", "keep-first"):
        assert len(rep["cost"][v]) == 3
        for c, (lo, hi) in zip(rep["cost"][v], rep["ci"][v]):
            assert lo <= hi
        assert set(rep["middle"][v]) == {"cost", "ci"}
    assert all(0 < r <= 1 for r in rep["r2"]["plain"])


def test_ablation_cost_of_a_model_without_mlp_effect_is_zero():
    model = _tiny("gpt2")
    for b in capture.blocks(model):
        b.mlp = surrogates.Ablated()
    assert ch03.ablation_cost(model, _ids())["cost"] == 0.0


def _recording(monkeypatch):
    """Record every training batch drawn through `training.random_windows`."""
    from nlbudget import training

    seen, real = [], training.random_windows

    def rec(stream, n, length, gen):
        b = real(stream, n, length, gen)
        seen.append(b.clone())
        return b

    monkeypatch.setattr(training, "random_windows", rec)
    return seen


def test_progressive_control_sees_the_same_batches(monkeypatch):
    model = models.build_tiny("neox-par", seed=0, vocab_size=VOCAB, n_layer=3, d_model=32,
                              n_head=4, context=16)
    stream = torch.randint(0, VOCAB, (2000,), generator=torch.Generator().manual_seed(0))
    kw = dict(order=[1], fit_windows=_ids(n=4, t=16), train_stream=stream,
              val_windows=_ids(n=3, t=16, seed=5), steps_per_stage=3, final_steps=2, lr=1e-3,
              batch_size=4, context=16, seed=7)
    seen = _recording(monkeypatch)
    ch03.progressive_linearization(model, **kw)
    lin = list(seen)
    seen.clear()
    ch03.progressive_linearization(model, linearize=False, **kw)
    assert len(lin) == len(seen) == 5
    assert all(torch.equal(a, b) for a, b in zip(lin, seen))


def test_two_phase_control_sees_the_same_batches(monkeypatch):
    model = models.build_tiny("neox-par", seed=0, vocab_size=VOCAB, n_layer=3, d_model=32,
                              n_head=4, context=16)
    stream = torch.randint(0, VOCAB, (2000,), generator=torch.Generator().manual_seed(0))
    seen = _recording(monkeypatch)
    S = {"pair_layers": 3, "phase1_steps": 3, "phase2_steps": 2, "ft_lr": 1e-3, "gate_lr": 1e-2,
         "sparsity": 0.1, "pair_batch": 4, "seed": 3}
    run = ch04.Run(model, {}, None, None, None, S, [], 4)
    data = {"spans": {"fit": SimpleNamespace(windows=_ids(n=4, t=16))}, "train": stream,
            "context": 16, "eval": _ids(n=3, t=16, seed=5)}
    out = ch04.two_phase(run, data)
    # the gated run draws phase 1 + phase 2 batches, then the control draws as many, the same
    assert len(seen) == 10 and out["steps"]["control"] == 5
    assert all(torch.equal(a, b) for a, b in zip(seen[:5], seen[5:]))