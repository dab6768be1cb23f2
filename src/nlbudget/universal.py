"""P2: transformers with fixed internal weights, programmed only through the embedding.

The paper's construction is not available (only its abstract and a summary), so the explicit
construction here is the book's own: `SparseUT` is a universal transformer for the class of
attention-only transformers with H heads, L layers and width d, whose attention weights are
fixed {0, 1} matrices that only select and move d-wide blocks of its residual stream. A target
is "compiled" into an embedding E′ (`SparseUT.program`) and the UT then reproduces the
target's hidden states exactly.

The idea. With a residual stream and no nonlinearity other than softmax, a target's hidden
state is a sum over *paths*: h^l = Σ_α P_α X E M_α, where α is the sequence of heads the path
went through, P_α the product of their (input-dependent) attention matrices and M_α the product
of their value matrices. Every quantity a later layer needs — h Q, h K, h V… — is then a sum of
blocks P_α X (E N) for fixed matrices N that the embedding can precompute. The UT keeps one
block per pair (α, σ): α the heads already applied, σ the right factors still pending (value
matrices of later heads, then a query, key or output terminal). Head (t, h) of the UT sums the
blocks whose σ is the terminal Q^t_h (its queries) and K^t_h (its keys) — which reproduces the
target's attention pattern — and applies it to every block whose next pending factor is
V^t_h, moving it to (α + (t, h), σ minus that factor). The number of blocks grows like
(H + 1)^L: this is an attention-matching construction, exponential in depth, not the paper's
O(HLd).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product

import torch
from nlbudget import timing

# ------------------------------------------------------------------ targets


@dataclass
class AttentionOnly:
    """An attention-only transformer: h⁰ = E[x]; h^t = [h^{t−1} +] Σ_h A^t_h h^{t−1} V^t_h with
    A^t_h = causal softmax(h^{t−1} Q^t_h (h^{t−1} K^t_h)ᵀ). Weights (L, H, d, d), float64."""

    E: torch.Tensor  # (vocab, d)
    Q: torch.Tensor  # (L, H, d, d)
    K: torch.Tensor
    V: torch.Tensor
    residual: bool = True

    @property
    def shape(self) -> tuple[int, int, int]:
        L, H, d, _ = self.Q.shape
        return H, L, d


def random_target(vocab: int, d: int, H: int, L: int, residual: bool = True, seed: int = 0,
                  scale: float = 1.0) -> AttentionOnly:
    """Gaussian weights (std scale/√d), float64."""
    g = torch.Generator().manual_seed(seed)

    def w(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale / d ** 0.5

    return AttentionOnly(torch.randn(vocab, d, generator=g, dtype=torch.float64),
                         w(L, H, d, d), w(L, H, d, d), w(L, H, d, d), residual)


def causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax over positions ≤ the row's own: (…, T, T)."""
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1)


def attend(z: torch.Tensor, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """One layer of causal attention, all heads at once, summed: z (B, T, m); Q, K (H, m, k);
    V (H, m, n) -> (B, T, n)."""
    q = torch.einsum("btm,hmk->bhtk", z, Q)
    k = torch.einsum("btm,hmk->bhtk", z, K)
    v = torch.einsum("btm,hmn->bhtn", z, V)
    return (causal_softmax(q @ k.transpose(-1, -2)) @ v).sum(1)


def target_forward(t: AttentionOnly, ids: torch.Tensor) -> torch.Tensor:
    """Hidden states after the last layer: (B, T, d)."""
    h = t.E[ids]
    for l in range(t.Q.shape[0]):
        out = attend(h, t.Q[l], t.K[l], t.V[l])
        h = h + out if t.residual else out
    return h


# ------------------------------------------------------------------ the explicit construction

# a pending factor: ("V", layer, head), and a terminal: ("Q", layer, head), ("K", layer, head)
# or ("O",) for the output
Op = tuple


def _words(H: int, L: int, residual: bool) -> list[tuple[Op, ...]]:
    """Every product of right factors some block needs: value factors at increasing layers,
    then a terminal. Without a residual stream, a path takes exactly one head per layer."""
    out = []
    terminals = [(("Q", t, h), t) for t in range(L) for h in range(H)]
    terminals += [(("K", t, h), t) for t in range(L) for h in range(H)] + [(("O",), L)]
    for term, t in terminals:
        if residual:
            for layers in product([False, True], repeat=t):
                chosen = [l for l in range(t) if layers[l]]
                for heads in product(range(H), repeat=len(chosen)):
                    out.append(tuple(("V", l, h) for l, h in zip(chosen, heads)) + (term,))
        else:
            for heads in product(range(H), repeat=t):
                out.append(tuple(("V", l, h) for l, h in enumerate(heads)) + (term,))
    return out


@dataclass
class SparseUT:
    """The book's {0,1} universal transformer for attention-only targets of shape (H, L, d),
    with or without a residual stream (the UT itself always has one)."""

    H: int
    L: int
    d: int
    residual_target: bool = True
    slots: list = field(init=False)  # (applied heads α, pending factors σ)

    def __post_init__(self):
        slots = []
        for w in _words(self.H, self.L, self.residual_target):
            n_v = len(w) - 1
            for j in range(n_v + 1):  # α = the first j value factors, applied
                slots.append((tuple((op[1], op[2]) for op in w[:j]), w[j:]))
        self.slots = slots
        self.index = {s: i for i, s in enumerate(slots)}
        self._build()

    @property
    def m(self) -> int:
        """Width of the UT's residual stream."""
        return len(self.slots) * self.d

    def _block(self, i: int) -> slice:
        return slice(i * self.d, (i + 1) * self.d)

    def _build(self):
        H, L, d, m = self.H, self.L, self.d, self.m
        eye = torch.eye(d, dtype=torch.float64)
        self.Qs = torch.zeros(L, H, m, d, dtype=torch.float64)
        self.Ks = torch.zeros(L, H, m, d, dtype=torch.float64)
        self.Vs = torch.zeros(L, H, m, m, dtype=torch.float64)
        self.R = torch.zeros(m, d, dtype=torch.float64)
        for i, (alpha, sigma) in enumerate(self.slots):
            b = self._block(i)
            head = sigma[0]
            if len(sigma) == 1:  # a terminal block: read as queries, keys or output
                if head[0] == "O":
                    self.R[b] = eye
                else:
                    (self.Qs if head[0] == "Q" else self.Ks)[head[1], head[2], b] = eye
            else:  # a value factor pending: head (t, h) moves the block on
                _, t, h = head
                j = self.index[(alpha + ((t, h),), sigma[1:])]
                self.Vs[t, h, b, self._block(j)] = eye

    def program(self, target: AttentionOnly) -> torch.Tensor:
        """The embedding E′ (vocab, m) that makes this UT compute `target`: the block of
        slot ((), σ) holds E times the product of σ's factors; every other block is 0."""
        if target.shape != (self.H, self.L, self.d) or target.residual != self.residual_target:
            raise ValueError(f"target of shape {target.shape} (residual {target.residual}) "
                             f"does not fit a UT for {(self.H, self.L, self.d)} "
                             f"(residual {self.residual_target})")
        mats = {"V": target.V, "Q": target.Q, "K": target.K}
        Ep = torch.zeros(target.E.shape[0], self.m, dtype=torch.float64)
        for i, (alpha, sigma) in enumerate(self.slots):
            if alpha:
                continue
            block = target.E
            for op in sigma:
                if op[0] != "O":
                    block = block @ mats[op[0]][op[1], op[2]]
            Ep[:, self._block(i)] = block
        return Ep

    def forward(self, Ep: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The UT's residual stream after the last layer: (B, T, m)."""
        h = Ep[ids]
        for t in range(self.L):
            h = h + attend(h, self.Qs[t], self.Ks[t], self.Vs[t])
        return h

    def simulate(self, Ep: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The target's hidden states, read out of the UT's stream by the fixed 0/1 map R."""
        return self.forward(Ep, ids) @ self.R

    @property
    def nonzeros(self) -> int:
        return int(sum((M != 0).sum() for M in (self.Qs, self.Ks, self.Vs, self.R)))


def width(H: int, L: int, d: int, residual: bool = True) -> int:
    """m of `SparseUT(H, L, d)` in closed form: d × (number of (α, σ) blocks)."""
    total = 0
    for t in range(L + 1):  # terminal layer t (t = L: the output)
        n_term = 1 if t == L else 2 * H
        if residual:  # words with k value factors among t layers; each has k + 1 splits
            total += n_term * sum(math.comb(t, k) * H ** k * (k + 1) for k in range(t + 1))
        else:
            total += n_term * H ** t * (t + 1)
    return d * total


# ------------------------------------------------------------------ trainable programs

class FrozenTransformer(torch.nn.Module):
    """A small causal transformer for P2's experiments: width m, H heads, L layers, optional
    residual stream, pre-LayerNorm (no affine parameters) and MLP; the last position's state
    is read out by U. The embedding — the program — is a token table E plus a position table
    P (without positions, no model here can find "the token after the previous occurrence").
    `kind` sets the internal weights: "sparse" (the fixed 0/1 matrices of
    `SparseUT(H, L, d, residual_target=residual)`, m = its width; it always keeps its own
    residual path, which the construction needs, so `residual=False` means "simulating
    attention-only targets without one"), "random" (i.i.d. Gaussian, fixed) or "trained"
    (Gaussian initialisation, trained with E and U). With `looped`, one layer's weights are
    used at every depth. Internal weights are parameters either way; only E and U require
    gradients unless kind = "trained"; "E and U" below always means E, P and U."""

    def __init__(self, kind: str, vocab: int, n_out: int, H: int, L: int, d: int,
                 m: int | None = None, residual: bool = True, layernorm: bool = False,
                 mlp: bool = False, looped: bool = False, seed: int = 0, max_len: int = 128):
        super().__init__()
        if kind not in ("sparse", "random", "trained"):
            raise ValueError(f"unknown kind {kind!r}; valid: sparse, random, trained")
        g = torch.Generator().manual_seed(seed)
        nn = torch.nn
        if kind == "sparse":
            # the construction simulates targets with or without a residual stream, but the UT
            # itself needs its own residual path to carry the blocks: it always keeps it
            ut = SparseUT(H, L, d, residual_target=residual)
            m, dk = ut.m, d
            Q, K, V = (ut.Qs.float(), ut.Ks.float(), ut.Vs.float())
        else:
            m = m or d
            dk = max(1, m // H)
            Q = torch.randn(L, H, m, dk, generator=g) / m ** 0.5
            K = torch.randn(L, H, m, dk, generator=g) / m ** 0.5
            V = torch.randn(L, H, m, m, generator=g) / (m * H) ** 0.5
        if looped:
            Q, K, V = Q[:1].expand_as(Q).clone(), K[:1].expand_as(K).clone(), V[:1].expand_as(V).clone()
        train_inside = kind == "trained"
        self.Q = nn.Parameter(Q, requires_grad=train_inside)
        self.K = nn.Parameter(K, requires_grad=train_inside)
        self.V = nn.Parameter(V, requires_grad=train_inside)
        self.mlp = None
        if mlp:
            W1 = torch.randn(L, m, 4 * m, generator=g) / m ** 0.5
            W2 = torch.randn(L, 4 * m, m, generator=g) / (4 * m) ** 0.5
            self.W1 = nn.Parameter(W1, requires_grad=train_inside)
            self.W2 = nn.Parameter(W2, requires_grad=train_inside)
            self.mlp = True
        self.E = nn.Parameter(torch.randn(vocab, m, generator=g) / m ** 0.5)
        self.P = nn.Parameter(torch.randn(max_len, m, generator=g) / m ** 0.5)
        self.U = nn.Parameter(torch.zeros(m, n_out))
        self.kind, self.L, self.H, self.m = kind, L, H, m
        self.residual = residual or kind == "sparse"
        self.layernorm, self.looped = layernorm, looped

    def _norm(self, h):
        return torch.nn.functional.layer_norm(h, h.shape[-1:]) if self.layernorm else h

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, n_out)
        return self.hidden(ids)[:, -1] @ self.U

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, m)
        h = self.E[ids] + self.P[:ids.shape[1]]
        for t in range(self.L):
            l = 0 if self.looped else t
            att = attend(self._norm(h), self.Q[l], self.K[l], self.V[l])
            h = h + att if self.residual else att
            if self.mlp:
                z = self._norm(h)
                h = h + torch.relu(z @ self.W1[l]) @ self.W2[l]
        return h


def train_program(model: FrozenTransformer, batches, steps: int, lr: float = 3e-3,
                  progress=None, every: int = 0, check=None) -> list[float]:
    """Adam on the parameters that require gradients (E and U, or everything for a trained
    model) with cross-entropy on the labels; `batches(step)` returns (ids, labels), labels (B,)
    for the last position or (B, T) for every position. With `check`, `check(n)` is called after
    every `every` steps (n steps done); training stops early where it returns True — one
    optimiser throughout, so a run stopped at n steps is the first n steps of a longer one."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    losses = []
    for step in range(steps):
        if check is not None and every and step and step % every == 0 and check(step):
            break
        ids, y = batches(step)
        out = model(ids) if y.dim() == 1 else model.hidden(ids) @ model.U
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                 y.long().reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if progress is not None:
            progress.update(1)
    else:
        if check is not None and every:  # the last point: after the last step
            check(steps)
    return losses


@torch.no_grad()
def accuracy(model: FrozenTransformer, ids: torch.Tensor, y: torch.Tensor) -> float:
    return float((model(ids).argmax(-1) == y.long()).float().mean())


@timing.timed("universal.random_universality")
def random_universality(target: AttentionOnly, m: int, steps: int, seed: int = 0,
                        degenerate: bool = False, n_train: int = 256, length: int = 8,
                        lr: float = 1e-2) -> dict:
    """Search for a program of a fixed Gaussian UT (width m, the target's H and L, residual
    stream) that simulates `target`: Adam on E′ and a linear read-out W (m × d) minimising the
    squared error of every position's hidden state on `n_train` random sequences. Returns the
    relative error ‖UT(X)W − T(X)‖ / ‖T(X)‖ on held-out sequences. With `degenerate`, the
    UT's query matrices are 0 (rank 0): every attention pattern is uniform."""
    H, L, d = target.shape
    vocab = target.E.shape[0]
    model = FrozenTransformer("random", vocab, d, H, L, d, m=m, residual=True, seed=seed)
    if degenerate:
        with torch.no_grad():
            model.Q.zero_()
    g = torch.Generator().manual_seed(seed + 1)
    X = torch.randint(0, vocab, (n_train, length), generator=g)
    Xt = torch.randint(0, vocab, (n_train, length), generator=g)
    Y, Yt = target_forward(target, X).float(), target_forward(target, Xt).float()
    opt = torch.optim.Adam([model.E, model.P, model.U], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        loss = ((model.hidden(X) @ model.U - Y) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        rel = float((model.hidden(Xt) @ model.U - Yt).norm() / Yt.norm())
        rel_train = float((model.hidden(X) @ model.U - Y).norm() / Y.norm())
    return {"m": m, "degenerate": degenerate, "seed": seed, "rel_error": rel,
            "rel_error_train": rel_train, **trivial_errors(X, Y, Xt, Yt, vocab)}


def trivial_errors(X, Y, Xt, Yt, vocab: int) -> dict:
    """Held-out relative errors of two predictors that read no context: the mean hidden state
    at each position (`mean`), and the best linear map of (token, position) one-hots, fit by
    least squares on the training sequences (`token_position`). A program is worth something
    only where it beats them."""
    T = X.shape[1]
    mean = Y.mean(0, keepdim=True).expand_as(Yt)

    def feats(ids):
        oh = torch.nn.functional.one_hot(ids, vocab).double()  # (n, T, vocab)
        pos = torch.eye(T, dtype=torch.float64).expand(ids.shape[0], T, T)
        return torch.cat([oh, pos], -1).reshape(-1, vocab + T)

    W = torch.linalg.lstsq(feats(X), Y.double().reshape(-1, Y.shape[-1])).solution
    pred = (feats(Xt) @ W).reshape(Yt.shape)
    return {"rel_error_mean": float((mean - Yt).norm() / Yt.norm()),
            "rel_error_token_position": float((pred.float() - Yt).norm() / Yt.norm())}


# ------------------------------------------------------------------ the exact solve

def _program_forward(model: FrozenTransformer, vocab: int, length: int):
    """The UT's hidden states as a function of one flat program θ = (E, P, U), float64."""
    m, L = model.m, model.L
    Q, K, V = (w.detach().double() for w in (model.Q, model.K, model.V))
    nE, nP = vocab * m, length * m

    def hidden(theta: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        h = theta[:nE].reshape(vocab, m)[ids] + theta[nE:nE + nP].reshape(length, m)
        for t in range(L):
            h = h + attend(h, Q[t], K[t], V[t])
        return h

    def readout(theta: torch.Tensor) -> torch.Tensor:
        return theta[nE + nP:].reshape(m, -1)

    return hidden, readout, nE + nP


def levenberg_marquardt(residual, theta: torch.Tensor, iters: int, tol: float = 1e-11,
                        chunk: int = 128) -> tuple[torch.Tensor, list[float]]:
    """Minimise ‖residual(θ)‖² by Levenberg–Marquardt in float64: the Jacobian by forward-mode
    products (one per parameter, `chunk` at a time), the step from (JᵀJ + λ diag JᵀJ) δ = −Jᵀr,
    λ divided by 3 after a step that lowers the cost and multiplied by 4 until one does.
    Returns θ and the cost's square root after every iteration; stops at `iters`, below `tol`
    or when no damping lowers the cost."""
    from torch.func import jvp, vmap

    r = residual(theta)
    cost, lam, hist = float(r @ r), 1e-3, []
    eye = torch.eye(theta.numel(), dtype=theta.dtype)
    for _ in range(iters):
        J = torch.cat([vmap(lambda v: jvp(residual, (theta,), (v,))[1])(eye[s:s + chunk])
                       for s in range(0, theta.numel(), chunk)]).T
        A, g = J.T @ J, J.T @ r
        D = torch.diag(torch.diag(A).clamp_min(1e-12))
        while lam <= 1e10:
            new = theta + torch.linalg.solve(A + lam * D, -g)
            rn = residual(new)
            if float(rn @ rn) < cost:
                theta, r, cost, lam = new, rn, float(rn @ rn), max(lam / 3, 1e-12)
                break
            lam *= 4
        hist.append(cost ** 0.5)
        if cost ** 0.5 < tol or lam > 1e10:
            break
    return theta, hist


@timing.timed("universal.random_universality_exact")
def random_universality_exact(target: AttentionOnly, m: int, iters: int, seed: int = 0,
                              n_train: int = 64, n_test: int = 256, length: int = 8,
                              planted: bool = False) -> dict:
    """Solve for a program of the same Gaussian UT as `random_universality` (width m, the
    target's H and L, residual stream; the seed draws the same weights) directly: E′, P and the
    read-out W in float64 by Levenberg–Marquardt (`levenberg_marquardt`) on every position's
    hidden state of `n_train` random sequences — no learning rate, no optimiser's floor: near
    an exact program, Gauss–Newton converges quadratically to float64's precision. Returns the
    held-out relative error on `n_test` fresh sequences, the training one after every
    iteration, and the equations and unknowns of the system. With `planted`, the target is the
    UT itself with a random program (E₀, P₀, W₀): an exact program exists by construction, so
    this is the solver's positive control — whether it finds one where one exists."""
    H, L, d = target.shape
    vocab = target.E.shape[0]
    model = FrozenTransformer("random", vocab, d, H, L, d, m=m, residual=True, seed=seed)
    hidden, readout, n_prog = _program_forward(model, vocab, length)
    g = torch.Generator().manual_seed(seed + 1)
    X = torch.randint(0, vocab, (n_train, length), generator=g)
    Xt = torch.randint(0, vocab, (n_test, length), generator=g)
    if planted:
        gp = torch.Generator().manual_seed(seed + 2)
        theta0 = torch.randn(n_prog + m * d, generator=gp, dtype=torch.float64) / m ** 0.5
        Y, Yt = (hidden(theta0, ids) @ readout(theta0) for ids in (X, Xt))
    else:
        Y, Yt = target_forward(target, X), target_forward(target, Xt)
    theta = torch.cat([model.E.detach().double().reshape(-1),
                       model.P.detach().double()[:length].reshape(-1),
                       torch.zeros(m * d, dtype=torch.float64)])
    with torch.no_grad():  # start from the best read-out of the initial program
        theta[n_prog:] = torch.linalg.lstsq(hidden(theta, X).reshape(-1, m),
                                            Y.reshape(-1, d)).solution.reshape(-1)
    y_norm = float(Y.norm())

    def residual(th):
        return (hidden(th, X) @ readout(th) - Y).reshape(-1)

    theta, hist = levenberg_marquardt(residual, theta, iters, tol=1e-11 * y_norm)
    with torch.no_grad():
        rel = float((hidden(theta, Xt) @ readout(theta) - Yt).norm() / Yt.norm())
    return {"m": m, "seed": seed, "planted": planted, "rel_error": rel,
            "rel_error_train": hist[-1] / y_norm if hist else float("nan"),
            "history": [h / y_norm for h in hist], "iterations": len(hist),
            "equations": Y.numel(), "unknowns": theta.numel()}
