import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from nlbudget import capture, gating, surrogates
from nlbudget.assets import corpora, models
from nlbudget.chapters import ch04_adaptive_gating as ch04
from nlbudget.verdicts import stats

VOCAB = 61


def _llama():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64)
    return AutoModelForCausalLM.from_config(cfg).eval()


def _ids(n=8, t=16, seed=1):
    return torch.randint(0, VOCAB, (n, t), generator=torch.Generator().manual_seed(seed))


def test_linear_gate_recovers_a_planted_hyperplane():
    g = torch.Generator().manual_seed(0)
    scales = torch.linspace(0.5, 5.0, 12, dtype=torch.float64)
    X = torch.randn(4000, 12, generator=g, dtype=torch.float64) * scales + 2.0
    w_true = torch.randn(12, generator=g, dtype=torch.float64)
    score = (X - 2.0) @ w_true + 0.3
    y = score > 0
    gate = gating.fit_gate("linear", X, y)
    # the gate's hyperplane in input coordinates: w / std
    w = gate.net.weight.double().flatten() / gate.std.double()
    cos = float(w @ w_true / (w.norm() * w_true.norm()))
    assert cos > 0.99
    acc = float(((gate(X) > 0.5) == y).double().mean())
    assert acc > 0.97
    assert gate.n_params == 13


@pytest.mark.parametrize("kind", ["pca-2", "mlp-16"])
def test_larger_gates_learn_a_planted_hyperplane(kind):
    g = torch.Generator().manual_seed(1)
    # a latent factor shared by every feature: the top principal direction even after
    # standardisation, so PCA keeps it; the labels are a hyperplane in it
    z = torch.randn(3000, 1, generator=g, dtype=torch.float64)
    X = z * torch.linspace(1, 3, 10, dtype=torch.float64) + 0.5 * torch.randn(
        3000, 10, generator=g, dtype=torch.float64)
    y = (z[:, 0] > 0.3)
    gate = gating.fit_gate(kind, X, y, seed=0)
    acc = float(((gate(X) > 0.5) == y).double().mean())
    assert acc > 0.93


def test_fit_gate_rejects_unknown_kind():
    with pytest.raises(ValueError, match="valid: linear"):
        gating.fit_gate("pca-x", torch.zeros(4, 2), torch.tensor([0, 1, 0, 1]))


def test_delta_labels_follow_the_papers_rule():
    d = torch.tensor([-1.0, -0.5, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])  # 20 % negative
    y, thr, rule = gating.delta_labels(d)
    assert rule == "median" and thr == pytest.approx(0.25)
    assert y.tolist() == [True] * 5 + [False] * 5
    d = torch.arange(1.0, 41.0)  # none negative: the 25th percentile
    y, thr, rule = gating.delta_labels(d)
    assert rule == "q25" and int(y.sum()) == 10


def test_token_context_split_sums_back_exactly():
    model = _llama()
    ids = _ids()
    for dtype in (torch.float32, torch.bfloat16):
        m = model.to(dtype)
        acts = capture.activations(m, ids, batch_size=3)
        for l in range(3):
            h = acts[f"blocks.{l}.mlp.resid"]
            e, c = gating.split_token_context(h, acts["embed"])
            assert torch.equal(e + c, h.double())
            assert not torch.equal(c, torch.zeros_like(c))
        torch.testing.assert_close(acts["embed"], m.model.embed_tokens(ids))
    model.float()


def test_captured_residual_is_what_the_mlp_norm_reads():
    model = _llama()
    ids = _ids()
    acts = capture.activations(model, ids, batch_size=8)
    for l, block in enumerate(capture.blocks(model)):
        with torch.no_grad():
            x = block.post_attention_layernorm(acts[f"blocks.{l}.mlp.resid"])
        torch.testing.assert_close(x, acts[f"blocks.{l}.mlp.in"])


def _hybrid_setup():
    model = _llama()
    mlp = capture.mlps(model)[1]
    X = torch.randn(500, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        sur = surrogates.fit_ridge(X, mlp(X))
    gate = gating.fit_gate("linear", X, X[:, 0] > 0)
    x = torch.randn(3, 10, 32, generator=torch.Generator().manual_seed(3))
    return mlp, sur, gate, x


def test_hybrid_is_the_mlp_when_nothing_is_routed_and_the_surrogate_when_all_is():
    mlp, sur, gate, x = _hybrid_setup()
    with torch.no_grad():
        none = gating.HybridMLP(mlp, sur, gate, threshold=2.0, keep_first=0)
        torch.testing.assert_close(none(x), mlp(x), rtol=1e-6, atol=1e-6)
        assert none.fraction == 0
        every = gating.HybridMLP(mlp, sur, gate, threshold=-1.0, keep_first=0)
        torch.testing.assert_close(every(x), sur(x), rtol=1e-6, atol=1e-6)
        assert every.fraction == 1
        kept = gating.HybridMLP(mlp, sur, gate, threshold=-1.0, keep_first=1)
        torch.testing.assert_close(kept(x), surrogates.KeepFirst(mlp, sur)(x), rtol=1e-6,
                                   atol=1e-6)


def test_hybrid_routes_each_token_by_its_gate():
    mlp, sur, gate, x = _hybrid_setup()
    h = gating.HybridMLP(mlp, sur, gate, threshold=0.5, keep_first=1)
    with torch.no_grad():
        out, r = h(x), h.route(x)
        assert 0 < r.sum() < r.numel() and not r[:, 0].any()
        torch.testing.assert_close(out[r], sur(x)[r], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(out[~r], mlp(x)[~r], rtol=1e-6, atol=1e-6)
    assert h.fraction == pytest.approx(float(r.double().mean()))
    # the folded linear gate decides as g(x) > ½ does, up to rounding near the boundary
    with torch.no_grad():
        logit = gate.logit(x)
    slow = logit > 0
    slow[:, 0] = False
    assert torch.equal(r[logit.abs() > 1e-4], slow[logit.abs() > 1e-4])


def test_consecutive_windows_do_not_overlap():
    ids = torch.arange(1000)
    spans = corpora.consecutive_windows(ids, 16, {"fit": 10, "gate": 20, "eval": 5})
    seen = set()
    for name, s in spans.items():
        toks = set(s.windows.flatten().tolist())
        assert toks == set(range(s.start, s.stop))
        assert not toks & seen
        seen |= toks
    assert [s.windows.shape[0] for s in spans.values()] == [10, 20, 5]
    with pytest.raises(ValueError, match="needed"):
        corpora.consecutive_windows(ids, 16, {"fit": 100})


def _auc_pairs(s, y):
    pos, neg = s[y], s[~y]
    wins = [(p > n) + 0.5 * (p == n) for p, n in itertools.product(pos, neg)]
    return float(np.mean(wins))


def test_auc_matches_pair_counting_with_ties():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, size=60).astype(float)  # many ties, as a token-only gate has
    y = rng.random(60) < 0.4 + 0.1 * s
    assert stats.auc(s, y) == pytest.approx(_auc_pairs(s, y))
    a, lo, hi = stats.bootstrap_auc(s, y, groups=np.arange(60) // 6, n_boot=300)
    assert lo <= a <= hi
    assert stats.auc(-s, y) == pytest.approx(1 - a)


def test_no_fly_lists_and_their_transfer():
    build = {1: (0.3, 0.9, 20), 2: (0.2, 0.8, 15), 3: (0.0, 0.5, 30), 4: (0.1, 0.4, 12)}
    assert gating.nofly_list(build) == [1, 2]
    test = {1: (-0.1, 0.3, 11), 3: (0.02, 0.5, 40), 4: (0.3, 0.9, 10), 5: (0.5, 1.0, 10)}
    t = gating.transfer(build, test, gating.nofly_list(build))
    assert (t["n_nofly"], t["found"], t["still_nofly"], t["flipped"]) == (2, 1, 0, 1)
    assert t["n_common"] == 3 and t["r_nofly"] is None
    ids = np.array([7] * 10 + [8] * 9)
    means = gating.token_means(ids, np.r_[np.full(10, 0.2), np.zeros(9)], min_obs=10)
    assert means == {7: (pytest.approx(0.2), 1.0, 10)}


def test_flops_count_the_gated_mlp():
    model = _llama()
    f = gating.flops_per_token(model, context=16)
    assert f.mlp == 2 * 3 * 32 * 64
    assert f.surrogate == 2 * 32 * 32
    assert f.saved([0.0, 0.0, 0.0]) < 0  # gates cost a little even when routing nothing
    assert f.saved([1.0] * 3) == pytest.approx(3 * (f.mlp - f.surrogate - f.gate) / f.total)


def test_flops_count_attention_by_head_width_and_sliding_window():
    """Attention costs 4 × heads × head width per attended position; a sliding-window layer
    attends to at most its window (Gemma 3: head width 256 ≠ d / heads, window 512)."""
    from types import SimpleNamespace

    model = _llama()
    cfg = model.config
    base = gating.flops_per_token(model, context=16)
    attn = base.blocks - sum(2 * gating._matmul_params(b) for b in gating.blocks(model))
    assert attn == 3 * 4 * 32 * 17 / 2  # d = heads × d / heads: the count as before
    wide = SimpleNamespace(**{**cfg.to_dict(), "head_dim": 16})  # 4 heads × 16 = 64 ≠ d
    assert gating._attended(wide, 0, 16) == 17 / 2
    cfg.head_dim = 16
    assert gating.flops_per_token(model, context=16).blocks - base.blocks == attn
    slide = SimpleNamespace(layer_types=["sliding_attention", "full_attention"], sliding_window=4)
    # 16 tokens, window 4: the first four attend to 1, 2, 3, 4 positions, the other twelve to 4
    assert gating._attended(slide, 0, 16) == (1 + 2 + 3 + 4 + 12 * 4) / 16
    assert gating._attended(slide, 1, 16) == 17 / 2 == gating._attended(slide, 0, 3) * 17 / 4


def test_gating_phases_and_two_phase_run_on_a_tiny_model():
    model = models.build_tiny("neox-seq", seed=0, vocab_size=VOCAB, n_layer=3, d_model=32,
                              n_head=4, context=32).eval()
    ids = _ids(30, 16, seed=4)
    fits, _ = surrogates.fit_layers(model, ids[:8], skip_first=True)
    S = {"seed": 0, "n_boot": 20, "gates": "linear,pca-2", "random_draws": 3, "max_cost": 0.01,
         "pair_layers": 3, "phase1_steps": 2, "phase2_steps": 2, "ft_lr": 1e-3, "gate_lr": 1e-2,
         "sparsity": 0.1, "pair_batch": 4, "speed_rounds": 2}
    run = ch04.Run(model, fits, ids[8:16], ids[16:22], ids[22:], S, curve_layers=[1],
                   batch_size=4)
    d = ch04.deltas(run)
    acts = ch04.activations(run)
    layers = [ch04.layer_gates(run, d, acts, l, fractions=(0.25, 0.75)) for l in range(run.L)]
    ev = ch04.routing(run, layers)
    rep = ch04.report(run, layers, ev, ch04.compound_gating(run, layers, d, ev))
    assert len(rep["per_layer"]) == 3
    curve = rep["per_layer"][1]["curve"]
    assert [p["target"] for p in curve] == [0.25, None, 0.75]  # sorted by share routed
    assert curve[0]["routed"] < curve[2]["routed"]
    assert set(rep["per_layer"][1]["auc"]) == {"linear:x", "linear:h", "linear:e", "linear:c",
                                               "pca-2"}
    row = rep["per_layer"][1]
    assert set(row["auc_diff_family"]) == {"pca-2−linear:x", "linear:c−linear:h",
                                           "linear:e−linear:h"}
    assert len(row["random"]["draws"]) == 3
    assert abs(row["random"]["routed"] - row["random"]["target"]) < 0.2
    assert set(rep["per_layer"][0]["auc"]) == {"linear:x", "linear:h", "linear:e", "linear:c"}
    assert "curve" not in rep["per_layer"][0] and "kinds" not in rep["per_layer"][2]
    comp = rep["compound"]
    assert comp["k_star"] in [int(k) for k in comp["selection"]] + [0]
    assert set(rep["flops"]) == {"mlp", "surrogate", "gate", "blocks", "head"}
    # the wall-clock saved: every layer gated and the greedy choice, over paired rounds
    wall = {r["config"]: r for r in comp["wallclock"]}
    assert set(wall) == {"all", "chosen"} and wall["all"]["rounds"] == 2
    assert wall["all"]["predicted"] == pytest.approx(comp["all"]["flops_saved"])
    lo, hi = wall["all"]["realized_ci"]
    assert lo <= wall["all"]["realized"] <= hi
    stream = torch.randint(0, VOCAB, (2000,), generator=torch.Generator().manual_seed(5))
    data = {"spans": {"fit": SimpleNamespace(windows=ids[:8])}, "train": stream,
            "context": 16, "eval": ids[22:]}
    tp = ch04.two_phase(run, data)
    assert tp["layers"] == [1] and tp["steps"]["control"] == 4
    assert all(np.isfinite(tp[k]) for k in ("phase1_ppl", "phase2_soft_ppl", "control_ppl"))


def test_random_routing_routes_the_stated_fraction_and_repeats():
    model = _llama()
    mlp = capture.mlps(model)[1]
    fits, _ = surrogates.fit_layers(model, _ids(), layers=[1])
    for frac in (0.25, 0.6):
        rr = gating.RandomRouting(mlp, fits[1], frac, seed=3)
        x = torch.randn(64, 40, 32)
        with torch.no_grad():
            a = rr(x)
        # position 0 always keeps its MLP; of the rest, `frac` go to the surrogate
        assert abs(rr.fraction - frac * 39 / 40) < 0.03
        rr.reset()
        with torch.no_grad():
            assert torch.equal(rr(x), a)  # seeded: the same draw after a reset


def test_paired_auc_difference():
    rng = np.random.default_rng(0)
    y = rng.random(4000) < 0.5
    groups = np.repeat(np.arange(40), 100)
    good = y + rng.normal(0, 1.0, 4000)
    bad = rng.normal(0, 1.0, 4000)
    d, lo, hi = stats.bootstrap_auc_diff(good, bad, y, groups, n_boot=300)
    assert d == pytest.approx(stats.auc(good, y) - stats.auc(bad, y))
    assert lo > 0.1
    d, lo, hi = stats.bootstrap_auc_diff(good, good, y, groups, n_boot=100)
    assert d == lo == hi == 0.0


def test_transfer_reports_correlation_intervals():
    build = {t: (float(t), 0.8, 20) for t in range(50)}
    test = {t: (float(t) + (t % 3), 0.8, 20) for t in range(50)}
    tr = gating.transfer(build, test, list(range(50)))
    assert tr["found"] == 50 and tr["r_nofly"] > 0.9
    lo, hi = tr["r_nofly_ci"]
    assert lo < tr["r_nofly"] < hi and lo > 0.9
    tr = gating.transfer(build, test, [1, 2])
    assert tr["r_nofly"] is None and tr["r_nofly_ci"] == [None, None]
