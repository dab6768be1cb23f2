"""Part I, symbolically: the chain from key-value memory to the gated MLP, and its symmetries.

Equation numbers follow the chain in PAPERS.md (P1):
(1) MLP(x) = σ(x W1ᵀ) W2, a key-value memory;  (2) a static query is absorbed into the keys;
(3) bilinear attention Σ_j σ(x Q_j K_jᵀ xᵀ) v_j;  (4) its rank-1 form σ((xQᵀ) ⊙ (xKᵀ)) V;
(5) the gated form (σ(xQᵀ) ⊙ (xKᵀ)) V.
Every function returns sympy objects plus a boolean that sympy itself established.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product

import sympy as sp

sigma = sp.Function("sigma")
a, b, z, c = sp.symbols("a b z c", real=True)
alpha = sp.symbols("alpha", real=True, nonzero=True)

#: Activations as exact sympy expressions in z (GELU is the exact erf form).
ACTIVATIONS: dict[str, sp.Expr] = {
    "relu": sp.Max(0, z),
    "gelu": z / 2 * (1 + sp.erf(z / sp.sqrt(2))),
    "silu": z / (1 + sp.exp(-z)),
    "linear": c * z,
}


@dataclass
class Identity:
    """A statement lhs = rhs and whether sympy proved lhs − rhs simplifies to zero."""

    name: str
    lhs: sp.Basic
    rhs: sp.Basic
    holds: bool
    steps: list = field(default_factory=list)  # (text, LaTeX) pairs for the chapter

    def latex(self) -> str:
        """lhs over = rhs, row vectors shown as columns, so that both fit a page."""
        def col(e):
            return sp.latex(e.T if isinstance(e, sp.MatrixBase) and e.rows == 1 else e)
        return rf"\begin{{aligned}} & {col(self.lhs)} \\ = & {col(self.rhs)} \end{{aligned}}"


def steps_latex(steps) -> str:
    """A proof's steps as one aligned display: text on the left, the statement on the right."""
    rows = [rf"&\text{{{text}:}} && {tex}" for text, tex in steps]
    return r"\begin{aligned}" + r" \\ ".join(rows) + r"\end{aligned}"


def _is_zero(expr) -> bool:
    e = sp.simplify(sp.expand(expr))
    if isinstance(e, sp.MatrixBase):
        return all(sp.simplify(v) == 0 for v in e)
    return e == 0


def _sym_matrix(name: str, rows: int, cols: int) -> sp.Matrix:
    return sp.Matrix(rows, cols, lambda i, j: sp.Symbol(f"{name}_{i + 1}{j + 1}", real=True))


def _row(name: str, d: int) -> sp.Matrix:
    return sp.Matrix(1, d, lambda i, j: sp.Symbol(f"{name}_{j + 1}", real=True))


def _apply(f, m: sp.Matrix) -> sp.Matrix:
    return m.applyfunc(f)


def kv_memory(d: int = 3, n: int = 2) -> Identity:
    """Eq. (1): σ(x W1ᵀ) W2 = Σ_j σ(x·k_j) v_j with k_j, v_j the rows of W1, W2."""
    x, W1, W2 = _row("x", d), _sym_matrix("K", n, d), _sym_matrix("V", n, d)
    lhs = _apply(sigma, x * W1.T) * W2
    rhs = sum((sigma((x * W1[j, :].T)[0]) * W2[j, :] for j in range(n)), sp.zeros(1, d))
    return Identity("kv-memory", lhs, rhs, _is_zero(lhs - rhs))


def static_query_absorbed(d: int = 3, n: int = 2) -> Identity:
    """Eq. (2): σ(x Q Kᵀ) = σ(x K'ᵀ) with K' = K Qᵀ, so a static Q adds nothing."""
    x, Q, K = _row("x", d), _sym_matrix("Q", d, d), _sym_matrix("K", n, d)
    K_absorbed = K * Q.T
    lhs = _apply(sigma, x * Q * K.T)
    rhs = _apply(sigma, x * K_absorbed.T)
    return Identity("static-query", lhs, rhs, _is_zero(lhs - rhs),
                    steps=[("absorbed keys", rf"K' = K Q^\top = {sp.latex(K_absorbed)}")])


def rank1_bilinear(d: int = 3, n: int = 2) -> Identity:
    """Eq. (3) → (4): with Q_j K_jᵀ = q_jᵀ k_j (rank 1), the bilinear attention
    Σ_j σ(x Q_j K_jᵀ xᵀ) v_j equals σ((x Qᵀ) ⊙ (x Kᵀ)) V."""
    x = _row("x", d)
    Qr, Kr, V = _sym_matrix("q", n, d), _sym_matrix("k", n, d), _sym_matrix("v", n, d)
    scores3 = [(x * (Qr[j, :].T * Kr[j, :]) * x.T)[0] for j in range(n)]  # x q_jᵀ k_j xᵀ
    lhs = sum((sigma(s) * V[j, :] for j, s in enumerate(scores3)), sp.zeros(1, d))
    rhs = _apply(sigma, (x * Qr.T).multiply_elementwise(x * Kr.T)) * V
    return Identity("rank1", lhs, rhs, _is_zero(lhs - rhs))


def gated_form(d: int = 3, n: int = 2) -> sp.Matrix:
    """Eq. (5): (σ(x Qᵀ) ⊙ (x Kᵀ)) V, σ on one branch only (Shazeer's GLU family)."""
    x, Q, K, V = _row("x", d), _sym_matrix("q", n, d), _sym_matrix("k", n, d), _sym_matrix("v", n, d)
    return _apply(sigma, x * Q.T).multiply_elementwise(x * K.T) * V


def exchange_iff_linear() -> Identity:
    """σ(a)·b = σ(b)·a for all a, b  ⇔  σ(z) = c·z.

    (⇒) put b = 1: σ(a) = σ(1)·a, so c = σ(1).  (⇐) c·a·b − c·b·a = 0.
    What sympy does is the algebra of each step: it solves the instance b = 1 for σ(a), and
    simplifies the converse to 0. Taking that instance of "for all a, b" is logic, the
    reader's step (sympy does not reason about quantifiers); `holds` says the algebra checks.
    """
    condition = sp.Eq(sigma(a) * b, sigma(b) * a)
    at_b1 = condition.subs(b, 1)  # sympy: sigma(a) = a*sigma(1)
    solved = sp.solve(at_b1, sigma(a))
    forward = len(solved) == 1 and sp.simplify(solved[0] - a * sigma(1)) == 0
    linear = ACTIVATIONS["linear"]
    backward = _is_zero(linear.subs(z, a) * b - linear.subs(z, b) * a)
    steps = [
        ("for all a, b (the claim)", sp.latex(condition)),
        ("so at b = 1 (the reader's step); sympy solves it", sp.latex(sp.Eq(sigma(a),
                                                                              solved[0]))),
        ("so with c = σ(1)", r"\sigma(z) = c\,z"),
        ("conversely", r"c\,a\,b - c\,b\,a = 0 \quad (\text{sympy: }"
         + sp.latex(sp.simplify(linear.subs(z, a) * b - linear.subs(z, b) * a)) + ")"),
    ]
    return Identity("exchange-iff-linear", sigma(a), a * sigma(1), forward and backward, steps)


def _grid(lo: int = -3, hi: int = 3) -> list[sp.Rational]:
    vals = sorted({Fraction(p, q) for p in range(lo * 2, hi * 2 + 1) for q in (1, 2)})
    return [sp.Rational(v.numerator, v.denominator) for v in vals if v != 0]


@dataclass
class Counterexample:
    activation: str
    point: dict  # the exact arguments
    value: sp.Expr  # exact nonzero residual
    numeric: float


def exchange_counterexample(name: str) -> Counterexample | None:
    """Smallest-|a|+|b| exact point where σ(a)·b − σ(b)·a ≠ 0 (None if σ is linear on the grid)."""
    f = ACTIVATIONS[name]
    pts = sorted(product(_grid(), repeat=2), key=lambda p: (abs(p[0]) + abs(p[1]), p))
    for pa, pb in pts:
        r = sp.simplify(f.subs(z, pa) * pb - f.subs(z, pb) * pa)
        if r.free_symbols:
            continue
        if r.is_zero is False:
            return Counterexample(name, {"a": pa, "b": pb}, r, float(r))
    return None


def inverse_scaling_condition() -> list:
    """σ(αa)·(b/α) = σ(a)·b for all a, b  ⇔  σ(αa) = α·σ(a) (put b = 1): 1-homogeneity at α."""
    condition = sp.Eq(sigma(alpha * a) * b / alpha, sigma(a) * b)
    at_b1 = condition.subs(b, 1)
    return [("for all a, b", sp.latex(condition)), ("put b = 1", sp.latex(at_b1)),
            ("equivalently", sp.latex(sp.Eq(sigma(alpha * a),
                                            sp.solve(at_b1, sigma(alpha * a))[0])))]


def inverse_scaling_holds(name: str, alpha_sign: str) -> bool:
    """Does σ(αa)(b/α) = σ(a) b hold for all real a, b and all α of the given sign?

    Proved by cases a > 0, a < 0, a = 0 with sympy's positive symbols (so Max(0, α a)
    resolves); disproved by an exact point where the residual is nonzero."""
    t, al = sp.symbols("t alpha_p", positive=True)
    alpha_s = al if alpha_sign == "positive" else -al
    f = ACTIVATIONS[name]
    resid = f.subs(z, alpha_s * a) * b / alpha_s - f.subs(z, a) * b
    cases = [resid.subs(a, t), resid.subs(a, -t), resid.subs(a, 0)]
    if all(sp.simplify(r) == 0 for r in cases):
        return True
    for av in (1, -1, sp.Rational(1, 2)):
        for alv in (2, sp.Rational(1, 2)):
            v = resid.subs({a: av, b: 1, al: alv})
            if sp.simplify(v) != 0:
                return False
    raise RuntimeError(f"could not decide inverse scaling for {name} ({alpha_sign} α)")


def inverse_scaling_counterexample(name: str, alpha_value) -> Counterexample | None:
    """An exact point (a, b=1) where σ(αa)·(b/α) − σ(a)·b ≠ 0, for the given α."""
    f = ACTIVATIONS[name]
    al = sp.nsimplify(alpha_value)
    for pa in sorted(_grid(), key=lambda v: (abs(v), v)):
        r = sp.simplify(f.subs(z, al * pa) / al - f.subs(z, pa))
        if not r.free_symbols and r.is_zero is False:
            return Counterexample(name, {"alpha": al, "a": pa, "b": 1}, r, float(r))
    return None


def symmetric_invariance() -> dict[str, Identity]:
    """Eq. (4) keeps both symmetries for an arbitrary σ: σ(ab) = σ(ba), σ((αa)(b/α)) = σ(ab)."""
    exch = Identity("exchange", sigma(a * b), sigma(b * a), _is_zero(sigma(a * b) - sigma(b * a)))
    lhs = sigma((alpha * a) * (b / alpha))
    inv = Identity("inverse-scaling", lhs, sigma(a * b), _is_zero(lhs - sigma(a * b)))
    return {"exchange": exch, "inverse-scaling": inv}


def rejects_perturbation(identity: Identity) -> bool:
    """The negative control of a proof: the same check on a statement that must be false —
    the right side with one of its symbols doubled — must *not* reduce to zero. True when the
    checker rejects it (so a `holds = True` means something)."""
    syms = sorted(identity.rhs.free_symbols & identity.lhs.free_symbols, key=lambda s: s.name)
    if not syms:
        return False
    s = syms[0]
    wrong = identity.rhs.subs(s, 2 * s)
    return not _is_zero(identity.lhs - wrong)
