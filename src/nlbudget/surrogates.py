"""P3 §3.1: closed-form ridge surrogates of MLP layers, and what linearizing them costs.

`fit_ridge` implements the paper's estimator: centre X and Y, SVD X_c = U S Vᵀ,
W = V diag(s / (s² + λ)) Uᵀ Y_c with λ = 0.01, b = ȳ − x̄ W (float64; computed through the
eigendecomposition of X_cᵀX_c, which gives the same W).
`linearization_sweep` measures, for every layer, the per-token loss with that layer's MLP
replaced, reusing the unchanged prefix: the residual stream before layer l is computed once
and shared by the runs that swap layers l, l+1, …. The studies that use them are chapter 03's
(each layer alone, progressive linearization) and chapter 04's (two-phase).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
from torch import nn

from nlbudget import capture, timing
from nlbudget.assets import devices, memo
from nlbudget.capture import MLPCapture, blocks, layout
from nlbudget.evaluation import batches, eval_nll, hidden_nll, perplexity

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



@dataclass
class Sweep:
    """Per-token losses: `baseline` (N, T−1) and `linear[variant][layer]` (N, T−1)."""

    baseline: torch.Tensor
    linear: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)

    def cost(self, variant: str, layer: int) -> float:
        """Relative perplexity change when `layer` is linear: PPL_lin / PPL_full − 1."""
        return perplexity(self.linear[variant][layer]) / perplexity(self.baseline) - 1



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
    for sl, ids in batches(windows, batch_size):
        ids = ids.to(dev)
        h, kw = lay.embed(model, ids)
        for l, block in enumerate(bl):
            for v, mods in variants.items():
                if l not in mods:
                    continue
                with replaced(model, {l: mods[l]}):
                    g = block(h, **lay.kwargs(kw, l))
                for j in range(l + 1, len(bl)):
                    g = bl[j](g, **lay.kwargs(kw, j))
                out[v][l][sl] = hidden_nll(model, lay, g, ids)
            h = block(h, **lay.kwargs(kw, l))
        base[sl] = hidden_nll(model, lay, h, ids)
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
    cap = capture.record(model, windows, batch_size, layers=layers)
    n, T = windows.shape
    for sf in todo:
        fits, r2 = {}, {}
        for l in cap.layers:
            X, Y = cap[f"blocks.{l}.mlp.in"], cap[f"blocks.{l}.mlp.out"]
            if sf:  # rows are window-major: drop each window's position 0
                X, Y = (Z.view(n, T, -1)[:, 1:].reshape(-1, Z.shape[-1]) for Z in (X, Y))
            fits[l] = fit_ridge(X, Y, dtype=dtype)
            r2[l] = r_squared(fits[l], X, Y)
        if keys[sf]:
            memo.put("fit", keys[sf], {"fits": {l: (f.W, f.b) for l, f in fits.items()},
                                       "r2": r2})
        out[sf] = (fits, r2)
    return out



def middle_layers(n_layers: int) -> list[int]:
    """The middle third of the layers (the block P3 found cheapest to linearize)."""
    return list(range(n_layers // 3, n_layers - n_layers // 3))


def centre_out(n_layers: int, k: int) -> list[int]:
    """The k layers nearest the centre, centre first (P3 §5 order: L12, L11, L13, L10, …)."""
    c = (n_layers - 1) / 2
    return sorted(range(n_layers), key=lambda l: (abs(l - c), -l))[:k]


def first_position_ratio(model, windows: torch.Tensor) -> list[float]:
    """Per layer: ‖MLP output at position 0‖ / median ‖MLP output‖ at other positions."""
    with MLPCapture(model, max_tokens=windows.numel()) as cap, torch.no_grad():
        model(input_ids=windows)
    out = []
    for l in cap.layers:
        norms = cap[f"blocks.{l}.mlp.out"].norm(dim=1).view(windows.shape)
        out.append(float(norms[:, 0].median() / norms[:, 1:].median()))
    return out




