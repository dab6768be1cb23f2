"""Training small causal LMs from scratch on a corpus (Part II's matched pair, Part IV's
Pythia-style model): an 8k byte-level BPE, random windows, AdamW, a fixed step budget.

Checkpoints are cached under `<cache>/checkpoints/<name>/` keyed by everything that defines
them (architecture, sizes, steps, seed, corpus checksum, the code that builds and trains the
model, the torch and transformers versions: `code_key`), so each profile trains once and a
change to any of them trains again.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.std import tqdm

from nlbudget import evaluation, paths, timing
from nlbudget.assets import devices, models
from nlbudget.assets.corpora import Corpus
from nlbudget.evaluation import eval_nll
from nlbudget.paths import atomic_write_text

#: The matched pair of small models trained from scratch (Parts II and IV): the same settings
#: in every chapter that uses it, so the cached checkpoints are shared.
PAIR = {
    "smoke": dict(pair_layers=3, pair_d_model=64, pair_context=64, pair_batch=8,
                  pair_vocab=512, pair_steps=10, pair_lr=1e-3, pair_eval_windows=8),
    # ci: the full pair's shape, stopped early (minutes of the default book)
    "ci": dict(pair_layers=4, pair_d_model=32, pair_context=128, pair_batch=12,
               pair_vocab=2048, pair_steps=300, pair_lr=1e-3, pair_eval_windows=48),
    # full: sized to reach its plateau here (chapter 03's plateau control: the validation loss
    # improved < 2 % over the last fifth, upper end) with its middle MLPs in use (chapter 03's
    # middle-ablation control). d = 96 with a 4k vocabulary still improved 2.1 % [0.2, 4.1]
    # after 5,000 steps (val PPL 49.6, 17 min a model). d = 32 with a 2k vocabulary at lr 5e-3
    # reached its plateau in 6,000 steps (1.0–1.3 %, six models) but switched its middle MLPs
    # off (LayerNorm gains → 0.004, with or without decay on them; zeroing those MLPs +1.0 %);
    # at lr 1e-3: +0.6 % [0.3, 0.9], val PPL 71.5, the middle MLPs in use (gains 0.85–0.91,
    # zeroing one +4.4 % / +2.2 %). d = 64 at lr 2e-3: +1.6 % [0.8, 2.4], not yet (one seed each)
    "full": dict(pair_layers=4, pair_d_model=32, pair_context=128, pair_batch=12,
                 pair_vocab=2048, pair_steps=6000, pair_lr=1e-3, pair_eval_windows=48),
    "paper": dict(pair_layers=6, pair_d_model=256, pair_context=256, pair_batch=32,
                  pair_vocab=8192, pair_steps=4000, pair_lr=1e-3, pair_eval_windows=256),
}


@dataclass(frozen=True)
class TrainConfig:
    kind: str  # models.TINY_KINDS
    n_layer: int = 6
    d_model: int = 192
    n_head: int = 4
    context: int = 128
    vocab_size: int = 8192
    steps: int = 300
    batch_size: int = 32
    lr: float = 1e-3
    warmup: int = 30
    weight_decay: float = 0.1
    #: what weight decay applies to: "matrices" (weights and embeddings; not LayerNorm gains
    #: or biases, as GPT-2 and Pythia train), or "all" (this module's models before)
    decay: str = "matrices"
    seed: int = 0

    def key(self, corpus_sha: str) -> str:
        blob = json.dumps({**asdict(self), "corpus": corpus_sha, "code": code_key()},
                          sort_keys=True)
        return f"{self.kind}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def code_key() -> str:
    """What a checkpoint depends on besides its config and corpus: the source of this module
    (the training loop), of `evaluation` (its validation curve) and of the tiny models'
    definitions (`models.TINY_KINDS`, `tiny_config`, `build_tiny`), and the torch and
    transformers versions. Loading code in `models` makes no checkpoint and is not in it."""
    import transformers

    parts = [inspect.getsource(sys.modules[__name__]), inspect.getsource(evaluation),
             repr(models.TINY_KINDS), inspect.getsource(models.tiny_config),
             inspect.getsource(models.build_tiny), torch.__version__, transformers.__version__]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def pair_config(kind: str, settings: dict) -> TrainConfig:
    """The matched pair's config from a chapter's `pair_*` settings (PAIR): every
    chapter that uses the pair builds it here, so all share one cached checkpoint."""
    steps = settings["pair_steps"]
    return TrainConfig(kind, n_layer=settings["pair_layers"], d_model=settings["pair_d_model"],
                       context=settings["pair_context"], batch_size=settings["pair_batch"],
                       steps=steps, vocab_size=settings["pair_vocab"], lr=settings["pair_lr"],
                       warmup=max(1, steps // 10), seed=settings["seed"])


def pair_val(corpus: Corpus, tokenizer, settings: dict) -> torch.Tensor:
    """The matched pair's validation windows: the first `pair_eval_windows` windows of
    `pair_context` tokens of the validation split (its learning curve, and the chapters'
    evaluations of it)."""
    C = settings["pair_context"]
    return encode(corpus, tokenizer, "validation")[: settings["pair_eval_windows"] * C].view(-1, C)


@contextmanager
def one_thread():
    """PyTorch on one CPU thread inside the block (restored after)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def train_pair(kind: str, settings: dict, corpus: Corpus, tokenizer, device: str = "cpu",
               progress: bool = True):
    """One model of the matched pair (`pair_config`), trained with its validation curve on
    `pair_val` (a progress bar over its steps, unless `progress` is False) or read from the
    cache: every chapter that uses the pair calls this, so the cached checkpoint and its curve
    are the same for all. It trains on one thread, whatever the chapter's: a second gains a
    model this small nothing, and the checkpoint then does not depend on which chapter
    trained it. Returns (model, log)."""
    bar = tqdm(total=settings["pair_steps"], desc=f"train {kind}", mininterval=60,
               disable=not progress)
    with one_thread():
        out = train_or_load(pair_config(kind, settings), corpus, tokenizer, progress=bar,
                            device=device, val=pair_val(corpus, tokenizer, settings))
    bar.close()
    return out


def _pair_job(kind: str, settings: dict, corpus: Corpus) -> str:
    """One pair checkpoint, trained in a worker process (`train_pairs`), quietly."""
    import transformers  # in the worker: its progress bars would reach the notebook

    transformers.utils.logging.disable_progress_bar()
    train_pair(kind, settings, corpus, train_tokenizer(corpus, settings["pair_vocab"]),
               progress=False)
    return kind


def checkpoint(cfg: TrainConfig, corpus: Corpus, cache: Path | None = None) -> Path:
    """Where `train_or_load` keeps the checkpoint of `cfg` on `corpus`."""
    return (cache or paths.cache_dir()) / "checkpoints" / cfg.key(corpus.sha256)


def train_pairs(kinds, seeds, settings: dict, corpus: Corpus, workers: int | None = None) -> None:
    """Train the pair checkpoints of `kinds` × `seeds` that the cache lacks, side by side
    in `workers` processes (default: this process's PyTorch threads) of one thread each — each
    exactly as `train_pair` trains it, so the chapters then read them from the cache. With one
    worker, or on an accelerator, it trains nothing: the chapter's own `train_pair` calls train
    them in turn."""
    todo = [(kind, {**settings, "seed": seed}) for kind in kinds for seed in seeds]
    todo = [(kind, S) for kind, S in todo
            if not (checkpoint(pair_config(kind, S), corpus) / "train_log.json").is_file()]
    workers = min(len(todo), workers or torch.get_num_threads())
    if workers <= 1 or settings.get("device", "cpu") != "cpu":
        return
    bar = tqdm(total=len(todo), desc=f"the pair: {len(todo)} models, {workers} at a time",
               mininterval=60)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in as_completed([pool.submit(_pair_job, kind, S, corpus) for kind, S in todo]):
            f.result()
            bar.update(1)
    bar.close()


@timing.timed("training.train_tokenizer")
def train_tokenizer(corpus: Corpus, vocab_size: int = 8192, cache: Path | None = None):
    """A byte-level BPE trained on the corpus's train split (cached)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tm
    from transformers import PreTrainedTokenizerFast

    d = (cache or paths.cache_dir()) / "tokenizers" / f"{corpus.name}-bpe{vocab_size}-{corpus.sha256[:12]}"
    if (d / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(d)
    tok = Tokenizer(tm.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus.split("train"), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    fast.save_pretrained(d)
    return fast


@timing.timed("training.encode")
def encode(corpus: Corpus, tokenizer, split: str) -> torch.Tensor:
    """The split as one stream of token ids (paragraphs joined by blank lines)."""
    ids = tokenizer(corpus.text(split), add_special_tokens=False,
                    return_attention_mask=False)["input_ids"]
    return torch.tensor(ids, dtype=torch.long)


def random_windows(stream: torch.Tensor, n: int, length: int, gen: torch.Generator):
    starts = torch.randint(0, len(stream) - length, (n,), generator=gen)
    return torch.stack([stream[s:s + length] for s in starts.tolist()])


def lm_step(model, batch, optimizer, scheduler=None, clip: float = 1.0) -> float:
    """One AdamW step on next-token loss; returns the loss."""
    model.train()
    loss = model(input_ids=batch, labels=batch).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


def cosine_schedule(optimizer, warmup: int, total: int, floor: float = 0.1):
    def f(step):
        if step < warmup:
            return (step + 1) / warmup
        p = (step - warmup) / max(1, total - warmup)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, p)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, f)


#: A learning curve's points: the validation loss is measured this many times over training.
CURVE_POINTS = 40


def val_loss(model, windows: torch.Tensor, batch_size: int) -> float:
    """Mean next-token loss on held-out `windows` (the model left in eval mode)."""
    model.eval()
    with torch.no_grad():
        return float(eval_nll(model, windows, batch_size).mean())


def decay_groups(model, weight_decay: float, decay: str = "matrices") -> list[dict]:
    """AdamW's parameter groups: weight decay on the matrices (weights, embeddings) and, with
    `decay="all"`, on the vectors (LayerNorm gains, biases) as well; by default not."""
    params = [p for p in model.parameters() if p.requires_grad]
    if decay not in ("matrices", "all"):
        raise ValueError(f"decay={decay!r}: valid choices are matrices, all")
    if decay == "all":
        return [{"params": params, "weight_decay": weight_decay}]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


@timing.timed("training.train")
def train(cfg: TrainConfig, corpus: Corpus, tokenizer, progress=None, prepare=None,
          stream: torch.Tensor | None = None, device: str = "cpu",
          val: torch.Tensor | None = None):
    """Train from scratch with a fixed step budget; returns (model, log). `prepare(model)`,
    if given, modifies the fresh model first (e.g. swaps its MLPs); `stream` is the encoded
    train split, if the caller has it already. The model trains on `device`
    (`devices.attach`: batches are drawn on the CPU and moved by the model). With `val`
    (held-out windows), the log's `val_curve` is the validation loss CURVE_POINTS times over
    training (what `verdicts.controls.plateau` reads); the batches drawn do not change."""
    model = models.build_tiny(cfg.kind, seed=cfg.seed, vocab_size=len(tokenizer),
                              n_layer=cfg.n_layer, d_model=cfg.d_model, n_head=cfg.n_head,
                              context=cfg.context)
    if prepare is not None:
        prepare(model)
    devices.attach(model, device)
    if stream is None:
        stream = encode(corpus, tokenizer, "train")
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(decay_groups(model, cfg.weight_decay, cfg.decay), lr=cfg.lr,
                            betas=(0.9, 0.95))
    sched = cosine_schedule(opt, cfg.warmup, cfg.steps)
    losses, curve, t0 = [], [], time.perf_counter()
    every = max(1, cfg.steps // CURVE_POINTS)
    for step in range(1, cfg.steps + 1):
        losses.append(lm_step(model, random_windows(stream, cfg.batch_size, cfg.context, gen),
                              opt, sched))
        if val is not None and step % every == 0:
            curve.append(val_loss(model, val, cfg.batch_size))
        if progress is not None:
            progress.update(1)
    log = {"train_loss": losses, "val_curve": curve if val is not None else None,
           "seconds": time.perf_counter() - t0,
           "tokens": cfg.steps * cfg.batch_size * cfg.context,
           "params": sum(p.numel() for p in model.parameters())}
    return model.eval(), log


@timing.timed("training.train_or_load")
def train_or_load(cfg: TrainConfig, corpus: Corpus, tokenizer, cache: Path | None = None,
                  progress=None, device: str = "cpu", val: torch.Tensor | None = None):
    """The cached checkpoint for `cfg` on `corpus`, training it first (on `device`, its
    validation curve on `val` where given) if absent; the model is attached to `device`."""
    from transformers import AutoModelForCausalLM

    d = checkpoint(cfg, corpus, cache)
    if (d / "train_log.json").is_file():
        model = devices.attach(AutoModelForCausalLM.from_pretrained(d).float().eval(), device)
        return model, json.loads((d / "train_log.json").read_text())
    model, log = train(cfg, corpus, tokenizer, progress, device=device, val=val)
    tmp = d.with_name(d.name + ".part")
    model.save_pretrained(tmp)
    atomic_write_text(tmp / "train_log.json", json.dumps({**log, "config": asdict(cfg)}))
    tmp.replace(d)
    return model, {**log, "config": asdict(cfg)}
