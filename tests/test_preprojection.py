"""Part IV's modules: step-0 equivalence, frozen base, K/V cache, unwrap, budgets, scoring."""

import pytest
import torch

from nlbudget import evaluation
from nlbudget import preprojection as pp
from nlbudget.assets import models
from nlbudget.chapters import ch06_preprojection_probes as ch06
from nlbudget.verdicts import stats


def tiny(family: str, dtype=torch.float32):
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    if family == "llama":
        cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
                          num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=64)
        m = AutoModelForCausalLM.from_config(cfg)
    else:
        m = models.build_tiny("neox-par", seed=0, vocab_size=97, n_layer=3, d_model=32,
                              n_head=4, context=64)
    return m.to(dtype).eval()


FAMILIES = ["llama", "gpt_neox"]
IDS = torch.randint(0, 97, (3, 20), generator=torch.Generator().manual_seed(1))


def perturb(model):
    """Move every new parameter away from its step-0 value."""
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=torch.float32).to(p.dtype))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("variant", pp.VARIANTS)
def test_step0_logits_identical(family, dtype, variant):
    m = tiny(family, dtype)
    with torch.no_grad():
        base = m(input_ids=IDS).logits
    v = pp.variant_model(m, variant, pp.Budget(k=4, lora_rank=2))
    with torch.no_grad():
        assert torch.equal(v(input_ids=IDS).logits, base)
    with torch.no_grad():  # the base model itself is left alone
        assert torch.equal(m(input_ids=IDS).logits, base)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("variant", ["lora", "pre", "skip", "pre+skip"])
def test_gradients_reach_only_new_parameters(family, variant):
    m = tiny(family)
    names = {n for n, _ in m.named_parameters()}
    v = pp.variant_model(m, variant, pp.Budget(k=4, lora_rank=2))
    v.train()
    v(input_ids=IDS, labels=IDS).loss.backward()
    new, base = [], []
    for n, p in v.named_parameters():
        is_new = any(s in n for s in ("lora_", ".pre.", ".skip."))
        (new if is_new else base).append((n, p))
    assert new and base
    assert all(not p.requires_grad and p.grad is None for _, p in base)
    assert all(p.requires_grad and p.grad is not None for _, p in new)
    assert any(p.grad.abs().sum() > 0 for _, p in new)
    # the copy's base parameters are the original model's, by name
    stripped = {n.replace("base_model.model.", "").replace(".attn.", ".").replace(
        ".base_layer", "") for n, _ in base}
    assert stripped == names


@pytest.mark.parametrize("family", FAMILIES)
def test_only_probe_changes_when_training(family):
    m = tiny(family)
    before = {n: p.clone() for n, p in m.named_parameters()}
    v = pp.variant_model(m, "pre+skip", pp.Budget(k=4, lora_rank=2))
    losses = pp.train_probe(v, torch.randint(0, 97, (16, 20)), steps=3, batch_size=4, lr=1e-2)
    assert len(losses) == 3
    for n, p in v.named_parameters():
        if not p.requires_grad:
            assert torch.equal(p, before[n.replace(".attn.", ".")]), n
    assert all(a.skip.gate != 0.5 for a in pp.probes(v))  # the skip gates moved
    assert all(a.skip.up.weight.abs().sum() > 0 for a in pp.probes(v))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_tensors_identical(family, dtype):
    m = tiny(family, dtype)
    base = pp.cache_tensors(m, IDS[:, :8], new_tokens=3)
    assert len(base) == 2 * 3 and all(dt == dtype for _, dt in base)
    for variant in ("lora", "pre", "skip", "pre+skip"):
        v = pp.variant_model(m, variant, pp.Budget(k=4, lora_rank=2))
        perturb(v)
        with torch.no_grad():
            assert not torch.equal(v(input_ids=IDS).logits, m(input_ids=IDS).logits)
        got = pp.cache_tensors(v, IDS[:, :8], new_tokens=3)
        assert got == base, variant
        assert pp.cache_bytes(got) == pp.cache_bytes(base) > 0


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unwrap_restores_bit_identical_outputs(family, dtype):
    m = tiny(family, dtype)
    with torch.no_grad():
        base = m(input_ids=IDS).logits
    attn = [type(a) for a in [getattr(b, pp.ATTENTION[family]) for b in pp.blocks(m)]]
    pp.wrap(m, pre_hidden=8, skip_rank=4)
    with pytest.raises(ValueError, match="already wrapped"):
        pp.wrap(m, pre_hidden=8)
    perturb(m)
    with torch.no_grad():
        assert not torch.equal(m(input_ids=IDS).logits, base)
    pp.unwrap(m)
    assert pp.probes(m) == []
    assert [type(getattr(b, pp.ATTENTION[family])) for b in pp.blocks(m)] == attn
    with torch.no_grad():
        assert torch.equal(m(input_ids=IDS).logits, base)


def test_sequential_layout_is_rejected():
    m = models.build_tiny("gpt2-seq", seed=0, vocab_size=97, n_layer=2, d_model=32, n_head=4,
                          context=64)
    with pytest.raises(ValueError, match="rotary"):
        pp.wrap(m, pre_hidden=4)


@pytest.mark.parametrize("family", FAMILIES)
def test_matched_budget(family):
    m = tiny(family)
    b = pp.matched_budget(m, k=4)
    counts = {v: pp.trainable(pp.variant_model(m, v, b)) for v in pp.VARIANTS}
    assert counts["base"] == 0
    assert counts["lora"] == pp.lora_params(m, b.lora_rank)
    ref = counts["pre+skip"]
    for v in ("lora", "pre", "skip"):
        assert abs(counts[v] - ref) / ref < 0.25, counts
    # LoRA's rank is the nearest: one more or one less is farther from the target
    for r in (b.lora_rank - 1, b.lora_rank + 1):
        if r >= 1:
            assert abs(pp.lora_params(m, r) - ref) >= abs(counts["lora"] - ref) - 2 * 32


def test_skip_use_is_zero_at_step0_and_measured_after():
    m = tiny("llama")
    pp.wrap(m, skip_rank=4)
    use = pp.skip_use(m, IDS)
    assert [u["ratio"] for u in use] == [0.0] * 3 and [u["gate"] for u in use] == [0.5] * 3
    perturb(m)
    use = pp.skip_use(m, IDS)
    assert all(u["ratio"] > 0 for u in use)
    assert all(a.stats is None for a in pp.probes(m))


class _Tok:
    """Words → ids by a fixed table; enough to score last words."""

    def __init__(self, words):
        self.ids = {w: i + 1 for i, w in enumerate(words)}

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [self.ids[w] for w in text.split()] + ([5] if text[:1] == " " else [])}


def test_last_word_eval_equals_greedy_decoding():
    m = tiny("gpt_neox")
    words = [f"w{i}" for i in range(60)]
    tok = _Tok(words)
    items = [{"context": " ".join(words[i:i + 10 + i % 7]), "target": words[(i * 7) % 60]}
             for i in range(12)]
    enc = evaluation.encode_items(items, tok, max_context=14)
    assert all(len(c) + len(t) <= 14 for c, t in enc)
    res = evaluation.last_word_eval(m, enc, batch_size=5)
    for i, (c, t) in enumerate(enc):
        ids = torch.tensor([c])
        out = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=len(t), min_new_tokens=len(t), pad_token_id=0)
        assert bool(res["correct"][i]) == (out[0, len(c):].tolist() == t)
    # force one item right: a target equal to the greedy continuation
    c, _ = enc[0]
    ids = torch.tensor([c])
    greedy = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                        max_new_tokens=2, min_new_tokens=2, pad_token_id=0)[0, len(c):].tolist()
    hit = evaluation.last_word_eval(m, [(c, greedy)])
    assert bool(hit["correct"][0]) and hit["nll"][0] > 0


@pytest.mark.parametrize("family", ["llama", "gpt_neox"])
@pytest.mark.parametrize("wrapped", [False, True])
def test_last_word_eval_scores_from_the_full_logits(family, wrapped):
    # the LM head runs only at the target positions: the same NLL as from all the logits
    m = tiny(family)
    if wrapped:
        pp.wrap(m, pre_hidden=4, skip_rank=4, seed=0)
    g = torch.Generator().manual_seed(3)
    enc = [(torch.randint(1, 97, (n,), generator=g).tolist(),
            torch.randint(1, 97, (1 + n % 3,), generator=g).tolist()) for n in range(5, 17)]
    res = evaluation.last_word_eval(m, enc, batch_size=4)
    for i, (c, t) in enumerate(enc):
        with torch.no_grad():
            lg = m(input_ids=torch.tensor([c + t])).logits[0, len(c) - 1:len(c) + len(t) - 1]
        nll = torch.nn.functional.cross_entropy(lg.float(), torch.tensor(t), reduction="sum")
        assert float(res["nll"][i]) == pytest.approx(float(nll), abs=1e-4)
        assert bool(res["correct"][i]) == bool((lg.argmax(-1) == torch.tensor(t)).all())


def test_bootstrap_paired():
    a = torch.tensor([1.0, 0.0] * 50)
    assert stats.bootstrap_paired(a, a, n_boot=200) == (0.0, 0.0)
    b = torch.tensor([1.0, 1.0] * 50)
    lo, hi = stats.bootstrap_paired(a, b, n_boot=200)
    assert 0.5 < lo <= 1.0 <= hi < 1.6
    lo, hi = stats.bootstrap_paired(a, b, "diff", n_boot=200)
    assert 0.3 < lo <= 0.5 <= hi < 0.7
    assert stats.bootstrap_paired(torch.zeros(10), b[:10], n_boot=50) == (None, None)


def test_probe_study_records():
    m = tiny("gpt_neox")
    w = torch.randint(0, 97, (12, 16), generator=torch.Generator().manual_seed(3))
    items = [(list(range(1, 9)), [9, 10])] * 4
    S = {"seed": 0, "lr": 1e-2, "n_boot": 20, "ablation_windows": 4, "probe_seeds": 1}
    run = ch06.probe_run(S, "tiny", m, None, pp.Budget(k=4, lora_rank=2), w, w[:4], items,
                         steps=2, batch=2)
    st, kept = {}, {}
    for v in pp.VARIANTS:
        st[v], kept[v] = ch06.probe(run, v)
    ch06.against_references(st, kept, S)
    assert list(st) == list(pp.VARIANTS)
    assert st["base"]["train_tokens"] == 0 and st["lora"]["train_tokens"] == 2 * 2 * 16
    assert all(r["step0_identical"] and r["cache_identical"] for r in st.values())
    assert "vs_base" not in st["base"] and "vs_lora" not in st["lora"]
    assert all("vs_base" in st[v] and "vs_lora" in st[v] for v in ("pre", "skip", "pre+skip"))
    assert "skip_use" in st["skip"] and "skip_use" in st["pre+skip"] and "skip_use" not in st["pre"]


@pytest.mark.parametrize("family", FAMILIES)
def test_inference_form_matches(family):
    m = tiny(family)
    v = pp.variant_model(m, "pre+skip", pp.Budget(k=4, lora_rank=2))
    perturb(v)
    with torch.no_grad():
        ref = v(input_ids=IDS).logits
    cache = pp.cache_tensors(v, IDS[:, :8], new_tokens=3)
    pp.inference_form(v)
    assert all(a.fused is not None for a in pp.probes(v))
    with torch.no_grad():
        got = v(input_ids=IDS).logits
    assert torch.allclose(got, ref, atol=1e-5) and not torch.equal(got, m(input_ids=IDS).logits)
    assert pp.cache_tensors(v, IDS[:, :8], new_tokens=3) == cache


@pytest.mark.parametrize("family", FAMILIES)
def test_cached_decoding_equals_the_uncached_forward(family):
    base = tiny(family)
    m = pp.variant_model(base, "pre+skip", pp.matched_budget(base, 4), seed=0)
    perturb(m)  # off the step-0 identity: the modules now change the logits
    res = pp.cached_vs_uncached(m, IDS[:2, :8], new_tokens=4, reference=base)
    assert res["max_abs"] <= 1e-4 * res["scale"]  # the cache is not stale
    assert res["reference_max_abs"] > 1e-2 * res["scale"]  # and the check can tell models apart
    assert res["bytes"] == pp.cached_vs_uncached(base, IDS[:2, :8], new_tokens=4)["bytes"] > 0


def test_a_stale_cache_is_caught():
    # a module whose output depends on how many tokens it sees at once breaks the cache:
    # the check must catch it
    base = tiny("llama")
    m = pp.variant_model(base, "pre", pp.matched_budget(base, 4), seed=0)
    perturb(m)
    for probe in pp.probes(m):
        pre = probe.pre
        orig = pre.forward
        probe.pre.forward = lambda x, orig=orig: orig(x) * (1.0 + 0.5 * (x.shape[1] == 1))
    res = pp.cached_vs_uncached(m, IDS[:2, :8], new_tokens=4)
    assert res["max_abs"] > 1e-3 * res["scale"]


def test_skip_ablation_measures_each_layers_skip():
    base = tiny("llama")
    m = pp.variant_model(base, "skip", pp.matched_budget(base, 4), seed=0)
    out = pp.skip_ablation(m, IDS, batch_size=2, n_boot=50)
    assert [u["layer"] for u in out] == [0, 1, 2]
    assert all(u["ppl_change"] == 0.0 for u in out)  # at step 0 the skip adds nothing
    perturb(m)
    out = pp.skip_ablation(m, IDS, batch_size=2, n_boot=50)
    assert all(u["ppl_change"] != 0.0 and u["ci"][0] <= u["ci"][1] for u in out)
    assert all(p.skip is not None for p in pp.probes(m))  # every skip is put back
