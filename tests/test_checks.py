"""Every exercise check rejects wrong answers: at least two per check, typically a function
that returns zeros and one that is off by a transpose, a shift or a constant. (That the
solutions pass is checked by executing the exercise notebooks: tests/test_exercises.py.)"""

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import rankdata

from nlbudget import bilinear, budget, surrogates
from nlbudget.teaching import ch02 as teaching_ch02
from nlbudget.teaching import ch03 as teaching_ch03
from nlbudget.teaching import ch04 as teaching_ch04
from nlbudget.teaching import ch06 as teaching_ch06
from nlbudget.teaching import ch07 as teaching_ch07
from nlbudget.teaching import checks
from nlbudget.verdicts import claims, stats
from nlbudget.book import profiles

ACT = bilinear.ACTIVATIONS


WRONG_FUNCTIONS = {
    "gated_mlp": [
        lambda x, Q, K, V, act: torch.zeros(x.shape[0], V.shape[0], dtype=x.dtype),
        lambda x, Q, K, V, act: (ACT[act](x @ K.T) * (x @ Q.T)) @ V.T,  # σ on the wrong branch
        lambda x, Q, K, V, act: (ACT[act](x @ Q.T) * (x @ K.T)) @ V,  # V not transposed
    ],
    "symmetric_mlp": [
        lambda x, Q, K, V, act: torch.zeros(x.shape[0], V.shape[0], dtype=x.dtype),
        lambda x, Q, K, V, act: (ACT[act](x @ Q.T) * (x @ K.T)) @ V.T,  # the gated form
    ],
    "hidden_width": [
        lambda v, d, b: 0,
        lambda v, d, b: max(1, round(b / (3 * d))),  # every form priced as gated
    ],
    "token_nll": [
        lambda logits, ids: torch.zeros(ids.shape[0], ids.shape[1] - 1),
        lambda logits, ids: F.cross_entropy(  # not shifted: predicts the current token
            logits[:, 1:].transpose(1, 2), ids[:, 1:], reduction="none"),
    ],
    "perplexity": [
        lambda nll: 0.0,
        lambda nll: math.exp(float(nll.mean())) + 1,
        lambda nll: math.exp(float(nll.sum())),
    ],
    "delta_labels": [
        lambda d: (torch.zeros(d.numel(), dtype=torch.bool), 0.0),
        lambda d: (d.flatten() <= d.median(), float(d.median())),  # always the median
    ],
    "auc": [
        lambda s, y: 0.5,
        lambda s, y: float((s[y][:, None] >= s[~y][None, :]).double().mean()),  # ties count 1
    ],
    "gate_beats_random": [
        lambda X, y: (lambda x: torch.zeros(x.shape[0], dtype=x.dtype)),  # no gate at all
        lambda X, y: (lambda x: -teaching_ch04._library_gate(X, y)(x)),  # scores reversed
    ],
    "passing_pair": [
        lambda d: (torch.zeros(d), torch.ones(d)),  # trivially zero: compares nothing
        lambda d: (torch.ones(d), 2 * torch.ones(d)),  # parallel, not equal
        lambda d: (torch.ones(d), -torch.ones(d)),
    ],
    "decide": [
        lambda g, s, m: "inconclusive",
        # unpaired: the two groups' means with a Welch interval
        lambda g, s, m: claims.effect(*stats.welch_interval(s, g)[1:], min_effect=m).verdict,
        # no minimum effect: "not reproduced" only for a significant reversal
        lambda g, s, m: claims.effect(*stats.paired_interval(s, g)[1:]).verdict,
        # the minimum effect only on the "not reproduced" side: "reproduced" above 0
        lambda g, s, m: claims.effect(*stats.paired_interval(s, g)[1:], min_effect=m).verdict,
    ],
    "routing_costs": [
        lambda d, s, f: (0.0, 0.0),
        lambda d, s, f: (float(d[s.argsort(descending=True)[:round(f * len(d))]].mean()),
                         float(f * d.mean())),  # per routed token, not per token of the text
        lambda d, s, f: (float(d[s.argsort()[:round(f * len(d))]].sum() / len(d)),
                         float(f * d.mean())),  # routes the lowest scores
    ],
    "program_dyck": [
        lambda model, ids, y: None,  # no training
        lambda model, ids, y: _train_everything(model, ids, y),
    ],
    "causal_softmax": [
        lambda s: s.softmax(-1),  # no mask
        lambda s: s.masked_fill(torch.ones(s.shape[-1], s.shape[-1], dtype=torch.bool)
                                .tril(-1), float("-inf")).softmax(-1),  # mask transposed
    ],
    "width": [
        lambda H, L, d, r=True: d * (L + 1),
        lambda H, L, d, r=True: d * sum((1 if t == L else 2 * H) * H ** t * (t + 1)
                                        for t in range(L + 1)),  # residual ignored
    ],
    "is_balanced": [
        lambda s: True,
        lambda s: s.count(0) == s.count(1),  # ignores the prefixes
    ],
    "probe_params": [
        lambda d, k: 0,
        lambda d, k: 4 * d * k,  # biases and the gate forgotten
    ],
    "lora_rank": [
        lambda d, k, sh: k,  # the probe's width, not its parameter count
        lambda d, k, sh: max(1, math.ceil(teaching_ch06._probe_params(d, k)
                                          / sum(i + o for i, o in sh))),  # rounded up
        lambda d, k, sh: round(teaching_ch06._probe_params(d, k) / (2 * d * len(sh))),  # all maps d × d
    ],
    "random_feature_map": [
        lambda x, A, mu, s, c: torch.zeros(x.shape[0], x.shape[1] + A.shape[1], dtype=x.dtype),
        lambda x, A, mu, s, c: F.silu((x - mu) @ A / s + c),  # x itself left out
        lambda x, A, mu, s, c: torch.cat([x, F.silu(x @ A / s + c)], -1),  # not centred
    ],
    "symmetric_module": [
        lambda d, n: (lambda q: (q, q.clone(), torch.randn(d, n)))(torch.randn(n, d)),  # q = k
        lambda d, n: (torch.randn(n, d), torch.randn(n, d), torch.randn(d, n)),  # generic
        lambda d, n: (lambda q, k: (torch.cat([q, k]), torch.cat([k, q]), torch.zeros(d, n)))(
            torch.randn(n // 2, d), torch.randn(n // 2, d)),  # paired, but every unit silent
    ],
    "modular_loop": [
        lambda model, a, b, y: None,  # no training
        lambda model, a, b, y: _modular_adam(model, a, b, y, steps=100, weight_decay=0.0),
    ],
    "frozen_probe": [
        lambda base, probe, X, Y: _fit(base, probe, X, Y, [*base.parameters(),
                                                           *probe.parameters()]),  # all trained
        lambda base, probe, X, Y: None,  # nothing trained
        lambda base, probe, X, Y: _fit(base, probe, X, Y, base.parameters()),  # the base alone
    ],
    "budget_plan": [
        lambda options, measure, limit: teaching_ch07._summed_plan(options, limit),
        lambda options, measure, limit: {},  # spends nothing
        lambda options, measure, limit: {o.layer: o.state for o in options  # all gated
                                         if o.state == "gated"},
    ],
    "keep_first_fit": [
        lambda X, Y: (lambda x: torch.zeros_like(x)),
        lambda X, Y: surrogates.fit_ridge(X.reshape(-1, X.shape[-1]), Y.reshape(-1, Y.shape[-1]),
                                          dtype=torch.float64),  # position 0 fit too
    ],
}


@pytest.mark.parametrize("name", sorted(WRONG_FUNCTIONS))
def test_function_check_rejects_wrong_answers(name, capsys):
    wrong = WRONG_FUNCTIONS[name]
    assert len(wrong) >= 2
    for fn in wrong:
        with pytest.raises(checks.CheckFailed, match=r"✗ .*(wrong for|raised)") as e:
            getattr(checks, name)(fn)
        text = str(e.value)
        if "wrong for" in text:  # says what differs and what was expected
            assert "expected:" in text and "got:" in text
    assert "✓" not in capsys.readouterr().out


def _train_everything(model, ids, y, steps=30):
    """A wrong program: every weight trained, the frozen transformer's included."""
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for i in range(steps):
        loss = F.cross_entropy(model(ids[:64]), y[:64].long())
        opt.zero_grad()
        loss.backward()
        opt.step()


def _lora_rank_closed_form(d, k, shapes):
    """Round the ratio of parameter counts (half rounds down), at least 1."""
    ratio = (4 * d * k + d + k + 1) / sum(i + o for i, o in shapes)
    return max(1, math.ceil(ratio - 0.5))


def test_lora_rank_reference_is_the_books_matched_budget():
    """The check's reference picks the rank `preprojection.matched_budget` picks (a tiny Llama
    with grouped keys and values, so the projections differ in shape)."""
    from transformers import AutoModelForCausalLM, LlamaConfig
    from nlbudget import preprojection

    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(LlamaConfig(
        vocab_size=50, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32))
    shapes = [(48, 48), (48, 24), (48, 24), (48, 48)]
    for k in (1, 2, 5, 9):
        assert teaching_ch06._lora_rank(48, k, shapes) == preprojection.matched_budget(m, k).lora_rank


def _delta_labels_numpy(delta):
    d = delta.double().flatten().numpy()
    thr = float(np.quantile(d, 0.25 if (d < 0).mean() < 0.05 else 0.5))
    return torch.from_numpy(d <= thr), thr


def _auc_ranks(scores, labels):
    """Mann–Whitney: the positives' mean rank (ties averaged) against all pairs."""
    r = rankdata(scores.numpy())
    pos = labels.numpy().astype(bool)
    n1, n0 = pos.sum(), (~pos).sum()
    return float((r[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _width_closed_form(H, L, d, residual=True):
    """Σ_k C(t, k) Hᵏ (k + 1) = (1 + H)ᵗ + t·H·(1 + H)ᵗ⁻¹ summed over the terminal layers."""
    total = 0
    for t in range(L + 1):
        words = ((1 + H) ** t + t * H * (1 + H) ** (t - 1) if t else 1) if residual \
            else H ** t * (t + 1)
        total += (1 if t == L else 2 * H) * words
    return d * total


def _program_full_batch(model, ids, labels):
    """Every training string in every step, a larger step size."""
    opt = torch.optim.Adam([model.E, model.P, model.U], lr=1e-2)
    for _ in range(60):
        loss = F.cross_entropy(model(ids), labels.long())
        opt.zero_grad()
        loss.backward()
        opt.step()


def _modular_adam(model, a, b, y, steps=1500, lr=1e-2, weight_decay=1.0):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                            betas=(0.9, 0.98))
    for _ in range(steps):
        loss = F.cross_entropy(model(a, b), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def _fit(base, probe, X, Y, params, steps=300, lr=1e-2):
    opt = torch.optim.Adam(list(params), lr=lr)
    for _ in range(steps):
        loss = F.mse_loss(base(probe(X)), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def _probe_lbfgs(base, probe, X, Y):
    """Exercise 6.3 another way: the base frozen by its flags, L-BFGS on what still trains."""
    base.requires_grad_(False)
    opt = torch.optim.LBFGS([p for p in probe.parameters() if p.requires_grad], max_iter=100)

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(base(probe(X)), Y)
        loss.backward()
        return loss
    opt.step(closure)


def _paired_interleaved(d, n):
    """Exercise 1.4 another way: each pair side by side, scaled differently."""
    Q, K, V = torch.empty(n, d), torch.empty(n, d), torch.empty(d, n)
    for j in range(0, n, 2):
        q, k, v = torch.randn(d), torch.randn(d), torch.randn(d) * (j + 1)
        Q[j], K[j], V[:, j] = q, k, v
        Q[j + 1], K[j + 1], V[:, j + 1] = k, q, v
    return Q, K, V


def _every_plan(options, measure, limit):
    """Exercise 7.3 another way: every configuration measured (3⁸ of them), the best kept."""
    import itertools

    flops = {(o.layer, o.state): o.flops for o in options}
    layers = sorted({o.layer for o in options})
    best, saved = {}, 0.0
    for states in itertools.product(budget.STATES, repeat=len(layers)):
        config = {l: s for l, s in zip(layers, states) if s != "full"}
        gain = sum(flops[k] for k in config.items())
        if gain > saved and measure(config) <= limit:
            best, saved = config, gain
    return best


#: Correct answers other than the library's own: a check must accept them too.
def _lstsq_keep_first(X, Y):
    """Exercise 3.4 another way: least squares with a bias column, no ridge, positions 1 …."""
    d = X.shape[-1]
    A = torch.cat([X[:, 1:].reshape(-1, d), torch.ones(X.shape[0] * (X.shape[1] - 1), 1,
                                                       dtype=X.dtype)], 1)
    W = torch.linalg.lstsq(A, Y[:, 1:].reshape(-1, d)).solution
    return lambda x: torch.cat([x, torch.ones(*x.shape[:-1], 1, dtype=x.dtype)], -1) @ W


def _nearest_class_mean_gate(X, labels):
    """Exercise 4.3 another way: no logistic regression, the direction between the two
    classes' means (a linear discriminant without the covariance)."""
    w = X[labels].mean(0) - X[~labels].mean(0)
    return lambda x: x @ w


RIGHT_FUNCTIONS = {
    "gate_beats_random": [_nearest_class_mean_gate],
    "passing_pair": [lambda d: (torch.full((d,), -0.5), torch.full((d,), -0.5)),
                     lambda d: [list(range(1, d + 1))] * 2],
    "decide": [lambda g, s, m: claims.beyond(
        *stats.t_interval([a - b for a, b in zip(s, g)])[1:], m).verdict],
    "routing_costs": [lambda d, s, f: (float(d[s.topk(round(f * len(d))).indices].sum())
                                       / len(d), round(f * len(d)) / len(d) * float(d.mean()))],
    # the same maths written another way: einsum, F.linear, log-softmax, closed forms, scipy
    "gated_mlp": [lambda x, Q, K, V, act: torch.einsum(
        "nh,dh->nd", ACT[act](torch.einsum("nd,hd->nh", x, Q)) * (x @ K.T), V)],
    "symmetric_mlp": [lambda x, Q, K, V, act: F.linear(ACT[act](F.linear(x, Q) * F.linear(x, K)),
                                                        V)],
    "hidden_width": [lambda v, d, b: max(1, round(b / d / {"standard-gelu": 2, "rank2-silu": 5,
                                                             "rank4-silu": 9}.get(v, 3)))],
    "token_nll": [lambda logits, ids: -logits[:, :-1].double().log_softmax(-1).gather(
        -1, ids[:, 1:, None]).squeeze(-1)],
    "perplexity": [lambda nll: float(torch.exp(nll.double().sum() / nll.numel()))],
    "delta_labels": [_delta_labels_numpy],
    "auc": [_auc_ranks],
    "causal_softmax": [lambda s: torch.where(torch.ones(s.shape[-1], s.shape[-1], dtype=torch.bool)
                                             .tril(), s, float("-inf")).softmax(-1)],
    "width": [_width_closed_form],
    "is_balanced": [lambda s: all(sum(1 if c == 0 else -1 for c in s[:i + 1]) >= 0
                                  for i in range(len(s))) and 2 * list(s).count(0) == len(s)],
    "probe_params": [lambda d, k: 4 * d * k + d + k + 1],
    "lora_rank": [_lora_rank_closed_form],
    "random_feature_map": [lambda x, A, mu, s, c: torch.hstack(
        [x, (z := ((x - mu) @ A) / s + c) * torch.sigmoid(z)])],
    "keep_first_fit": [_lstsq_keep_first],
    "symmetric_module": [_paired_interleaved],
    "modular_loop": [lambda model, a, b, y: _modular_adam(model, a, b, y, steps=1200,
                                                          lr=2e-2)],
    "frozen_probe": [_probe_lbfgs],
    "budget_plan": [_every_plan],
    "program_dyck": [_program_full_batch],
}


def test_every_write_check_has_another_right_answer():
    assert set(RIGHT_FUNCTIONS) == set(WRONG_FUNCTIONS)


@pytest.mark.parametrize("name", sorted(RIGHT_FUNCTIONS))
def test_function_check_accepts_other_right_answers(name, capsys):
    for fn in RIGHT_FUNCTIONS[name]:
        getattr(checks, name)(fn)
        assert "✓" in capsys.readouterr().out


def test_a_known_wrong_answer_gets_its_hint():
    with pytest.raises(checks.CheckFailed, match="your scores are reversed"):
        checks.gate_beats_random(WRONG_FUNCTIONS["gate_beats_random"][1])


def test_failure_names_the_largest_difference():
    with pytest.raises(checks.CheckFailed, match="largest difference: 1"):
        checks.perplexity(lambda nll: math.exp(float(nll.double().mean())) + 1)


def test_a_stub_is_not_caught():
    def stub(*a):
        raise NotImplementedError("Exercise 1.1")
    with pytest.raises(NotImplementedError):
        checks.gated_mlp(stub)


def test_every_check_function_is_tested():
    named = {n for n in dir(checks) if not n.startswith("_") and n not in (
        "check_function", "check_prediction", "chapter_results", "start", "score",
        "CheckFailed", "reveal")
        and callable(getattr(checks, n)) and not getattr(getattr(checks, n), "is_data", False)
        and getattr(checks, n).__module__ in {m.__name__ for m in checks.CHAPTERS}}
    predictions = {n for n in named if n.startswith("predict_")}
    assert named - predictions == set(WRONG_FUNCTIONS)
    assert predictions == set(PREDICTIONS)


# ---------------------------------------------------------------- predictions

#: The shapes of the chapters' figures, with values that are counterfactual on purpose: the
#: answers to the book's predictions live in the results files and the solutions only, so a
#: student reading these tests learns how a check decides, not what the book measured.
FIGURES = {
    "01": {"exchange_error_gated": {"relu": 0.0, "gelu": 0.7, "silu": 0.5, "linear": 0.4}},
    "02": {"param_table": {"standard-gelu": {"hidden units": 256},
                           "gated-silu": {"hidden units": 200}}, "parameters": {"lm_d_model": 64}},
    "03": {"pair": {"neox-seq": {"ablation": {"cost": -0.1}},
                    "neox-par": {"ablation": {"cost": 0.2}}}},
    "04": {"pretrained": {"m": {"flops": {"mlp": 900, "surrogate": 100}}}},
    "05": {"width_per_d": {"4": [10, 900, 2_000_000]}},
    "06": {"studies": {"m": {"base": {"step0_identical": True},
                             "lora": {"step0_identical": False}}}},
    "07": {"atlas": {"smollm2-135m": {"measured": {"per_layer": [
        {"lambda_rf": a} for a in (3.0, 0.005, 250.0)]}}}},
}


def _measured_trend():
    """Exercise 3.3's answer as its check measures it, not written down here."""
    return {k: "rises" if (v := teaching_ch03._linearity_by_scale(k))[-1] > v[0] else "falls"
            for k in ("gelu", "gated")}


def _flipped(trend):
    return {k: {"rises": "falls", "falls": "rises"}[v] for k, v in trend.items()}


PREDICTIONS = {  # check: (right for FIGURES, [wrong but well-formed], [malformed])
    "predict_exchange_symmetric": ({"relu"}, [{"linear"}, set()], ["linear", {"tanh"}]),
    "predict_gated_width": (lambda d: 200, [lambda d: 4 * d, lambda d: 8 * d // 3],
                            [lambda d: 0, lambda d: 170.7]),
    "predict_pair_uses_mlps": (False, [True], ["yes", 1]),
    "predict_flop_ratio": (9, [3, 8], [-1, "9"]),
    "predict_width_explodes": (3, [2, 7], [0, 3.0]),
    "predict_step0_changes": ({"lora"}, [set(), {"pre", "skip"}], ["none", {"adapter"}]),
    "predict_cv_lambda_larger": (False, [True], ["yes", 1]),
    "predict_linearity_by_scale": (_measured_trend, [_flipped],
                                   [{"gelu": "falls"}, {"gelu": "down", "gated": "up"}, "falls"]),
}


@pytest.fixture
def fake_results(tmp_path):
    for key, fig in FIGURES.items():
        p = tmp_path / "smoke" / f"{profiles.chapter(key).stem}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        fig = dict(fig)
        p.write_text(json.dumps({"figures": fig, "parameters": fig.pop("parameters", {})}))
    return tmp_path


@pytest.mark.parametrize("name", sorted(PREDICTIONS))
def test_prediction_checks_report_right_and_wrong(name, fake_results, capsys):
    check = getattr(checks, name)
    right, wrong, malformed = PREDICTIONS[name]
    if name == "predict_linearity_by_scale":  # measured on the spot: derived, then flipped
        right = right()
        wrong = [w(right) for w in wrong]
    why = getattr(teaching_modules()[name], "WHY_" + name[len("predict_"):].upper())
    check(right, "smoke", fake_results)
    out = capsys.readouterr().out
    assert out.startswith("✓") and "✗" not in out and "the book measured" in out
    assert why[:40] in out  # the reason, once the prediction is right
    for w in wrong:  # a wrong prediction is reported, without the answer or the reason
        check(w, "smoke", fake_results)
        out = capsys.readouterr().out
        assert out.startswith("✗") and "not what the book measured" in out
        assert "the book measured" not in out.replace("not what the book measured", "")
        assert why[:40] not in out and "checks.reveal()" in out
    for m in malformed:
        with pytest.raises(checks.CheckFailed, match="a prediction is"):
            check(m, "smoke", fake_results)


def teaching_modules() -> dict:
    """{prediction check: the teaching module that defines it}."""
    return {n: m for m in checks.CHAPTERS for n in vars(m) if n.startswith("predict_")}


def test_revealing_gives_the_answer_and_counts_as_failed(fake_results, capsys):
    """`reveal()` after a wrong prediction shows what was measured and why; the check then
    stays failed in the score, even if the next answer is right."""
    checks.start("02", "smoke")
    checks.predict_gated_width(lambda d: 4 * d, "smoke", fake_results)
    assert "200" not in capsys.readouterr().out
    checks.reveal()
    out = capsys.readouterr().out
    assert "the book measured 200" in out and teaching_ch02.WHY_GATED_WIDTH[:40] in out
    checks.predict_gated_width(lambda d: 200, "smoke", fake_results)
    assert checks.score() == (0, 1)
    checks.start("02", "smoke")
    checks.reveal()
    assert "nothing to reveal" in capsys.readouterr().out


def test_prediction_needs_a_valid_profile_and_the_results(tmp_path):
    with pytest.raises(profiles.ParameterError, match="valid profiles: smoke, ci, full, paper"):
        checks.predict_gated_width(lambda d: 1, "fast", tmp_path)
    with pytest.raises(FileNotFoundError, match="nlbudget run 02 --profile smoke"):
        checks.predict_gated_width(lambda d: 1, "smoke", tmp_path)


def test_score_counts_what_passed(fake_results, capsys):
    checks.start("01", "smoke")
    checks.perplexity(lambda nll: math.exp(float(nll.double().mean())))
    checks.predict_exchange_symmetric({"linear"}, "smoke", fake_results)  # wrong for FIGURES
    with pytest.raises(checks.CheckFailed):
        checks.token_nll(lambda logits, ids: torch.zeros(ids.shape[0], ids.shape[1] - 1))
    with pytest.raises(NotImplementedError):  # a stub is not counted
        checks.gated_mlp(lambda *a: (_ for _ in ()).throw(NotImplementedError("1.1")))
    assert checks.score() == (1, 3)
    assert "not yet: predict_exchange_symmetric, token_nll" in capsys.readouterr().out
    checks.start("02", "smoke")  # a new notebook starts from nothing
    assert checks.score() == (0, 0)


#: Known wrong answers (from WRONG_FUNCTIONS: check, index) and the hint each must get.
#: (keep_first_fit's: position 0 in the fit)
HINTED = {("gated_mlp", 1): "σ is on the wrong branch", ("symmetric_mlp", 1): "the gated form",
          ("token_nll", 1): "predict token t + 1", ("perplexity", 2): "not of the sum",
          ("delta_labels", 1): "25th", ("auc", 1): "counts ½",
          ("causal_softmax", 0): "mask the future", ("causal_softmax", 1): "transposed",
          ("gate_beats_random", 0): "chance", ("gate_beats_random", 1): "reversed",
          ("lora_rank", 0): "not the probe's width k", ("lora_rank", 1): "do not round up",
          ("passing_pair", 1): "the same direction, another length",
          ("passing_pair", 2): "the opposite direction",
          ("width", 1): "a path may skip a layer",
          ("probe_params", 1): "the weights alone",
          ("random_feature_map", 1): "start with x itself",
          ("random_feature_map", 2): "centre x first",
          ("symmetric_module", 0): "exercise 1.3's way", ("symmetric_module", 1): "no single unit",
          ("symmetric_module", 2): "adds nothing whatever σ does",
          ("modular_loop", 0): "no weight changed", ("modular_loop", 1): "it memorised",
          ("frozen_probe", 0): "the base moved", ("frozen_probe", 1): "nothing trained",
          ("budget_plan", 0): "costs do not add", ("budget_plan", 1): "cost they add per FLOP",
          ("keep_first_fit", 1): "position 0 is in your fit"}


@pytest.mark.parametrize("name,i", sorted(HINTED))
def test_a_known_wrong_answer_is_named(name, i):
    with pytest.raises(checks.CheckFailed) as e:
        getattr(checks, name)(WRONG_FUNCTIONS[name][i])
    assert "hint: " in str(e.value) and HINTED[name, i] in str(e.value), str(e.value)
    # and an unknown wrong answer gets no hint it does not deserve
    if name in ("gated_mlp", "token_nll", "auc", "perplexity"):
        with pytest.raises(checks.CheckFailed) as e:
            getattr(checks, name)(WRONG_FUNCTIONS[name][0])
        assert HINTED[name, i] not in str(e.value)


def test_a_student_notebook_without_results_checks_against_the_committed_ones(
        tmp_path, monkeypatch, capsys):
    """Opened on Colab or in a fresh clone, where only the `full` results are committed, a
    prediction is checked against them (and says so) instead of failing."""
    from nlbudget import paths

    monkeypatch.setattr(paths, "results_dir", lambda: tmp_path)  # this build ran nothing
    doc = checks.chapter_results("02", "ci")
    assert doc["parameters"]["profile"] == "full"
    assert "committed full results" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError):  # an explicit folder is taken at its word
        checks.chapter_results("02", "ci", tmp_path)


def test_a_width_one_unit_off_counts(fake_results, capsys):
    """Exercise 2.2: 8d²/3d is rarely whole; rounded down (8 * d // 3) or up, it is right."""
    for got in (199, 200, 201):
        checks.predict_gated_width(lambda d, g=got: g, "smoke", fake_results)
        assert capsys.readouterr().out.startswith("✓"), got
    checks.predict_gated_width(lambda d: 198, "smoke", fake_results)
    assert capsys.readouterr().out.startswith("✗")
