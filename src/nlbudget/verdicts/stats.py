"""Intervals the verdicts use: over seeds (Student t, Welch, paired t — scipy's), over evaluation
windows or items (scipy's paired BCa bootstrap), for correlations (Fisher z, scipy's), for a
gate's AUC with windows resampled as groups (`bootstrap_auc`, `bootstrap_auc_diff`), and the
Bonferroni level of a family of intervals (`bonferroni`). Each returns (estimate, lo, hi) or (lo, hi) as its docstring says; `nan` where undefined."""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats as _st

NAN = float("nan")


def t_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval (over seeds, layers, …)."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return float(v.mean()) if len(v) else NAN, NAN, NAN
    if np.all(v == v[0]):
        return float(v[0]), float(v[0]), float(v[0])
    ci = _st.ttest_1samp(v, 0.0).confidence_interval(level)
    return float(v.mean()), float(ci.low), float(ci.high)


def welch_interval(a, b, level: float = 0.95) -> tuple[float, float, float]:
    """Difference of means a − b with a Welch t interval (independent samples, e.g. seeds of
    two arms that do not share batches)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return diff, NAN, NAN
    if a.var() == 0 and b.var() == 0:
        return diff, diff, diff
    ci = _st.ttest_ind(a, b, equal_var=False).confidence_interval(level)
    return diff, float(ci.low), float(ci.high)


def paired_interval(a, b, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of the paired differences a − b with a t interval (arms that share seeds and
    batches: the same seed trains both)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    return t_interval(d, level)


def correlation_interval(x, y, level: float = 0.95) -> tuple[float, float, float]:
    """Pearson r with its Fisher-z interval (nan with fewer than 4 pairs)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 4 or np.std(x) == 0 or np.std(y) == 0:
        return (float(np.corrcoef(x, y)[0, 1]) if len(x) >= 3 and np.std(x) and np.std(y)
                else NAN), NAN, NAN
    res = _st.pearsonr(x, y)
    ci = res.confidence_interval(level)
    return float(res.statistic), float(ci.low), float(ci.high)


def n_for_correlation(margin: float, level: float = 0.95) -> int:
    """Pairs needed for a Fisher-z interval of r around 0 to lie within ±margin."""
    zq = _st.norm.ppf((1 + level) / 2)
    return int(math.ceil((zq / math.atanh(margin)) ** 2 + 3))


def spearman_interval(x, y, level: float = 0.95) -> tuple[float, float, float]:
    """Spearman ρ with a Fisher-z interval (Bonett–Wright standard error √((1+ρ²/2)/(n−3)))."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < 4 or np.std(x) == 0 or np.std(y) == 0:
        return NAN, NAN, NAN
    rho = float(_st.spearmanr(x, y).statistic)
    zq = _st.norm.ppf((1 + level) / 2)
    se = math.sqrt((1 + rho**2 / 2) / (n - 3))
    z = math.atanh(max(-0.999999, min(0.999999, rho)))
    return rho, math.tanh(z - zq * se), math.tanh(z + zq * se)


def _bca(data: tuple, statistic, n_boot: int, seed: int, level: float) -> tuple[float, float]:
    """scipy's paired BCa bootstrap interval of `statistic(*data, axis)`; the percentile
    interval of the same resamples where BCa is undefined (too few items, or a resampled
    statistic that does not vary), the point itself for one item (as a percentile bootstrap
    of one item gives), and (nan, nan) where no resample is finite."""
    if len(data[0]) < 2:
        with np.errstate(divide="ignore", invalid="ignore"):
            x = float(statistic(*data, axis=-1))
        return (x, x) if np.isfinite(x) else (NAN, NAN)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on degenerate data; handled below
        res = _st.bootstrap(data, statistic, n_resamples=n_boot, paired=True, vectorized=True,
                            confidence_level=level, method="BCa",
                            rng=np.random.default_rng(seed))
    lo, hi = res.confidence_interval
    if np.isfinite(lo) and np.isfinite(hi):
        return float(lo), float(hi)
    dist = res.bootstrap_distribution[np.isfinite(res.bootstrap_distribution)]
    if not len(dist):
        return NAN, NAN
    lo, hi = np.quantile(dist, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bootstrap_ppl_ratio(base, new, n_boot: int = 1000, seed: int = 0,
                        level: float = 0.95) -> tuple[float, float]:
    """BCa interval (`_bca`) of the relative perplexity change exp(mean(new) − mean(base)) − 1,
    resampling evaluation windows (rows of the per-token loss arrays) in pairs."""
    b = np.asarray(base, dtype=np.float64).mean(1)
    s = np.asarray(new, dtype=np.float64).mean(1)
    return _bca((b, s), lambda b, s, axis: np.expm1(s.mean(axis) - b.mean(axis)), n_boot,
                seed, level)


def bootstrap_paired(base, new, stat: str = "ratio", n_boot: int = 1000, seed: int = 0,
                     level: float = 0.95):
    """BCa interval (`_bca`) of mean(new)/mean(base) − 1 (`ratio`) or mean(new) − mean(base)
    (`diff`), resampling items in pairs; (None, None) if no resample is defined."""
    a, b = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)

    def statistic(a, b, axis):
        return (b.mean(axis) / a.mean(axis) - 1 if stat == "ratio"
                else b.mean(axis) - a.mean(axis))

    lo, hi = _bca((a, b), statistic, n_boot, seed, level)
    return (None, None) if not np.isfinite(lo) else (lo, hi)


def n_to_resolve(sd: float, diff: float, level: float = 0.95) -> int | None:
    """Seeds (pairs) a t interval needs to exclude 0 when the true mean difference is `diff`
    and its spread over seeds `sd` (normal approximation); None if diff is 0 or sd undefined."""
    if not diff or not math.isfinite(sd) or not math.isfinite(diff):
        return None
    zq = _st.norm.ppf((1 + level) / 2)
    return int(math.ceil((zq * sd / abs(diff)) ** 2)) + 1


def proportion_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float, float]:
    """k successes of n as a share with its Clopper–Pearson (exact binomial) interval, scipy's:
    (k/n, lo, hi); never zero-width (0 of n gives [0, hi > 0], n of n gives [lo < 1, 1])."""
    if n <= 0:
        return NAN, NAN, NAN
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return k / n, float(ci.low), float(ci.high)


def bonferroni(n: int, alpha: float = 0.05) -> float:
    """The per-interval confidence level that keeps a family of `n` intervals at 1 − alpha
    (e.g. one interval per layer, for a claim about "any layer")."""
    return 1 - alpha / max(1, n)


# --- the AUC of a gate, with tokens grouped by window ------------------------------------

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
