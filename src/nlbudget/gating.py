"""P3 §3.2–3.4: adaptive gates that route single tokens to a layer's linear surrogate.

A gate g(x) ∈ [0, 1] reads the MLP input x and says "linear OK"; at evaluation a token is
routed to the surrogate when g(x) > threshold (P3 eq. 2, threshold 0.5). Labels come from
δ = L_lin − L_full, the per-token loss change when the layer is linear (`delta_labels`).
`HybridMLP` really skips the MLP for routed tokens (gather/scatter), so its wall-clock can
be compared with the FLOPs it should save.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from . import devices, stats, timing

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


# --- how well a gate ranks tokens ---------------------------------------------------------

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


def auc(scores, labels) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties ½."""
    return bootstrap_auc(scores, labels, n_boot=0)[0]


def _pair_matrix(s, y, g, n_groups):
    """M[a, b] = Σ over positives i in group a and negatives j in group b of
    1[s_i > s_j] + ½·1[s_i = s_j]: the AUC numerator, split by pairs of groups."""
    M = np.zeros((n_groups, n_groups))
    pos_s, pos_g = s[y], g[y]
    for b in range(n_groups):
        neg = np.sort(s[~y & (g == b)])
        lo = np.searchsorted(neg, pos_s, "left")
        hi = np.searchsorted(neg, pos_s, "right")
        M[:, b] = np.bincount(pos_g, weights=lo + 0.5 * (hi - lo), minlength=n_groups)
    return M


def _auc_terms(scores, y, g, G):
    """The AUC numerator by pairs of groups, and positives and negatives per group."""
    M = _pair_matrix(np.asarray(scores, dtype=np.float64).ravel(), y, g, G)
    return M, np.bincount(g, weights=y.astype(float), minlength=G), \
        np.bincount(g, weights=(~y).astype(float), minlength=G)


def _resampled_groups(n_boot: int, G: int, seed: int) -> np.ndarray:
    """(n_boot, G): how often each group is drawn in each bootstrap resample."""
    rng = np.random.default_rng(seed)
    return np.stack([np.bincount(d, minlength=G)
                     for d in rng.integers(0, G, size=(n_boot, G))]).astype(float)


def bootstrap_auc(scores, labels, groups=None, n_boot: int = 1000, seed: int = 0,
                  level: float = 0.95):
    """AUC and a percentile interval, resampling `groups` (e.g. the window of each token:
    tokens of one window are not independent) with replacement; with a group drawn c times,
    each of its pairs counts c·c' times. Returns (auc, lo, hi); lo = hi = nan if n_boot = 0."""
    y = np.asarray(labels).astype(bool).ravel()
    g = (np.zeros(len(y), dtype=int) if groups is None
         else np.unique(np.asarray(groups).ravel(), return_inverse=True)[1])
    G = int(g.max()) + 1
    M, P, N = _auc_terms(scores, y, g, G)
    point = float(M.sum() / (P.sum() * N.sum()))
    if n_boot == 0:
        return point, float("nan"), float("nan")
    if groups is None:
        raise ValueError("a bootstrap interval needs groups (e.g. the window of each token)")
    c = _resampled_groups(n_boot, G, seed)
    boot = ((c @ M) * c).sum(1) / ((c @ P) * (c @ N))
    lo, hi = np.nanquantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return point, float(lo), float(hi)


def bootstrap_auc_diff(scores_a, scores_b, labels, groups, n_boot: int = 1000, seed: int = 0,
                       level: float = 0.95):
    """AUC(a) − AUC(b) of two gates scored on the same tokens, with a percentile interval from
    resampling `groups` (windows) — the same resample for both, so the interval is paired.
    Returns (diff, lo, hi)."""
    y = np.asarray(labels).astype(bool).ravel()
    g = np.unique(np.asarray(groups).ravel(), return_inverse=True)[1]
    G = int(g.max()) + 1
    Ma, P, N = _auc_terms(scores_a, y, g, G)
    Mb, _, _ = _auc_terms(scores_b, y, g, G)
    point = float((Ma.sum() - Mb.sum()) / (P.sum() * N.sum()))
    c = _resampled_groups(n_boot, G, seed)
    boot = (((c @ Ma) * c).sum(1) - ((c @ Mb) * c).sum(1)) / ((c @ P) * (c @ N))
    lo, hi = np.nanquantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return point, float(lo), float(hi)


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

    def saved(self, fractions: list[float], with_head: bool = True) -> float:
        """Share of forward FLOPs saved when layer l routes fractions[l] of its tokens to
        the surrogate (every gated layer pays its gate on every token)."""
        per = [f * (self.mlp - self.surrogate) - self.gate for f in fractions]
        return sum(per) / (self.total if with_head else self.blocks)


def flops_per_token(model, context: int) -> Flops:
    """Count from the weight shapes; attention scores and values cost 2·2·d per earlier
    position, (T+1)/2 of them on average under the causal mask."""
    from .capture import blocks

    d = model.config.hidden_size
    bl = blocks(model)
    mlp = 2 * _matmul_params(bl[0].mlp)
    lin = sum(2 * _matmul_params(b) for b in bl)
    attn = len(bl) * 4 * d * (context + 1) / 2
    head = 2 * model.get_output_embeddings().weight.numel()
    return Flops(mlp=mlp, surrogate=2 * d * d, gate=2 * d, blocks=int(lin + attn), head=head)


# --- the whole study on one model ----------------------------------------------------------

@torch.no_grad()
def activations(model, windows: torch.Tensor, batch_size: int = 8) -> dict:
    """Every layer's MLP input x and residual stream h (what the pre-MLP norm reads), and
    the token embeddings e, over `windows`: {"x": {l: (N, T, d)}, "h": {…}, "e": (N, T, d)}."""
    from .capture import MLPCapture, layout

    N, T = windows.shape
    lay = layout(model)
    with MLPCapture(model, max_tokens=N * T, resid=True) as cap:
        for i in range(0, N, batch_size):
            model(input_ids=windows[i:i + batch_size])
    dev = devices.device_of(model)  # the embedding is called directly, not through the model
    e = torch.cat([lay.embed(model, windows[i:i + batch_size].to(dev))[0].cpu()
                   for i in range(0, N, batch_size)])
    return {"x": {l: cap[f"layers.{l}.mlp.in"].view(N, T, -1) for l in cap.layers},
            "h": {l: cap[f"layers.{l}.mlp.resid"].view(N, T, -1) for l in cap.layers},
            "e": e}


def _rows(a: torch.Tensor) -> torch.Tensor:
    """Positions 1 … T−2 of (N, T, …) as rows: the tokens that have a next-token loss and
    are not the first position (which always keeps its MLP)."""
    return a[:, 1:-1].reshape(-1, *a.shape[2:])


def _deltas(sweep, variant: str) -> dict[int, torch.Tensor]:
    """δ = L_lin − L_full per token, positions 1 … T−2: {layer: (N, T−2)}."""
    return {l: (nll - sweep.baseline)[:, 1:] for l, nll in sweep.linear[variant].items()}


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


@timing.timed("gating.gating_report")
def gating_report(model, fits: dict, gate_windows: torch.Tensor, select_windows: torch.Tensor,
                  eval_windows: torch.Tensor, kinds=GATE_KINDS, curve_layers=(),
                  probe_layers=None, fractions=(0.1, 0.25, 0.75, 0.9), compound_grid=None,
                  max_cost: float = 0.01, batch_size: int = 8, n_boot: int = 1000,
                  seed: int = 0, progress=None, random_draws: int = 3) -> dict:
    """Everything Part II.b measures on one model, on three disjoint sets of windows.

    * `fits`: every layer's ridge surrogate (fit elsewhere, without position 0, which always
      keeps its MLP).
    * `gate_windows` (training): δ labels from one linearization sweep; per layer, a linear
      gate on the MLP input x; at `probe_layers` (default: all) also on the residual stream h
      the pre-MLP norm reads, the token embedding e and the context c = h − e; at `curve_layers`,
      gates of every kind in `kinds` on x (evaluated at thresholds that route as many training
      tokens as the d+1 gate at g > ½, so that costs compare at the same routed fraction).
    * `select_windows` (held out from training): the same sweep gives their δ; every gate's
      AUC against their labels, with intervals over windows; the order and choice of layers
      for compound gating.
    * `eval_windows` (final): the hard-routed (g > ½) cost of each layer's linear gate, and of
      `random_draws` random routings of as many tokens (the control); at
      `curve_layers` every kind, and the linear gate at thresholds routing `fractions` of
      the training tokens; compound gating with all layers, and with the chosen layers.
    """
    from . import surrogates as S
    from .capture import mlps

    mlp = mlps(model)
    L = len(mlp)
    probe_layers = range(L) if probe_layers is None else probe_layers
    lin = {l: S.KeepFirst(mlp[l], fits[l]) for l in range(L)}
    n_gate = gate_windows.shape[0]
    lap = timing.laps()
    both = torch.cat([gate_windows, select_windows])

    # 1. δ on the training and selection windows (a sweep of each: the training windows'
    #    may be read back from chapter 03's measurement of the same windows, `memo`)
    halves = [S.linearization_sweep(model, w, {"linear": lin}, batch_size, progress)
              for w in (gate_windows, select_windows)]
    sw = S.Sweep(torch.cat([h.baseline for h in halves]),
                 {"linear": {l: torch.cat([h.linear["linear"][l] for h in halves])
                             for l in range(L)}})
    d_all = _deltas(sw, "linear")
    d_gate = {l: d[:n_gate] for l, d in d_all.items()}
    d_sel = {l: d[n_gate:] for l, d in d_all.items()}
    all_linear = {l: (sw.cost("linear", l),
                      S.bootstrap_cost(sw.baseline, sw.linear["linear"][l], n_boot, seed))
                  for l in range(L)}
    lap("delta sweep")
    acts = activations(model, both, batch_size)
    lap("activations")

    def parts(acts, l, rows):
        h = _rows(acts["h"][l][rows])
        e, c = split_token_context(h, _rows(acts["e"][rows]))
        return {"x": _rows(acts["x"][l][rows]), "h": h.double(), "e": e, "c": c}

    train_rows, sel_rows = slice(0, n_gate), slice(n_gate, None)
    window_of = _rows(torch.arange(select_windows.shape[0])[:, None]
                      .expand(select_windows.shape)).numpy()
    gates, per_layer, sel_scores, routed_train, same_share = {}, [], {}, {}, {}
    family = 1 - 0.05 / L  # Bonferroni over layers
    for l in range(L):
        y, thr, rule = delta_labels(d_gate[l])
        X, Xs = parts(acts, l, train_rows), parts(acts, l, sel_rows)
        # x: the routing gate (the paper's); h, e, c: the token/context comparison, all in the
        # residual stream's coordinates (h = e + c exactly)
        gates[l] = {f"linear:{p}": fit_gate("linear", X[p], y, seed)
                    for p in ("xhec" if l in probe_layers else "x")}
        with torch.no_grad():  # the share of training tokens the d+1 gate routes at g > ½
            routed_train[l] = float((gates[l]["linear:x"](X["x"]) > 0.5).double().mean())
        if l in curve_layers:
            gates[l].update({k: fit_gate(k, X["x"], y, seed) for k in kinds if k != "linear"})
            with torch.no_grad():  # thresholds at which the other gates route as many tokens
                same_share[l] = {k: threshold_for_fraction(gates[l][k](X["x"]), routed_train[l])
                                 for k in kinds if k != "linear"}
        y_sel, _, _ = delta_labels(d_sel[l])
        aucs, scores = {}, {}
        with torch.no_grad():
            for name, g in gates[l].items():
                scores[name] = g(Xs[name.split(":")[1] if ":" in name else "x"]).numpy()
                aucs[name] = bootstrap_auc(scores[name], y_sel.numpy(), window_of, n_boot, seed)
            sel_scores[l] = gates[l]["linear:x"](Xs["x"])
        yl = y_sel.numpy()
        # intervals that hold together over the L layers (Bonferroni), for "any"/"share" claims
        fam = {k: bootstrap_auc(scores[k], yl, window_of, n_boot, seed, family)
               for k in ("linear:x", "linear:h", "linear:e") if k in scores}
        pairs = [(k, "linear:x") for k in scores if not k.startswith("linear:")]
        pairs += [(k, "linear:h") for k in ("linear:c", "linear:e") if k in scores]
        diffs = {f"{a}−{b}": bootstrap_auc_diff(scores[a], scores[b], yl, window_of, n_boot,
                                                seed, family) for a, b in pairs}
        per_layer.append({
            "layer": l, "labels": {"threshold": thr, "rule": rule,
                                   "share_linear_ok": float(y.double().mean())},
            "all_linear": {"cost": all_linear[l][0], "ci": all_linear[l][1]},
            "auc": aucs, "auc_family": fam, "auc_diff_family": diffs,
            "delta": delta_summary(d_gate[l]),
            "gate_params": {k: g.n_params for k, g in gates[l].items()}})
        if l in curve_layers:
            qs = np.linspace(0, 1, 41)
            per_layer[-1]["delta_quantiles"] = {
                "q": qs.tolist(),
                "delta": torch.quantile(d_gate[l].double().flatten(), torch.tensor(qs)).tolist()}
            per_layer[-1]["thresholds"] = {
                f: threshold_for_fraction(gates[l]["linear:x"](X["x"]), f) for f in fractions}
    del acts
    lap("gates and AUCs")

    # 2. evaluation: one sweep, every variant sharing the unchanged prefix
    def hybrid(l, kind="linear:x", thr=0.5):
        return HybridMLP(mlp[l], fits[l], gates[l][kind], thr)

    variants = {"gate": {l: hybrid(l) for l in range(L)},
                # the control: as many tokens as the gate routes (on its training tokens),
                # chosen at random
                **{f"random{k}": {l: RandomRouting(mlp[l], fits[l], routed_train[l],
                                                   seed + 1000 * (k + 1) + l) for l in range(L)}
                   for k in range(random_draws)}}
    for f in fractions:
        variants[f"linear@{f:g}"] = {l: hybrid(l, thr=per_layer[l]["thresholds"][f])
                                     for l in curve_layers}
    for k in kinds:  # the other gates, at the share of tokens the d+1 gate routes
        if k != "linear":
            variants[k] = {l: hybrid(l, k, thr=same_share[l][k]) for l in curve_layers}
    ev = S.linearization_sweep(model, eval_windows, variants, batch_size, progress)
    lap("eval sweep")

    def result(v, l):
        return {"cost": ev.cost(v, l), "routed": variants[v][l].fraction,
                "ci": S.bootstrap_cost(ev.baseline, ev.linear[v][l], n_boot, seed),
                "ci_family": S.bootstrap_cost(ev.baseline, ev.linear[v][l], n_boot, seed, family)}

    for l, row in enumerate(per_layer):
        row["gate"] = result("gate", l)
        # random routing relative to the gate: > 0 where the gate chose better than chance
        # the expected loss under random routing: the mean over draws, token by token
        rnd = torch.stack([ev.linear[f"random{k}"][l] for k in range(random_draws)]).mean(0)
        cost = S.perplexity(rnd) / S.perplexity(ev.baseline) - 1
        row["random"] = {
            "cost": cost, "draws": [ev.cost(f"random{k}", l) for k in range(random_draws)],
            "routed": float(np.mean([variants[f"random{k}"][l].fraction
                                     for k in range(random_draws)])),
            "target": routed_train[l], "vs_gate": cost - row["gate"]["cost"],
            "ci": S.bootstrap_cost(ev.baseline, rnd, n_boot, seed),
            "vs_gate_ci_family": S.bootstrap_cost(ev.linear["gate"][l], rnd, n_boot, seed,
                                                  family)}
        if l in curve_layers:
            row["curve"] = sorted([{"threshold": row["thresholds"][f], "target": f,
                                    **result(f"linear@{f:g}", l)} for f in fractions]
                                  + [{"threshold": 0.5, "target": None, **row["gate"]}],
                                  key=lambda p: p["routed"])
            row["kinds"] = {"linear": row["gate"],
                            **{k: result(k, l) for k in kinds if k != "linear"}}

    lap("eval intervals")
    # 3. compound gating
    comp = {l: hybrid(l) for l in range(L)}
    fl = flops_per_token(model, eval_windows.shape[1])

    def saved(r):
        return fl.saved([r["routed"].get(l, 0.0) for l in range(L)])

    all_on = compound(model, eval_windows, comp, batch_size, ev.baseline, n_boot, seed)
    # expected added loss per token of each gate, on the held-out selection windows
    expected = {l: float((d_sel[l].flatten().double()
                          * (sel_scores[l].flatten() > 0.5).double()).mean()) for l in range(L)}
    order = sorted(range(L), key=lambda l: expected[l])
    grid = compound_grid or sorted({1, 2, 4, 8, 16, L} & set(range(1, L + 1)))
    base_sel = sw.baseline[n_gate:]
    select = {k: compound(model, select_windows, {l: comp[l] for l in order[:k]},
                          batch_size, base_sel, 0, seed)["cost"] for k in grid}
    under = [k for k in grid if select[k] < max_cost]
    k_star = max(under) if under else 0
    held_out = {k: compound(model, eval_windows, {l: comp[l] for l in order[:k]}, batch_size,
                            ev.baseline, n_boot, seed) for k in grid}
    lap("compound")
    chosen = held_out.get(k_star, {"cost": 0.0, "ci": (0.0, 0.0), "routed": {}})
    return {
        "n_layers": L, "baseline_ppl": S.perplexity(ev.baseline),
        "tokens": {"gate": int(gate_windows.numel()), "select": int(select_windows.numel()),
                   "eval": int(eval_windows.numel())},
        "kinds": list(kinds), "curve_layers": list(curve_layers), "family_level": family,
        "probe_layers": list(probe_layers), "per_layer": per_layer,
        "flops": {"mlp": fl.mlp, "surrogate": fl.surrogate, "gate": fl.gate,
                  "blocks": fl.blocks, "head": fl.head},
        "compound": {
            "all": {"cost": all_on["cost"], "ci": all_on["ci"], "ppl": all_on["ppl"],
                    "routed": [all_on["routed"][l] for l in range(L)],
                    "flops_saved": saved(all_on),
                    "flops_saved_blocks": fl.saved([all_on["routed"][l] for l in range(L)],
                                                   with_head=False)},
            "order": order, "expected": [expected[l] for l in range(L)],
            "selection": {str(k): v for k, v in select.items()},
            "held_out": {str(k): {"cost": v["cost"], "ci": v["ci"], "flops_saved": saved(v)}
                         for k, v in held_out.items()},
            "max_cost": max_cost, "k_star": k_star, "chosen_layers": sorted(order[:k_star]),
            "chosen": {"cost": chosen["cost"], "ci": chosen["ci"],
                       "flops_saved": saved(chosen)},
            "wallclock": wallclock(model, eval_windows[:batch_size],
                                   {"all": comp, "chosen": {l: comp[l] for l in order[:k_star]}}),
        },
    }


@torch.no_grad()
def wallclock(model, ids: torch.Tensor, configs: dict[str, dict[int, HybridMLP]],
              repeats: int = 1) -> dict:
    """Seconds for one forward pass over `ids` (best of `repeats`, after a warm-up) with the
    full MLPs, and with each configuration of `HybridMLP`s installed; the share saved.
    One measurement, for the page; `benchmarks/bench_gating.py` is the careful one."""
    import time

    from . import surrogates as S

    def best():
        model(input_ids=ids)
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            model(input_ids=ids)
            ts.append(time.perf_counter() - t)
        return min(ts)

    full = best()
    out = {}
    for name, hybrids in configs.items():
        with S.replaced(model, hybrids):
            t = best()
        out[name] = {"full_s": full, "hybrid_s": t, "saved": 1 - t / full,
                     "tokens": int(ids.numel())}
    return out


@torch.no_grad()
def compound(model, windows: torch.Tensor, hybrids: dict[int, HybridMLP], batch_size: int = 8,
             baseline: torch.Tensor | None = None, n_boot: int = 1000, seed: int = 0) -> dict:
    """Perplexity with several layers gated at once: cost against `baseline` (per-token
    losses of the unmodified model; computed if not given), and the share routed per layer."""
    from . import surrogates as S

    if baseline is None:
        baseline = S.eval_nll(model, windows, batch_size)
    for h in hybrids.values():
        h.reset()
    with S.replaced(model, hybrids):
        nll = S.eval_nll(model, windows, batch_size)
    return {"ppl": S.perplexity(nll), "cost": S.perplexity(nll) / S.perplexity(baseline) - 1,
            "ci": (S.bootstrap_cost(baseline, nll, n_boot, seed) if n_boot
                   else (float("nan"), float("nan"))),
            "routed": {l: h.fraction for l, h in hybrids.items()}, "layers": sorted(hybrids)}


@timing.timed("gating.nofly_study")
def nofly_study(model, module: nn.Module, layer: int, sets: dict[str, torch.Tensor],
                batch_size: int = 8, min_obs: int = 10, tokenizer=None, progress=None) -> dict:
    """P3 §4.3 at one layer: δ per token on several sets of windows (the first builds the
    lists, the others test them), with `module` (the layer's surrogate) in place of its MLP.
    Tokens are keyed two ways: by the input token, whose MLP is routed, and by the target
    (next) token, which is what the author's code keys them by."""
    from . import surrogates as S

    keyed = {"input": {}, "target": {}}
    summary = {}
    for name, w in sets.items():
        sw = S.linearization_sweep(model, w, {"linear": {layer: module}}, batch_size, progress)
        d = _deltas(sw, "linear")[layer]  # (N, T−2): positions 1 … T−2
        keyed["input"][name] = token_means(w[:, 1:-1], d, min_obs)
        keyed["target"][name] = token_means(w[:, 2:], d, min_obs)
        summary[name] = {"tokens": int(d.numel()), "delta": delta_summary(d)}
    build = next(iter(sets))
    out = {"layer": layer, "build": build, "min_obs": min_obs, "sets": summary}
    for key, means in keyed.items():
        nofly = nofly_list(means[build])
        out[f"by_{key}"] = {name: transfer(means[build], means[name], nofly)
                            for name in sets if name != build}
        if key == "input" and tokenizer is not None:
            top = sorted(nofly, key=lambda t: -means[build][t][0])[:12]
            out["examples"] = [
                {"token": tokenizer.decode([t]), "build": means[build][t][0],
                 **{name: means[name][t][0] if t in means[name] else None
                    for name in sets if name != build}} for t in top]
    return out
