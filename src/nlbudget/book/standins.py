"""Local stand-ins for what the `paper` profile fetches from the Hugging Face hub, so that its
code path can run end to end with the hub switched off (the tests; a GPU check).

* every hub model id a chapter's `paper` settings name becomes a tiny model of the same family
  (GPT-2 for `gpt2*`, GPT-NeoX with a parallel residual for `EleutherAI/pythia-*`), saved with
  its tokenizer in the Hugging Face cache layout (`<hub>/models--<org>--<name>/snapshots/…`),
  so `from_pretrained(id, local_files_only=True)` — the `paper` path's first try — finds it;
* WikiText-103 and LAMBADA become tiny `datasets.DatasetDict`s (paragraphs of the offline
  `pydocs` corpus) saved with `save_to_disk` under `<datasets>/<repo>/<config>`, the local
  mirror `corpora.load_hub` reads before the hub (`NLBUDGET_HUB_DATASETS`);
* `overrides(key)` gives a chapter's `smoke` budgets with the `paper` models, corpora and
  dtype kept, so each chapter runs its `paper` branches in seconds.

    env = standins.build(tmp)            # {"HF_HUB_CACHE": …, "HF_HUB_OFFLINE": "1", …}
    runner.run("03", profile="paper", parameters=standins.overrides("03"))  # under env
"""

from __future__ import annotations

from pathlib import Path

from nlbudget import training
from nlbudget.assets import corpora, models
from nlbudget.book import profiles

#: Settings that say *what* a chapter runs on (kept at the paper's values); every other
#: setting is a budget, taken from the `smoke` profile.
IDENTITY = ("models", "atlas_models", "corpus", "cross_corpus", "lastword", "dtype")
REVISION = "0" * 40  # the snapshot every stand-in is filed under


def hub_model_ids() -> list[str]:
    """Every hub model id named by a chapter's `paper` settings."""
    ids = []
    for ch in profiles.CHAPTERS.values():
        for name in str(ch.settings["paper"].get("models", "")).split(","):
            if name and name not in models.OFFLINE_MODELS and name not in ids:
                ids.append(name)
    return ids


def hub_corpora() -> list[str]:
    names = []
    for ch in profiles.CHAPTERS.values():
        for k in ("corpus", "cross_corpus", "lastword"):
            v = ch.settings["paper"].get(k)
            if v in corpora.HUB_CORPORA and v not in names:
                names.append(v)
    return names


def overrides(key: str) -> dict:
    """Chapter `key`'s smoke budgets, for a run at the `paper` profile."""
    ch = profiles.chapter(key)
    return {k: v for k, v in ch.settings["smoke"].items() if k not in IDENTITY}


def _tiny(model_id: str, vocab: int):
    from transformers import AutoModelForCausalLM, GPT2Config, GPTNeoXConfig

    if model_id.startswith("gpt2"):
        cfg = GPT2Config(vocab_size=vocab, n_positions=512, n_embd=32, n_layer=4, n_head=2,
                         bos_token_id=0, eos_token_id=0)
    elif "pythia" in model_id:
        cfg = GPTNeoXConfig(vocab_size=vocab, max_position_embeddings=512, hidden_size=32,
                            num_hidden_layers=4, num_attention_heads=2, intermediate_size=128,
                            use_parallel_residual=True, rotary_pct=0.25,
                            bos_token_id=0, eos_token_id=0)
    else:
        raise ValueError(f"no stand-in family for hub model {model_id!r}")
    return AutoModelForCausalLM.from_config(cfg)


def save_hub_model(model, tokenizer, model_id: str, hub: Path) -> Path:
    """Save `model` and `tokenizer` where the hub cache would hold `model_id`."""
    repo = hub / ("models--" + model_id.replace("/", "--"))
    snap = repo / "snapshots" / REVISION
    model.save_pretrained(snap)
    tokenizer.save_pretrained(snap)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    return snap


def save_hub_datasets(root: Path, source: str = "pydocs") -> dict[str, Path]:
    """WikiText-103 and LAMBADA stand-ins from the offline corpus `source`."""
    import datasets

    text = corpora.load(source)
    paras = [p for p in text.paragraphs if len(p.split()) >= 8]
    out = {}
    for name in hub_corpora():
        repo, config, _ = corpora.HUB_CORPORA[name]
        if name == "lambada":  # passages whose last word is the target
            ds = datasets.DatasetDict({"test": datasets.Dataset.from_dict(
                {"text": [" ".join(p.split()[:80]) for p in paras[-300:]]})})
        else:  # WikiText's shape: headings (= … =) and blank lines among paragraphs
            n = len(paras)
            cut = {"train": paras[: n // 4], "validation": paras[n // 4: n // 4 + 300],
                   "test": paras[n // 4 + 300: n // 4 + 600]}
            ds = datasets.DatasetDict({s: datasets.Dataset.from_dict(
                {"text": [" = Heading = ", ""] + [f" {p} " for p in ps]}) for s, ps in cut.items()})
        out[name] = root / repo / config
        ds.save_to_disk(str(out[name]))
    return out


def build(root: Path, vocab: int = 512) -> dict[str, str]:
    """Write every stand-in under `root`; return the environment that makes the `paper`
    profile use them (and never the network)."""
    import torch

    root = Path(root)
    tok = training.train_tokenizer(corpora.load("pydocs"), vocab_size=vocab)
    for i, model_id in enumerate(hub_model_ids()):
        torch.manual_seed(i)
        save_hub_model(_tiny(model_id, len(tok)), tok, model_id, root / "hub")
    save_hub_datasets(root / "datasets")
    return {"HF_HUB_CACHE": str(root / "hub"), "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "NLBUDGET_HUB_DATASETS": str(root / "datasets")}
