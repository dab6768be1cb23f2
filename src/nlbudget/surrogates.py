"""P3 §3.1: closed-form ridge surrogates of MLP layers, and what linearizing them costs.

`fit_ridge` implements the paper's estimator: centre X and Y, SVD X_c = U S Vᵀ,
W = V diag(s / (s² + λ)) Uᵀ Y_c with λ = 0.01, b = ȳ − x̄ W (float64; computed through the
eigendecomposition of X_cᵀX_c, which gives the same W).
`linearization_sweep` measures, for every layer, the per-token loss with that layer's MLP
replaced, reusing the unchanged prefix: the residual stream before layer l is computed once
and shared by the runs that swap layers l, l+1, ….
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import devices, stats, timing
from .capture import blocks, layout, mlps

RIDGE_LAMBDA = 0.01


class LinearSurrogate(nn.Module):
    """f̂(x) = x W + b, a drop-in replacement for an MLP module."""

    def __init__(self, W: torch.Tensor, b: torch.Tensor):
        super().__init__()
        self.register_buffer("W", W)  # (d_in, d_out)
        self.register_buffer("b", b)  # (d_out,)

    def forward(self, x):  # (..., d_in)
        shape = x.shape
        y = torch.addmm(self.b, x.reshape(-1, shape[-1]).to(self.W.dtype), self.W)
        return y.view(*shape[:-1], -1).to(x.dtype)


def fit_ridge(X: torch.Tensor, Y: torch.Tensor, lam: float = RIDGE_LAMBDA,
              dtype: torch.dtype = torch.float32, device=None) -> LinearSurrogate:
    """Ridge regression Y ≈ X W + b on centred data, in float64 (P3 eq. for W_ℓ).

    The paper writes it with the SVD X_c = U S Vᵀ: W = V diag(s / (s² + λ)) Uᵀ Y_c. The same W
    comes from the eigendecomposition X_cᵀX_c = V diag(s²) Vᵀ, W = V diag(1 / (s² + λ)) Vᵀ X_cᵀY_c,
    in half the time for N ≫ d (tests check the two agree)."""
    X = X.to(device=device, dtype=torch.float64)
    Y = Y.to(device=device, dtype=torch.float64)
    x_mean, y_mean = X.mean(0), Y.mean(0)
    Xc = X - x_mean
    s2, V = torch.linalg.eigh(Xc.T @ Xc)
    W = V @ ((V.T @ (Xc.T @ (Y - y_mean))) / (s2.clamp_min(0) + lam)[:, None])
    b = y_mean - x_mean @ W
    return LinearSurrogate(W.to(dtype).cpu(), b.to(dtype).cpu())


def r_squared(f: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> float:
    """1 − SS_res / SS_tot, pooled over output dimensions."""
    with torch.no_grad():
        pred = f(X.to(torch.float64) if isinstance(f, LinearSurrogate) else X).double()
    Y = Y.double()
    return float(1 - ((Y - pred) ** 2).sum() / ((Y - Y.mean(0)) ** 2).sum())


class KeepFirst(nn.Module):
    """Surrogate everywhere except the first `k` positions, where the full MLP runs
    (the attention-sink token carries activations far outside the fit's range)."""

    def __init__(self, mlp: nn.Module, surrogate: nn.Module, k: int = 1):
        super().__init__()
        self.mlp, self.surrogate, self.k = mlp, surrogate, k

    def forward(self, x):  # (B, T, d)
        out = self.surrogate(x)
        return torch.cat([self.mlp(x[:, : self.k]), out[:, self.k:]], dim=1)


@contextlib.contextmanager
def replaced(model, replacements: dict[int, nn.Module]):
    """Swap the MLPs of the given layers for other modules; restore them on exit."""
    bl = blocks(model)
    originals = {l: bl[l].mlp for l in replacements}
    try:
        for l, m in replacements.items():
            bl[l].mlp = devices.follow(m, bl[l])
        yield model
    finally:
        for l, m in originals.items():
            bl[l].mlp = m


LOSS_ROWS = 64  # rows per chunk: the float32 logits of a chunk stay in the CPU cache


def token_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Per-token cross-entropy of next-token prediction, in float32: (B, T−1).
    Computed in chunks of rows (the same numbers, about twice as fast on a CPU)."""
    lg = logits[:, :-1].reshape(-1, logits.shape[-1])
    y = ids[:, 1:].reshape(-1)
    out = torch.empty(y.shape[0])
    for i in range(0, y.shape[0], LOSS_ROWS):
        out[i:i + LOSS_ROWS] = F.cross_entropy(lg[i:i + LOSS_ROWS].float(), y[i:i + LOSS_ROWS],
                                               reduction="none")
    return out.view(ids.shape[0], -1)


def _hidden_nll(model, lay, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """token_nll(head(h)) with the LM head applied chunk by chunk, never materialising all
    (B, T, vocab) logits (the head acts on each position separately)."""
    rows = h[:, :-1].reshape(-1, h.shape[-1])
    y = ids[:, 1:].reshape(-1)
    out = torch.empty(y.shape[0])
    for i in range(0, y.shape[0], LOSS_ROWS):
        logits = lay.head(model, rows[None, i:i + LOSS_ROWS])[0]
        out[i:i + LOSS_ROWS] = F.cross_entropy(logits.float(), y[i:i + LOSS_ROWS],
                                               reduction="none")
    return out.view(ids.shape[0], -1)


def perplexity(nll: torch.Tensor) -> float:
    """exp of the token-weighted mean cross-entropy."""
    return math.exp(float(nll.double().mean()))


@dataclass
class Sweep:
    """Per-token losses: `baseline` (N, T−1) and `linear[variant][layer]` (N, T−1)."""

    baseline: torch.Tensor
    linear: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)

    def cost(self, variant: str, layer: int) -> float:
        """Relative perplexity change when `layer` is linear: PPL_lin / PPL_full − 1."""
        return perplexity(self.linear[variant][layer]) / perplexity(self.baseline) - 1


def _batches(windows: torch.Tensor, batch_size: int):
    for i in range(0, windows.shape[0], batch_size):
        yield slice(i, i + batch_size), windows[i:i + batch_size]


#: Replacement modules that are pure functions of their weights: their sweeps can be shared.
def _memoizable(m: nn.Module) -> bool:
    return isinstance(m, (LinearSurrogate, KeepFirst, Ablated))


@torch.no_grad()
def linearization_sweep(model, windows: torch.Tensor, variants: dict[str, dict[int, nn.Module]],
                        batch_size: int = 8, progress=None) -> Sweep:
    """For every variant and layer l in it, the per-token loss with MLP l replaced.

    The prefix is shared: per batch, the unchanged residual stream h_l entering block l is
    computed once; each swapped run starts from it. Cost ≈ L²/2 + L blocks per batch instead
    of L² for separate full passes (plus one LM head per run in both cases).

    Losses of deterministic replacements (ridge surrogates, KeepFirst, ablation) are shared
    through `memo`: a (model, windows, layer, module) measured before — by this chapter or
    another — is read back, not recomputed.
    """
    from . import memo

    N, T = windows.shape
    keys, got = {}, {}
    if memo.enabled():
        mk = memo.model_key(model)
        keys["base"] = memo.key("sweep-base", mk, windows, batch_size)
        for v, mods in variants.items():
            for l, m in mods.items():
                if _memoizable(m):
                    keys[(v, l)] = memo.key("sweep", mk, windows, batch_size, l, m)
        got = {k: t for k, kk in keys.items() if (t := memo.get("sweep", kk)) is not None}
    todo = {v: {l: m for l, m in mods.items() if (v, l) not in got}
            for v, mods in variants.items()}
    todo = {v: mods for v, mods in todo.items() if mods}
    if todo or "base" not in got:
        sw = _sweep(model, windows, todo, batch_size, progress)
        for k, kk in keys.items():
            t = sw.baseline if k == "base" else sw.linear.get(k[0], {}).get(k[1])
            if t is not None and k not in got:
                memo.put("sweep", kk, t)
        base, computed = sw.baseline, sw.linear
    else:
        base, computed = got["base"], {}
        if progress is not None:
            progress.update(N)
    out = {v: {l: got[(v, l)] if (v, l) in got else computed[v][l] for l in mods}
           for v, mods in variants.items()}
    return Sweep(base, out)


def _sweep(model, windows, variants, batch_size, progress) -> Sweep:
    lay, bl = layout(model), blocks(model)
    N, T = windows.shape
    base = torch.empty(N, T - 1)
    out = {v: {l: torch.empty(N, T - 1) for l in mods} for v, mods in variants.items()}
    dev = devices.device_of(model)  # blocks are called directly: no `devices.attach` wrapper
    for sl, ids in _batches(windows, batch_size):
        ids = ids.to(dev)
        h, kw = lay.embed(model, ids)
        for l, block in enumerate(bl):
            for v, mods in variants.items():
                if l not in mods:
                    continue
                with replaced(model, {l: mods[l]}):
                    g = block(h, **kw)
                for later in bl[l + 1:]:
                    g = later(g, **kw)
                out[v][l][sl] = _hidden_nll(model, lay, g, ids)
            h = block(h, **kw)
        base[sl] = _hidden_nll(model, lay, h, ids)
        if progress is not None:
            progress.update(ids.shape[0])
    return Sweep(base, out)


@torch.no_grad()
def naive_sweep(model, windows: torch.Tensor, variants: dict[str, dict[int, nn.Module]],
                batch_size: int = 8) -> Sweep:
    """The reference: one full forward pass of the unmodified code per swapped layer."""
    out = {}
    for v, mods in variants.items():
        out[v] = {}
        for l, m in mods.items():
            with replaced(model, {l: m}):
                out[v][l] = eval_nll(model, windows, batch_size)
    return Sweep(eval_nll(model, windows, batch_size), out)


@torch.no_grad()
def eval_nll(model, windows: torch.Tensor, batch_size: int = 8) -> torch.Tensor:
    """Per-token loss of the model as it is: (N, T−1)."""
    return torch.cat([token_nll(model(input_ids=ids).logits, ids)
                      for _, ids in _batches(windows, batch_size)])


def bootstrap_cost(base: torch.Tensor, lin: torch.Tensor, n_boot: int = 1000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the relative PPL change, resampling eval windows (rows)."""
    return stats.bootstrap_ppl_ratio(base.double().numpy(), lin.double().numpy(), n_boot,
                                     seed, level)


class Ablated(nn.Module):
    """An MLP that outputs zeros: the layer's MLP removed."""

    def forward(self, x):
        return torch.zeros_like(x)


@timing.timed("surrogates.fit_layers")
def fit_layers(model, windows: torch.Tensor, layers=None, batch_size: int = 8,
               skip_first: bool = False, dtype: torch.dtype = torch.float32):
    """Capture every chosen MLP's input/output over `windows` in one sweep and fit a ridge
    surrogate per layer. With `skip_first`, position 0 is left out of the fit.
    Returns ({layer: LinearSurrogate}, {layer: R² on the fit data})."""
    return fit_layers_both(model, windows, layers, batch_size, dtype, (skip_first,))[skip_first]


@timing.timed("surrogates.fit_layers_both")
def fit_layers_both(model, windows: torch.Tensor, layers=None, batch_size: int = 8,
                    dtype: torch.dtype = torch.float32, variants=(False, True)) -> dict:
    """`fit_layers` for each `skip_first` in `variants` from one capture of the MLPs over
    `windows`: the fit without position 0 takes the same rows less each window's first.
    Returns {skip_first: (fits, r2)}; each variant is memoized as `fit_layers` memoizes it."""
    from . import memo
    from .capture import MLPCapture

    out, keys = {}, {}
    mk = memo.model_key(model) if memo.enabled() else None
    for sf in variants:
        keys[sf] = (memo.key("fit", mk, windows, layers, batch_size, sf, dtype, RIDGE_LAMBDA)
                    if mk else None)
        hit = memo.get("fit", keys[sf]) if keys[sf] else None
        if hit is None and mk and layers is not None:  # a fit of every layer holds these
            every = memo.get("fit", memo.key("fit", mk, windows, None, batch_size, sf, dtype,
                                             RIDGE_LAMBDA))
            if every is not None and all(l in every["fits"] for l in layers):
                hit = {"fits": {l: every["fits"][l] for l in layers},
                       "r2": {l: every["r2"][l] for l in layers}}
        if hit is not None:
            out[sf] = ({l: LinearSurrogate(W, b) for l, (W, b) in hit["fits"].items()},
                       hit["r2"])
    todo = [sf for sf in variants if sf not in out]
    if not todo:
        return out
    with MLPCapture(model, layers=layers, max_tokens=windows.numel()) as cap, torch.no_grad():
        for _, ids in _batches(windows, batch_size):
            model(input_ids=ids)
    n, T = windows.shape
    for sf in todo:
        fits, r2 = {}, {}
        for l in cap.layers:
            X, Y = cap[f"layers.{l}.mlp.in"], cap[f"layers.{l}.mlp.out"]
            if sf:  # rows are window-major: drop each window's position 0
                X, Y = (Z.view(n, T, -1)[:, 1:].reshape(-1, Z.shape[-1]) for Z in (X, Y))
            fits[l] = fit_ridge(X, Y, dtype=dtype)
            r2[l] = r_squared(fits[l], X, Y)
        if keys[sf]:
            memo.put("fit", keys[sf], {"fits": {l: (f.W, f.b) for l, f in fits.items()},
                                       "r2": r2})
        out[sf] = (fits, r2)
    return out


@timing.timed("surrogates.progressive_linearization")
def progressive_linearization(model, order: list[int], fit_windows: torch.Tensor,
                              train_stream: torch.Tensor, val_windows: torch.Tensor,
                              steps_per_stage: int, final_steps: int, lr: float,
                              batch_size: int, context: int, seed: int,
                              linearize: bool = True, progress=None) -> list[dict]:
    """P3 §5 on a copy of `model`: for each layer of `order` (centre outwards) fit a ridge
    surrogate on the current model, freeze it in place of the MLP, then fine-tune every
    other parameter for `steps_per_stage` steps; finish with `final_steps`. With
    `linearize=False` the same schedule runs without linearizing (the equal-compute
    control). Returns the validation perplexity after each stage."""
    import copy

    from .training import lm_step, random_windows

    m = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=lr,
                            betas=(0.9, 0.95), weight_decay=0.0)
    def val_ppl():
        m.eval()
        return perplexity(eval_nll(m, val_windows))
    records = [{"stage": "start", "linear_layers": [], "steps": 0, "val_ppl": val_ppl()}]
    linear, steps = [], 0
    stages = [(l, steps_per_stage) for l in order] + [(None, final_steps)]
    for layer, n_steps in stages:
        if layer is not None and linearize:
            m.eval()
            fits, _ = fit_layers(m, fit_windows, layers=[layer])
            blocks(m)[layer].mlp = devices.follow(fits[layer], blocks(m)[layer])  # buffers only: frozen, no gradients
            linear.append(layer)
        for _ in range(n_steps):
            lm_step(m, random_windows(train_stream, batch_size, context, gen), opt)
            if progress is not None:
                progress.update(1)
        steps += n_steps
        records.append({"stage": "final" if layer is None else f"L{layer}",
                        "linear_layers": list(linear), "steps": steps, "val_ppl": val_ppl()})
    return records


def middle_layers(n_layers: int) -> list[int]:
    """The middle third of the layers (the block P3 found cheapest to linearize)."""
    return list(range(n_layers // 3, n_layers - n_layers // 3))


def centre_out(n_layers: int, k: int) -> list[int]:
    """The k layers nearest the centre, centre first (P3 §5 order: L12, L11, L13, L10, …)."""
    c = (n_layers - 1) / 2
    return sorted(range(n_layers), key=lambda l: (abs(l - c), -l))[:k]


def first_position_ratio(model, windows: torch.Tensor) -> list[float]:
    """Per layer: ‖MLP output at position 0‖ / median ‖MLP output‖ at other positions."""
    from .capture import MLPCapture

    with MLPCapture(model, max_tokens=windows.numel()) as cap, torch.no_grad():
        model(input_ids=windows)
    out = []
    for l in cap.layers:
        norms = cap[f"layers.{l}.mlp.out"].norm(dim=1).view(windows.shape)
        out.append(float(norms[:, 0].median() / norms[:, 1:].median()))
    return out


@timing.timed("surrogates.linearization_report")
def linearization_report(model, fit_windows: torch.Tensor, eval_windows: torch.Tensor,
                         batch_size: int, n_boot: int, seed: int, progress=None) -> dict:
    """Everything Part II.a measures on one model: R² of each layer's ridge fit, the cost
    of linearizing each layer alone (with a bootstrap interval over eval windows, and one
    corrected for the number of layers, `ci_family`) and the
    middle third at once, for two variants — `plain` (fit and replace at every position, the
    paper's method) and `keep-first` (fit without position 0 and keep the full MLP there)."""
    dtype = next(model.parameters()).dtype
    mlp = mlps(model)
    both = fit_layers_both(model, fit_windows, batch_size=batch_size, dtype=dtype)
    (plain, r2_plain), (kept, r2_kept) = both[False], both[True]
    variants = {"plain": plain,
                "keep-first": {l: KeepFirst(mlp[l], f) for l, f in kept.items()}}
    sweep = linearization_sweep(model, eval_windows, variants, batch_size, progress)
    L = len(mlp)
    report = {"n_layers": L, "baseline_ppl": perplexity(sweep.baseline),
              "eval_tokens": int(sweep.baseline.numel()),
              "fit_tokens": int(fit_windows.numel()),
              "first_position_ratio": first_position_ratio(model, fit_windows[:batch_size]),
              "r2": {"plain": [r2_plain[l] for l in range(L)],
                     "keep-first": [r2_kept[l] for l in range(L)]},
              "cost": {}, "ci": {}, "ci_family": {}, "middle": {"layers": middle_layers(L)},
              "family_level": 1 - 0.05 / L}
    for v in variants:
        report["cost"][v] = [sweep.cost(v, l) for l in range(L)]
        report["ci"][v] = [bootstrap_cost(sweep.baseline, sweep.linear[v][l], n_boot, seed)
                           for l in range(L)]
        # Bonferroni: the L intervals hold together at 95 % ("does any layer improve?")
        report["ci_family"][v] = [bootstrap_cost(sweep.baseline, sweep.linear[v][l], n_boot,
                                                 seed, report["family_level"])
                                  for l in range(L)]
        with replaced(model, {l: variants[v][l] for l in report["middle"]["layers"]}):
            nll = eval_nll(model, eval_windows, batch_size)
        report["middle"][v] = {"cost": perplexity(nll) / perplexity(sweep.baseline) - 1,
                               "ci": bootstrap_cost(sweep.baseline, nll, n_boot, seed)}
    return report


@timing.timed("surrogates.ablation_cost")
def ablation_cost(model, windows: torch.Tensor, batch_size: int = 8) -> dict:
    """Validation perplexity with every MLP intact and with every MLP zeroed."""
    base = perplexity(eval_nll(model, windows, batch_size))
    with replaced(model, {l: Ablated() for l in range(len(blocks(model)))}):
        ablated = perplexity(eval_nll(model, windows, batch_size))
    return {"ppl": base, "ppl_mlps_ablated": ablated, "cost": ablated / base - 1}


class SoftGatedMLP(nn.Module):
    """P3 §5, phase 2: g·MLP(x) + (1 − g)·(xW + b) with g = σ(net(x)), a per-layer gate
    (d → 32 → 1, initialised near 0, i.e. near linear). The MLP and surrogate are frozen;
    with `hard`, each token takes one path (MLP where g > ½), for evaluation."""

    def __init__(self, mlp: nn.Module, surrogate: nn.Module, d: int, hidden: int = 32):
        super().__init__()
        self.mlp, self.surrogate = mlp.requires_grad_(False), surrogate
        self.net = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        nn.init.zeros_(self.net[2].weight)
        nn.init.constant_(self.net[2].bias, -3.0)
        self.hard = False
        self.last_gate = None

    def forward(self, x):
        g = torch.sigmoid(self.net(x))
        self.last_gate = g
        if self.hard:
            g = (g > 0.5).to(x.dtype)
        return g * self.mlp(x) + (1 - g) * self.surrogate(x)


@timing.timed("surrogates.two_phase_linearization")
def two_phase_linearization(model, layers: list[int], fit_windows: torch.Tensor,
                            train_stream: torch.Tensor, val_windows: torch.Tensor,
                            phase1_steps: int, phase2_steps: int, lr: float, gate_lr: float,
                            sparsity: float, batch_size: int, context: int, seed: int,
                            progress=None) -> dict:
    """P3 §5.3 on a copy of `model`. Phase 1: replace the MLPs of `layers` by frozen ridge
    surrogates and fine-tune everything else. Phase 2: freeze all of it, put the original
    MLPs back behind soft gates (`SoftGatedMLP`) and train only the gates, on LM loss plus
    `sparsity` × mean gate (after a 10 % warm-up). The control fine-tunes the unmodified
    model for phase1 + phase2 steps. Returns validation perplexities and gate statistics."""
    import copy

    from .training import lm_step, random_windows

    def val_ppl(m):
        m.eval()
        return perplexity(eval_nll(m, val_windows))

    def tick():
        if progress is not None:
            progress.update(1)

    start = val_ppl(model)
    m = copy.deepcopy(model)
    originals = {l: copy.deepcopy(blocks(model)[l].mlp) for l in layers}
    fits, _ = fit_layers(m, fit_windows, layers=layers)
    for l in layers:
        blocks(m)[l].mlp = devices.follow(fits[l], blocks(m)[l])
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=lr,
                            betas=(0.9, 0.95), weight_decay=0.0)
    for _ in range(phase1_steps):
        lm_step(m, random_windows(train_stream, batch_size, context, gen), opt)
        tick()
    after1 = val_ppl(m)

    m.requires_grad_(False)
    d = m.config.hidden_size
    gated = {l: devices.follow(SoftGatedMLP(originals[l], fits[l], d), blocks(m)[l])
             for l in layers}
    for l in layers:
        blocks(m)[l].mlp = gated[l]
        gated[l].net.requires_grad_(True)
    params = [p for g in gated.values() for p in g.net.parameters()]
    opt = torch.optim.Adam(params, lr=gate_lr)
    warm = phase2_steps // 10
    for step in range(phase2_steps):
        m.train()
        batch = random_windows(train_stream, batch_size, context, gen)
        loss = m(input_ids=batch, labels=batch).loss
        if step >= warm:
            loss = loss + sparsity * torch.stack([g.last_gate.mean() for g in gated.values()]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        tick()
    soft = val_ppl(m)
    with torch.no_grad():  # gate statistics over all validation tokens
        use_mlp = {l: [] for l in layers}
        hooks = [g.register_forward_hook(lambda mod, a, o, l=l: use_mlp[l].append(
            mod.last_gate.flatten().cpu())) for l, g in gated.items()]
        m.eval()
        eval_nll(m, val_windows)
        for h in hooks:
            h.remove()
    gate_vals = {l: torch.cat(v) for l, v in use_mlp.items()}
    for g in gated.values():
        g.hard = True
    hard = val_ppl(m)

    control = copy.deepcopy(model)
    opt = torch.optim.AdamW(control.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(phase1_steps + phase2_steps):
        lm_step(control, random_windows(train_stream, batch_size, context, gen), opt)
        tick()
    return {"layers": list(layers), "start_ppl": start, "phase1_ppl": after1,
            "phase2_soft_ppl": soft, "phase2_hard_ppl": hard, "control_ppl": val_ppl(control),
            "mean_gate": {l: float(v.mean()) for l, v in gate_vals.items()},
            "share_linear_hard": {l: float((v <= 0.5).double().mean())
                                  for l, v in gate_vals.items()},
            "steps": {"phase1": phase1_steps, "phase2": phase2_steps,
                      "control": phase1_steps + phase2_steps}}
