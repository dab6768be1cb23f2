"""P3 §3.2–3.4: adaptive gates that route single tokens to a layer's linear surrogate.

A gate g(x) ∈ [0, 1] reads the MLP input x and says "linear OK"; at evaluation a token is
routed to the surrogate when g(x) > threshold (P3 eq. 2, threshold 0.5). Labels come from
δ = L_lin − L_full, the per-token loss change when the layer is linear (`delta_labels`).
`HybridMLP` really skips the MLP for routed tokens (gather/scatter), so its wall-clock can
be compared with the FLOPs it should save (`flops_per_token`); `RandomRouting` is the control
(as many tokens, chosen at random); `SoftGatedMLP` is the learned soft gate of P3 §5.3; no-fly
lists (`token_means`, `nofly_list`, `transfer`) are P3 §4.3. The study that uses them is
chapter 04's (`nlbudget.chapters.ch04_adaptive_gating`); the AUC with its interval is
`verdicts.stats.bootstrap_auc`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from nlbudget.capture import blocks
from nlbudget.verdicts import stats

#: Gate kinds. linear: P3's d+1 logistic gate (required: routing and compound gating use
#: it); pca-k: the author's "b = 1, 3, 6" gates (PCA to k = 2b dimensions, then logistic);
#: mlp-16: a small MLP gate.
GATE_KINDS = ("linear", "pca-2", "pca-6", "pca-12", "mlp-16")


def delta_labels(delta: torch.Tensor) -> tuple[torch.Tensor, float, str]:
    """P3's labels: "linear OK" (True) where δ ≤ median(δ); if fewer than 5 % of tokens have
    δ < 0, the threshold drops to the 25th percentile. Returns (labels, threshold, rule)."""
    d = delta.double().flatten()
    if float((d < 0).double().mean()) < 0.05:
        thr, rule = float(torch.quantile(d, 0.25)), "q25"
    else:
        thr, rule = float(torch.quantile(d, 0.5)), "median"
    return d <= thr, thr, rule


def split_token_context(resid: torch.Tensor, embed: torch.Tensor):
    """P3 §3.3, for pre-norm models: the residual stream h_i that the pre-MLP norm reads is
    split into the token's own embedding e_i and the context c_i = h_i − e_i (everything
    attention and earlier blocks added). Float64, so e + c reproduces h exactly."""
    h, e = resid.double(), embed.double()
    return e, h - e


def delta_summary(delta: torch.Tensor) -> dict:
    """The shape of δ's distribution: quantiles, share near zero, share negative."""
    d = delta.double().flatten()
    qs = [0.01, 0.05, 0.10, 0.25, 0.5, 0.75, 0.90, 0.95, 0.99]
    return {"quantiles": dict(zip([str(q) for q in qs],
                                  torch.quantile(d, torch.tensor(qs, dtype=d.dtype)).tolist())),
            "mean": float(d.mean()), "share_abs_below_0.05": float((d.abs() < 0.05).double().mean()),
            "share_negative": float((d < 0).double().mean()),
            "share_of_total_from_top_10pct": float(
                d.clamp(min=0).sort(descending=True).values[: max(1, len(d) // 10)].sum()
                / d.clamp(min=0).sum().clamp(min=1e-12))}


class Gate(nn.Module):
    """g(x) = sigmoid(net((x − μ) / s)): standardised inputs, then a logit network."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, net: nn.Module, kind: str,
                 n_params: int):
        super().__init__()
        self.register_buffer("mean", mean.float())
        self.register_buffer("std", std.float())
        self.net, self.kind, self.n_params = net, kind, n_params

    def logit(self, x: torch.Tensor) -> torch.Tensor:  # (..., d) -> (...)
        z = (x.float() - self.mean) / self.std
        return self.net(z).squeeze(-1)

    def forward(self, x):
        return torch.sigmoid(self.logit(x))


def _fit_logistic(Z: torch.Tensor, y: torch.Tensor, C: float, max_iter: int) -> nn.Linear:
    """L2-regularised logistic regression by L-BFGS: the objective and stopping rule of the
    paper's solver (scikit-learn's `LogisticRegression(C=1.0, solver="lbfgs")`):
    C · Σ log-loss + ½‖w‖², bias unpenalised, stopped when the largest gradient entry of
    the objective divided by C·n falls below 1e-4. Written in torch (torch's L-BFGS, strong
    Wolfe line search): mixing scipy's BLAS threads with torch's on two cores is slow."""
    Zd, yd = Z.double(), y.double()
    n, k = Zd.shape
    # identical rows (a token-only gate sees one embedding per token type) are merged, with
    # their counts of positives and negatives: the same objective, fewer rows
    Zu, inv = torch.unique(Zd, dim=0, return_inverse=True)
    npos = torch.zeros(len(Zu), dtype=torch.float64).index_add_(0, inv, yd)
    ntot = torch.bincount(inv, minlength=len(Zu)).double()
    w = torch.zeros(k, dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1, max_iter=max_iter, max_eval=2 * max_iter,
                            tolerance_grad=1e-4, tolerance_change=1e-12, history_size=10,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        z = Zu @ w + b
        # Σ log(1 + e^z) − y z over rows; divided by C n (same minimiser, scale-free tol)
        loss = (C * (ntot * nn.functional.softplus(z) - npos * z).sum()
                + 0.5 * w @ w) / (C * n)
        loss.backward()
        return loss

    opt.step(closure)
    lin = nn.Linear(k, 1)
    with torch.no_grad():
        lin.weight.copy_(w.detach()[None].float())
        lin.bias.copy_(b.detach()[None].float())
    return lin


def fit_gate(kind: str, X: torch.Tensor, labels: torch.Tensor, seed: int = 0,
             C: float = 1.0, max_iter: int = 2000, mlp_steps: int = 300) -> Gate:
    """Train a gate of `kind` (see GATE_KINDS) on inputs X (n, d) and boolean labels."""
    if kind not in GATE_KINDS:
        raise ValueError(f"unknown gate kind {kind!r}; valid: {', '.join(GATE_KINDS)}")
    X = X.double()
    y = labels.double().flatten()
    mean, std = X.mean(0), X.std(0)
    std = torch.where(std > 0, std, torch.ones_like(std))
    Z = (X - mean) / std
    d = X.shape[1]
    if kind == "linear":
        net = _fit_logistic(Z, y, C, max_iter)
        n_params = d + 1
    elif kind.startswith("pca-"):
        k = min(int(kind.split("-")[1]), d)
        _, _, Vh = torch.linalg.svd(Z - Z.mean(0), full_matrices=False)
        proj = nn.Linear(d, k, bias=False)
        with torch.no_grad():
            proj.weight.copy_(Vh[:k].float())
        proj.requires_grad_(False)
        net = nn.Sequential(proj, _fit_logistic(Z @ Vh[:k].T, y, C, max_iter))
        n_params = d * k + k + 1
    else:  # mlp-h: d -> h -> 1, ReLU; full-batch Adam on the cross-entropy
        h = int(kind.split("-")[1])
        gen = torch.Generator().manual_seed(seed)
        net = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, 1))
        with torch.no_grad():
            for p in net.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
        opt = torch.optim.Adam(net.parameters(), lr=3e-3, weight_decay=1e-4)
        Zf, yf = Z.float(), y.float()
        for _ in range(mlp_steps):
            opt.zero_grad()
            loss = nn.functional.binary_cross_entropy_with_logits(net(Zf).squeeze(-1), yf)
            loss.backward()
            opt.step()
        n_params = d * h + h + h + 1
    net.requires_grad_(False)
    return Gate(mean, std, net, kind, n_params).eval()


def threshold_for_fraction(scores: torch.Tensor, fraction: float) -> float:
    """The threshold t with `fraction` of `scores` above it (route linear where g > t)."""
    return float(torch.quantile(scores.double().flatten(), 1 - fraction))


class HybridMLP(nn.Module):
    """P3 eq. 2 with real savings: tokens with g(x) > threshold go to the surrogate only,
    the rest to the MLP only (gather, two calls, scatter). The first `keep_first` positions
    always take the MLP (the attention sink, see Part II.a). Counts routed tokens.

    A linear gate is folded into one dot product, logit = x·(w/s) + (b − w·μ/s), computed in
    the activations' dtype and compared with logit(threshold): the same decision as
    g(x) > threshold up to the rounding of that dtype, at a tenth of the cost."""

    def __init__(self, mlp: nn.Module, surrogate: nn.Module, gate: Gate,
                 threshold: float = 0.5, keep_first: int = 1):
        super().__init__()
        self.mlp, self.surrogate, self.gate = mlp, surrogate, gate
        self.threshold, self.keep_first = threshold, keep_first
        self.routed, self.seen = 0, 0
        self._folded = None
        if isinstance(gate.net, nn.Linear):
            w = gate.net.weight.detach()[0].double() / gate.std.double()
            b = gate.net.bias.detach()[0].double() - w @ gate.mean.double()
            self._folded = (w, float(b))
        self._logit_threshold = (math.inf if threshold >= 1 else -math.inf if threshold <= 0
                                 else math.log(threshold / (1 - threshold)))
        self._w_cache = {}

    def route(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T) bool
        if self._folded is None:
            r = self.gate(x) > self.threshold
        else:
            w = self._w_cache.get((x.dtype, x.device))
            if w is None:
                w = self._w_cache[x.dtype, x.device] = self._folded[0].to(x.device, x.dtype)
            r = (x @ w).float() + self._folded[1] > self._logit_threshold
        r[:, : self.keep_first] = False
        return r

    def forward(self, x):
        B, T, d = x.shape
        flat = x.reshape(B * T, d)
        r = self.route(x).reshape(-1)
        self.routed += int(r.sum())
        self.seen += r.numel()
        lin = r.nonzero().squeeze(1)
        full = (~r).nonzero().squeeze(1)
        out = torch.empty_like(flat)
        if full.numel():
            out.index_copy_(0, full, self.mlp(flat[full]))
        if lin.numel():
            out.index_copy_(0, lin, self.surrogate(flat[lin]).to(out.dtype))
        return out.view(B, T, d)

    @property
    def fraction(self) -> float:
        return self.routed / max(1, self.seen)

    def reset(self):
        self.routed, self.seen = 0, 0


class RandomRouting(HybridMLP):
    """The control for a gate: route a random `fraction` of tokens (each independently, from a
    seeded generator) to the surrogate — as many as the gate routes, chosen blindly."""

    def __init__(self, mlp: nn.Module, surrogate: nn.Module, fraction: float, seed: int = 0,
                 keep_first: int = 1):
        nn.Module.__init__(self)
        self.mlp, self.surrogate, self.keep_first = mlp, surrogate, keep_first
        self.target, self.seed = float(fraction), seed
        self.gen = torch.Generator().manual_seed(seed)
        self.routed, self.seen = 0, 0

    def route(self, x: torch.Tensor) -> torch.Tensor:
        # drawn on the CPU (the same draws on every device), then moved to the activations
        r = (torch.rand(x.shape[:2], generator=self.gen) < self.target).to(x.device)
        r[:, : self.keep_first] = False
        return r

    def reset(self):
        super().reset()
        self.gen = torch.Generator().manual_seed(self.seed)



# --- a learned soft gate (P3 §5.3, phase 2) ------------------------------------------------

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


# --- "no-fly" token lists (P3 §4.3) ------------------------------------------------------

def token_means(token_ids, delta, min_obs: int = 10) -> dict[int, tuple[float, float, int]]:
    """Per token id seen ≥ min_obs times: (mean δ, fraction of δ > 0, count)."""
    t = np.asarray(token_ids).ravel()
    d = np.asarray(delta, dtype=np.float64).ravel()
    ids, inv, cnt = np.unique(t, return_inverse=True, return_counts=True)
    mean = np.bincount(inv, weights=d) / cnt
    pos = np.bincount(inv, weights=(d > 0).astype(float)) / cnt
    return {int(i): (float(m), float(p), int(c))
            for i, m, p, c in zip(ids, mean, pos, cnt) if c >= min_obs}


def nofly_list(means: dict, min_mean: float = 0.05, min_frac_pos: float = 0.6) -> list[int]:
    """P3's "No-Fly" tokens (the author's code): mean δ > 0.05 and δ > 0 in > 60 % of
    ≥ 10 occurrences — tokens that seem to need the MLP consistently."""
    return sorted(t for t, (m, p, _) in means.items() if m > min_mean and p > min_frac_pos)


def transfer(build: dict, test: dict, nofly: list[int]) -> dict:
    """How a no-fly list built on one corpus fares on another: how many of its tokens are
    found (≥ min_obs there), how many stay no-fly, how many flip (mean δ < 0), Pearson r of
    mean δ over the list's found tokens (the paper's statistic) and over every token common
    to both corpora (the fairer test: the list alone is range-restricted)."""
    found = [t for t in nofly if t in test]
    still = nofly_list({t: test[t] for t in found})
    common = sorted(set(build) & set(test))

    def r(tokens):  # (r, lo, hi) with a Fisher-z interval; None where undefined
        a = np.array([build[t][0] for t in tokens])
        b = np.array([test[t][0] for t in tokens])
        est, lo, hi = stats.correlation_interval(a, b)
        return [None if not np.isfinite(v) else v for v in (est, lo, hi)]

    rn, rc = r(found), r(common)
    return {"n_nofly": len(nofly), "found": len(found), "still_nofly": len(still),
            "flipped": sum(test[t][0] < 0 for t in found), "r_nofly": rn[0],
            "r_nofly_ci": rn[1:], "n_common": len(common), "r_common": rc[0],
            "r_common_ci": rc[1:]}


# --- what routing saves --------------------------------------------------------------------

def _matmul_params(module: nn.Module) -> int:
    """Weights of the module's linear maps (nn.Linear and GPT-2's Conv1D)."""
    n = 0
    for m in module.modules():
        if isinstance(m, nn.Linear) or type(m).__name__ == "Conv1D":
            n += m.weight.numel()
    return n


@dataclass(frozen=True)
class Flops:
    """Forward FLOPs per token (2 per multiply-add), by part, for a context of T tokens."""

    mlp: int  # one layer's MLP
    surrogate: int  # its d×d surrogate
    gate: int  # a d+1 gate
    blocks: int  # all blocks: linear maps + causal attention scores and values
    head: int  # the LM head

    @property
    def total(self) -> int:
        return self.blocks + self.head

    def removed(self, state: str, routed: float = 0.0, T: int = 1) -> float:
        """MLP FLOPs per token one layer's state removes (the one formula): `linear`
        (keep-first) runs the surrogate on every position and the MLP on the first of T;
        `gated` runs the gate everywhere and the surrogate instead of the MLP on the share
        `routed` of tokens it routes; `full` removes nothing."""
        if state == "linear":
            return self.mlp * (1 - 1 / T) - self.surrogate
        if state == "gated":
            return routed * (self.mlp - self.surrogate) - self.gate
        return 0.0

    def saved(self, fractions: list[float], with_head: bool = True) -> float:
        """Share of forward FLOPs saved when layer l routes fractions[l] of its tokens to
        the surrogate (every gated layer pays its gate on every token)."""
        per = [self.removed("gated", f) for f in fractions]
        return sum(per) / (self.total if with_head else self.blocks)


def _attended(cfg, layer: int, context: int) -> float:
    """How many positions a token attends to on average in `layer` over `context` tokens."""
    types = getattr(cfg, "layer_types", None)
    window = getattr(cfg, "sliding_window", None)
    if types and window and types[layer] == "sliding_attention" and window < context:
        w = window  # the first w tokens see 1…w positions, the rest w each
        return (w * (w + 1) / 2 + (context - w) * w) / context
    return (context + 1) / 2


def flops_per_token(model, context: int) -> Flops:
    """Count from the weight shapes; attention scores and values cost 2·2·(heads × head
    width) per earlier position, (T+1)/2 of them on average under the causal mask (in a
    sliding-window layer, at most its window: `_attended`)."""
    cfg = model.config
    d = cfg.hidden_size
    bl = blocks(model)
    width = cfg.num_attention_heads * (getattr(cfg, "head_dim", None)
                                       or d // cfg.num_attention_heads)
    mlp = 2 * _matmul_params(bl[0].mlp)
    lin = sum(2 * _matmul_params(b) for b in bl)
    attn = 4 * width * sum(_attended(cfg, l, context) for l in range(len(bl)))
    head = 2 * model.get_output_embeddings().weight.numel()
    return Flops(mlp=mlp, surrogate=2 * d * d, gate=2 * d, blocks=int(lin + attn), head=head)
