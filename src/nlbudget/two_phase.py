"""P3 §5.3, two-phase gated linearization: phase 1 replaces some layers' MLPs by frozen ridge
surrogates and fine-tunes everything else; phase 2 freezes everything, puts the original MLPs
back behind soft gates (`gating.SoftGatedMLP`) and trains only the gates, on LM loss plus a
sparsity term; then hard routing (the MLP where g > ½). Chapter 04 runs it on the pair models
against an equal-compute control (`chapters.ch04_adaptive_gating.study.two_phase`)."""

from __future__ import annotations

import copy

import torch

from nlbudget import gating, surrogates, training
from nlbudget.assets import devices
from nlbudget.capture import blocks
from nlbudget.evaluation import eval_nll, perplexity


def val_ppl(m, windows) -> float:
    """Validation perplexity of `m`, in eval mode."""
    m.eval()
    return perplexity(eval_nll(m, windows))


def adamw(params, lr):
    """The fine-tuning optimiser of both phase 1 and its control."""
    return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)


def phase1(model, layers, data, S, gen, tick):
    """Phase 1: the MLPs of `layers` replaced by frozen ridge surrogates, everything
    else fine-tuned. Returns (the model, its fits)."""
    m = copy.deepcopy(model)
    fits, _ = surrogates.fit_layers(m, data["spans"]["fit"].windows, layers=layers)
    for l in layers:
        blocks(m)[l].mlp = devices.follow(fits[l], blocks(m)[l])
    opt = adamw([p for p in m.parameters() if p.requires_grad], S["ft_lr"])
    for _ in range(S["phase1_steps"]):
        training.lm_step(m, training.random_windows(data["train"], S["pair_batch"], data["context"], gen), opt)
        tick()
    return m, fits


def phase2(m, originals, fits, data, S, gen, tick) -> dict:
    """Phase 2: everything frozen, the original MLPs back behind soft gates (`SoftGatedMLP`);
    only the gates train, on LM loss plus `sparsity` × mean gate (after a 10 % warm-up)."""
    m.requires_grad_(False)
    gated = {l: devices.follow(gating.SoftGatedMLP(originals[l], fits[l], m.config.hidden_size),
                               blocks(m)[l]) for l in originals}
    for l, g in gated.items():
        blocks(m)[l].mlp = g
        g.net.requires_grad_(True)
    params = [p for g in gated.values() for p in g.net.parameters()]
    opt = torch.optim.Adam(params, lr=S["gate_lr"])
    for step in range(S["phase2_steps"]):
        m.train()
        batch = training.random_windows(data["train"], S["pair_batch"], data["context"], gen)
        loss = m(input_ids=batch, labels=batch).loss
        if step >= S["phase2_steps"] // 10:
            loss = loss + S["sparsity"] * torch.stack([g.last_gate.mean()
                                                       for g in gated.values()]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        tick()
    return gated


@torch.no_grad()
def gate_values(m, gated: dict, windows) -> dict:
    """Every soft gate's value on every validation token."""
    use_mlp = {l: [] for l in gated}
    hooks = [g.register_forward_hook(lambda mod, a, o, l=l: use_mlp[l].append(
        mod.last_gate.flatten().cpu())) for l, g in gated.items()]
    m.eval()
    eval_nll(m, windows)
    for h in hooks:
        h.remove()
    return {l: torch.cat(v) for l, v in use_mlp.items()}
