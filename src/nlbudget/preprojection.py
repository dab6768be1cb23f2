"""Part IV (P4, Shinde): a position-agnostic pre-projection in front of Q/K/V and a content
skip around attention, added as frozen probes to an unmodified `transformers` model.

In both supported layouts — Llama/SmolLM2 (`self_attn`, separate q/k/v projections) and
GPT-NeoX/Pythia (`attention`, one fused `query_key_value`) — the attention module receives the
normed hidden state $x$ and applies rotary position encoding *after* its projections. So a
module applied to $x$ before the attention module sees no position: it is position-agnostic.

`wrap` replaces each layer's attention module by `ProbedAttention`, which computes

    f = x + W_2 GELU(W_1 x + b_1) + b_2          (pre-projection; W_2 = b_2 = 0 at step 0)
    y = Attn(f) + σ(a) · U V f                     (content skip; U = 0 at step 0)

so the wrapped model is exactly the base model until training moves W_2, b_2 or U. The new
modules keep their parameters in float32 (a bfloat16 base stays bfloat16); `unwrap` puts the
original attention modules back. The K/V cache is written by the original attention module
from f, so its tensors keep their shapes and dtypes.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nlbudget import timing
from nlbudget.assets import devices
from nlbudget.capture import blocks, layout
from nlbudget.evaluation import eval_nll, perplexity
from nlbudget.training import cosine_schedule, lm_step
from nlbudget.verdicts import stats

#: Each layout's attention attribute on a block, and the projections LoRA adapts.
ATTENTION = {"llama": "self_attn", "gpt_neox": "attention"}
LORA_TARGETS = {"llama": ["q_proj", "k_proj", "v_proj", "o_proj"],
                "gpt_neox": ["query_key_value", "dense"]}
#: The variants compared at a matched trainable-parameter budget.
VARIANTS = ("base", "lora", "pre", "skip", "pre+skip")


class PreProjection(nn.Module):
    """f(x) = x + W_2 GELU(W_1 x + b_1) + b_2, with W_2, b_2 = 0: the identity at step 0."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)

    def forward(self, x):
        h = self.down(F.gelu(self.up(x.to(self.up.weight.dtype))))
        return x + h.to(x.dtype)


class ContentSkip(nn.Module):
    """s(f) = σ(a) · U V f — a rank-r linear read of the (pre-projected) features added to the
    attention output, bypassing attention, with a learned per-layer gate σ(a) (a = 0, so
    σ = ½, at step 0). U = 0 at step 0, as LoRA's B: the skip starts silent and learns at
    the rate of its weights, not of a scalar."""

    def __init__(self, d: int, rank: int):
        super().__init__()
        self.down = nn.Linear(d, rank, bias=False)  # V
        self.up = nn.Linear(rank, d, bias=False)  # U
        nn.init.zeros_(self.up.weight)
        self.logit = nn.Parameter(torch.zeros(()))

    @property
    def gate(self) -> float:
        return float(torch.sigmoid(self.logit.detach()))

    def forward(self, f):
        s = torch.sigmoid(self.logit) * self.up(self.down(f.to(self.up.weight.dtype)))
        return s.to(f.dtype)


class ProbedAttention(nn.Module):
    """An attention module with a pre-projection in front and a content skip around it.
    With `stats` set to a dict, it accumulates the mean norms of the attention output and of
    the skip per token (how much the layer uses the skip)."""

    def __init__(self, attn: nn.Module, pre: PreProjection | None, skip: ContentSkip | None):
        super().__init__()
        self.attn, self.pre, self.skip = attn, pre, skip
        self.stats: dict | None = None
        self.fused: tuple | None = None  # set by `inference_form`

    def forward(self, hidden_states, *args, **kwargs):
        if self.fused is not None:
            return self._fused_forward(hidden_states, *args, **kwargs)
        f = hidden_states if self.pre is None else self.pre(hidden_states)
        out, *rest = self.attn(f, *args, **kwargs)
        if self.skip is not None:
            s = self.skip(f)
            if self.stats is not None:
                with torch.no_grad():
                    self.stats["attn"] += out.float().norm(dim=-1).sum().item()
                    self.stats["skip"] += s.float().norm(dim=-1).sum().item()
                    self.stats["tokens"] += out.shape[0] * out.shape[1]
            out = out + s
        return (out, *rest)

    def _fused_forward(self, x, *args, **kwargs):
        pre, skip = self.fused
        f = x
        if pre is not None:
            h = F.linear(F.gelu(F.linear(x.float(), pre[0], pre[1])), pre[2], pre[3])
            f = x + h.to(x.dtype)
        out, *rest = self.attn(f, *args, **kwargs)
        if skip is not None:
            out = out + F.linear(F.linear(f.float(), skip[0]), skip[1]).to(out.dtype)
        return (out, *rest)


def inference_form(model):
    """The wrapped model for decoding, in place: the new modules' float32 weights applied
    through functional calls, with the gate folded into U (U' = σ(a)·U) — fewer operations per
    token. They stay in float32 even on a bfloat16 model: on a CPU, bfloat16 products this
    small take several times longer. Same function up to rounding; no gradients, no
    statistics."""
    for m in probes(model):
        with torch.no_grad():
            pre = None if m.pre is None else tuple(
                t.detach().float() for t in (m.pre.up.weight, m.pre.up.bias, m.pre.down.weight,
                                             m.pre.down.bias))
            skip = None if m.skip is None else (
                m.skip.down.weight.detach().float(),
                (torch.sigmoid(m.skip.logit) * m.skip.up.weight).float())
        m.fused = (pre, skip)
    return model


def _family(model) -> str:
    fam = layout(model).family
    if fam not in ATTENTION:
        raise ValueError(f"pre-projection needs rotary attention (applied after the Q/K/V "
                         f"projections); supported: {', '.join(ATTENTION)}, got {fam!r}")
    return fam


def probes(model) -> list[ProbedAttention]:
    """The `ProbedAttention` modules of a wrapped model, in layer order (empty if none)."""
    if hasattr(model, "peft_config"):  # a peft (LoRA) model wraps the transformers model
        model = model.get_base_model()
    attr = ATTENTION.get(layout(model).family)
    return [getattr(b, attr) for b in blocks(model)
            if attr and isinstance(getattr(b, attr), ProbedAttention)]


def wrap(model, pre_hidden: int = 0, skip_rank: int = 0, seed: int = 0) -> list[ProbedAttention]:
    """Insert a pre-projection (hidden width `pre_hidden`, 0 = none) and a content skip (rank
    `skip_rank`, 0 = none) into every layer, in place. Freezes the base model: only the new
    parameters require gradients. Returns the new modules."""
    if probes(model):
        raise ValueError("model is already wrapped; unwrap it first")
    attr, d = ATTENTION[_family(model)], model.config.hidden_size
    for p in model.parameters():
        p.requires_grad_(False)
    torch.manual_seed(seed)
    for b in blocks(model):
        pre = PreProjection(d, pre_hidden) if pre_hidden else None
        skip = ContentSkip(d, skip_rank) if skip_rank else None
        setattr(b, attr, devices.follow(ProbedAttention(getattr(b, attr), pre, skip), b))
    return probes(model)


def unwrap(model):
    """Put the original attention modules back (the new modules are dropped)."""
    attr = ATTENTION[_family(model)]
    for b in blocks(model):
        m = getattr(b, attr)
        if isinstance(m, ProbedAttention):
            setattr(b, attr, m.attn)
    return model


def trainable(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ------------------------------------------------------------------ matched budgets


def lora_params(model, rank: int) -> int:
    """Trainable parameters of rank-`rank` LoRA on the attention projections (without
    building it): r·(d_in + d_out) per adapted linear map."""
    fam = _family(model)
    total = 0
    for b in blocks(model):
        attn = getattr(b, ATTENTION[fam])
        attn = attn.attn if isinstance(attn, ProbedAttention) else attn
        for name in LORA_TARGETS[fam]:
            lin = getattr(attn, name)
            total += rank * (lin.in_features + lin.out_features)
    return total


@dataclass(frozen=True)
class Budget:
    """Each variant's module sizes at one trainable-parameter budget: `pre+skip` uses width
    k for both modules; `pre` and `skip` alone use 2k; LoRA takes the rank whose count is
    nearest."""

    k: int
    lora_rank: int

    def sizes(self, variant: str) -> dict:
        return {"base": {}, "lora": {"rank": self.lora_rank},
                "pre": {"pre_hidden": 2 * self.k}, "skip": {"skip_rank": 2 * self.k},
                "pre+skip": {"pre_hidden": self.k, "skip_rank": self.k}}[variant]


def matched_budget(model, k: int) -> Budget:
    d, n = model.config.hidden_size, len(blocks(model))
    target = n * ((2 * d * k + k + d) + (2 * d * k + 1))  # pre+skip at width k
    rank = min(range(1, 4 * k + 1), key=lambda r: abs(lora_params(model, r) - target))
    return Budget(k, rank)


def with_lora(model, rank: int, seed: int = 0):
    """A copy of `model` with rank-`rank` LoRA (peft) on its attention projections; alpha = 2r
    (peft's usual scaling of 2). Only the adapters are trainable."""
    from peft import LoraConfig, get_peft_model  # loads on first use: peft is slow to import

    torch.manual_seed(seed)
    cfg = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, bias="none",
                     target_modules=LORA_TARGETS[_family(model)])
    # peft's wrapper calls the inner model's forward directly, past its `devices.attach`
    # wrapper: the wrapper goes on the outside too
    return devices.attach(get_peft_model(copy.deepcopy(model), cfg), devices.device_of(model))


def variant_model(model, variant: str, budget: Budget, seed: int = 0):
    """A fresh trainable copy of `model` for one variant (the frozen base for `base`)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    if variant == "lora":
        return with_lora(model, budget.lora_rank, seed)
    m = copy.deepcopy(model)
    if variant == "base":
        for p in m.parameters():
            p.requires_grad_(False)
    else:
        wrap(m, seed=seed, **budget.sizes(variant))
    return m


# ------------------------------------------------------------------ training and analysis


def train_probe(model, windows: torch.Tensor, steps: int, batch_size: int, lr: float,
                seed: int = 0, progress=None) -> list[float]:
    """AdamW on next-token loss over random train windows; only parameters that require
    gradients (the probe's) are updated. Cosine schedule with 10 % warm-up."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    sched = cosine_schedule(opt, max(1, steps // 10), steps)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):  # frozen weights have no gradient: clipping sees the probe's only
        batch = windows[torch.randint(0, len(windows), (batch_size,), generator=gen)]
        losses.append(lm_step(model, batch, opt, sched))
        if progress is not None:
            progress.update(1)
    model.eval()
    return losses


@torch.no_grad()
def skip_use(model, windows: torch.Tensor, batch_size: int = 8) -> list[dict]:
    """Per layer: the learned gate σ(a), and the mean norm of the skip's output relative to the
    attention output's, over the tokens of `windows` (0 where the layer has no skip)."""
    mods = probes(model)
    for m in mods:
        m.stats = {"attn": 0.0, "skip": 0.0, "tokens": 0}
    try:
        for i in range(0, len(windows), batch_size):
            model(input_ids=windows[i:i + batch_size])
        out = []
        for layer, m in enumerate(mods):
            s = m.stats
            out.append({"layer": layer,
                        "gate": m.skip.gate if m.skip is not None else None,
                        "ratio": s["skip"] / s["attn"] if s["tokens"] else 0.0})
        return out
    finally:
        for m in mods:
            m.stats = None


@torch.no_grad()
@timing.timed("preprojection.skip_ablation")
def skip_ablation(model, windows: torch.Tensor, batch_size: int = 8, n_boot: int = 1000,
                  seed: int = 0) -> list[dict]:
    """How much each layer *uses* its content skip: the relative perplexity change when that
    layer's skip alone is switched off (its pre-projection stays), with a bootstrap interval
    over windows. Unlike a norm ratio, it does not track the scale of the activations."""
    base = eval_nll(model, windows, batch_size)
    out = []
    for layer, m in enumerate(probes(model)):
        if m.skip is None:
            continue
        skip, m.skip = m.skip, None
        try:
            nll = eval_nll(model, windows, batch_size)
        finally:
            m.skip = skip
        out.append({"layer": layer, "ppl_change": perplexity(nll) / perplexity(base) - 1,
                    "ci": stats.bootstrap_ppl_ratio(base.double().numpy(), nll.double().numpy(),
                                                    n_boot, seed)})
    return out


def cache_tensors(model, ids: torch.Tensor, new_tokens: int = 4) -> list[tuple]:
    """Greedy generation with the K/V cache; returns (shape, dtype) of every cached key and
    value tensor, layer by layer, and checks nothing else."""
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                         max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                         return_dict_in_generate=True, use_cache=True, pad_token_id=0)
    cache = out.past_key_values
    return [(tuple(t.shape), t.dtype) for layer in cache.layers for t in (layer.keys, layer.values)]


@torch.no_grad()
@timing.timed("preprojection.cached_vs_uncached")
def cached_vs_uncached(model, ids: torch.Tensor, new_tokens: int = 4, reference=None) -> dict:
    """Greedy decoding with the K/V cache against one uncached forward pass over the decoded
    sequence: the largest |Δ| of the next-token logits at every decoded step, relative to
    the largest |logit|, and the cache's bytes (values: every cached tensor's numel × size).
    With `reference` (another model), its uncached logits are compared too: the control that
    the check can tell two models apart."""
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                         max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                         return_dict_in_generate=True, output_logits=True, use_cache=True,
                         pad_token_id=0)
    cached = torch.stack(out.logits, 1).float()  # (B, new, V)
    seq = out.sequences
    P = ids.shape[1]

    def uncached(m):
        return m(input_ids=seq[:, :-1], use_cache=False).logits[:, P - 1:].float()

    scale = float(cached.abs().max())
    res = {"max_abs": float((cached - uncached(model)).abs().max()), "scale": scale,
           "bytes": sum(t.numel() * t.element_size() for layer in out.past_key_values.layers
                        for t in (layer.keys, layer.values))}
    if reference is not None:
        res["reference_max_abs"] = float((cached - uncached(reference)).abs().max())
    return res


def cache_bytes(tensors: list[tuple]) -> int:
    return sum(torch.Size(s).numel() * torch.empty((), dtype=dt).element_size()
               for s, dt in tensors)


@torch.no_grad()
def _generate_seconds(model, ids: torch.Tensor, new_tokens: int) -> float:
    t0 = time.perf_counter()
    model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                   max_new_tokens=new_tokens, min_new_tokens=new_tokens, use_cache=True,
                   pad_token_id=0)
    return time.perf_counter() - t0


@timing.timed("preprojection.decode_seconds")
def decode_seconds(models: dict, batch: int, prompt: int, new_tokens: int, reps: int = 3,
                   vocab: int = 1000, seed: int = 0) -> dict:
    """Seconds per decoded token with the K/V cache (greedy) for each of `models` (name →
    model): the time of generating `new_tokens` minus that of generating 1 (the prefill), over
    `new_tokens` − 1. The models are timed in turn within each of `reps` rounds (so a slow
    spell of the machine hits all of them), after one warm-up each; medians are returned."""
    gen = torch.Generator().manual_seed(seed)
    size = min([vocab] + [m.config.vocab_size for m in models.values()])
    ids = torch.randint(0, size, (batch, prompt), generator=gen)
    for m in models.values():
        _generate_seconds(m, ids, 2)
    per = {k: [] for k in models}
    for _ in range(reps):
        for k, m in models.items():
            per[k].append((_generate_seconds(m, ids, new_tokens) - _generate_seconds(m, ids, 1))
                          / (new_tokens - 1))
    return {k: sorted(v)[len(v) // 2] for k, v in per.items()}
