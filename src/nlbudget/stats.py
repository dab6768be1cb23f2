"""Intervals the verdicts use: over seeds (Student t, Welch, paired t — scipy's), over evaluation
windows or items (percentile and paired bootstrap), and for correlations (Fisher z, scipy's).
Each returns (estimate, lo, hi) or (lo, hi) as its docstring says; `nan` where undefined."""

from __future__ import annotations

import math

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


def bootstrap_ppl_ratio(base, new, n_boot: int = 1000, seed: int = 0,
                        level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the relative perplexity change exp(mean(new) − mean(base)) − 1,
    resampling evaluation windows (rows of the per-token loss arrays) in pairs."""
    b = np.asarray(base, dtype=np.float64).sum(1)
    s = np.asarray(new, dtype=np.float64).sum(1)
    n_tok = np.asarray(base).shape[1]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(b), size=(n_boot, len(b)))
    costs = np.exp((s[idx].sum(1) - b[idx].sum(1)) / (idx.shape[1] * n_tok)) - 1
    lo, hi = np.quantile(costs, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bootstrap_paired(base, new, stat: str = "ratio", n_boot: int = 1000, seed: int = 0,
                     level: float = 0.95):
    """Percentile interval of mean(new)/mean(base) − 1 (`ratio`) or mean(new) − mean(base)
    (`diff`), resampling items in pairs; (None, None) if no resample is defined."""
    a, b = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(n_boot, len(a)))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = b[idx].mean(1) / a[idx].mean(1) - 1 if stat == "ratio" else \
            b[idx].mean(1) - a[idx].mean(1)
    r = r[np.isfinite(r)]
    if not len(r):
        return None, None
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def n_to_resolve(sd: float, diff: float, level: float = 0.95) -> int | None:
    """Seeds (pairs) a t interval needs to exclude 0 when the true mean difference is `diff`
    and its spread over seeds `sd` (normal approximation); None if diff is 0 or sd undefined."""
    if not diff or not math.isfinite(sd) or not math.isfinite(diff):
        return None
    zq = _st.norm.ppf((1 + level) / 2)
    return int(math.ceil((zq * sd / abs(diff)) ** 2)) + 1
