"""The verdict vocabulary and the rules every claim function is built from."""

import math

import numpy as np
import pytest

from nlbudget.verdicts import claims, readings, stats
from nlbudget.verdicts.claims import (INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, PARTLY, REPRODUCED, Claim,
                             Decision)


def test_claim_rows_must_be_complete():
    with pytest.raises(ValueError, match="not one of"):
        Claim("X", "m", "sort of")
    with pytest.raises(ValueError, match="must say what it needs"):
        Claim("X", "m", INCONCLUSIVE)
    with pytest.raises(ValueError, match="must say what it needs"):
        Claim("X", "m", NOT_RUN)
    with pytest.raises(ValueError, match="name its control"):
        Claim("X", "m", REPRODUCED)
    with pytest.raises(ValueError, match="several parts"):
        Claim("X", "m", PARTLY, parts={"a": REPRODUCED})
    with pytest.raises(ValueError, match="several parts"):
        Claim("X", "m", PARTLY, parts={"a": REPRODUCED, "b": REPRODUCED})
    with pytest.raises(ValueError, match="kind"):
        Claim("X", "m", NOT_RUN, needs="n", kind="opinion")
    Claim("X", "m", PARTLY, parts={"a": REPRODUCED, "b": NOT_RUN})
    Claim("X", "m", REPRODUCED, control="c")


def test_decided_keeps_needs_only_where_undecided():
    c = claims.decided("X", Decision(REPRODUCED, "r"), measured="m", control="c", needs="n")
    assert c.needs == "" and c.reason == "r"
    c = claims.decided("X", Decision(INCONCLUSIVE, "r"), measured="m", needs="n")
    assert c.needs == "n"


@pytest.mark.parametrize("lo,hi,min_effect,verdict", [
    (0.1, 0.3, 0.0, REPRODUCED),
    (-0.3, -0.1, 0.0, NOT_REPRODUCED),  # significant the other way
    (-0.1, 0.1, 0.0, INCONCLUSIVE),  # no effect: never reproduced
    (0.01, 0.03, 0.05, NOT_REPRODUCED),  # present, but smaller than what counts
    (0.01, 0.3, 0.05, REPRODUCED),
    (-0.1, 0.3, 0.05, INCONCLUSIVE),
    (None, None, 0.0, INCONCLUSIVE),
    (math.nan, 1.0, 0.0, INCONCLUSIVE),
])
def test_effect(lo, hi, min_effect, verdict):
    assert claims.effect(lo, hi, min_effect=min_effect).verdict == verdict


@pytest.mark.parametrize("lo,hi,verdict", [
    (-0.05, 0.05, REPRODUCED), (0.3, 0.5, NOT_REPRODUCED), (-0.6, -0.25, NOT_REPRODUCED),
    (-0.1, 0.4, INCONCLUSIVE), (None, None, INCONCLUSIVE)])
def test_null(lo, hi, verdict):
    assert claims.null(lo, hi, margin=0.2).verdict == verdict


def test_any_of_and_share_of():
    assert claims.any_of({1: (-0.2, -0.1), 2: (0.01, 0.2)}).verdict == REPRODUCED
    assert claims.any_of({1: (-0.2, -0.1), 2: (-0.3, -0.01)}).verdict == NOT_REPRODUCED
    assert claims.any_of({1: (-0.2, 0.1), 2: (-0.3, -0.01)}).verdict == INCONCLUSIVE
    assert claims.any_of({}).verdict == INCONCLUSIVE
    ivs = {i: (0.1, 0.2) for i in range(7)} | {i: (-0.1, 0.1) for i in range(7, 10)}
    assert claims.share_of(ivs, share=0.7).verdict == REPRODUCED
    assert claims.share_of(ivs, share=0.8).verdict == INCONCLUSIVE
    ivs = {i: (-0.2, -0.1) for i in range(4)} | {i: (0.1, 0.2) for i in range(4, 10)}
    assert claims.share_of(ivs, share=0.7).verdict == NOT_REPRODUCED


def test_derivation_needs_its_control_to_fail():
    assert claims.derivation(True, {"n": True}, {"c": True}).verdict == REPRODUCED
    assert claims.derivation(False, {"n": True}, {"c": True}).verdict == NOT_REPRODUCED
    assert claims.derivation(True, {"n": False}, {"c": True}).verdict == NOT_REPRODUCED
    assert claims.derivation(True, {"n": True}, {"c": False}).verdict == INCONCLUSIVE


def test_combine_parts():
    assert claims.combine({"a": REPRODUCED, "b": REPRODUCED}).verdict == REPRODUCED
    assert claims.combine({"a": REPRODUCED, "b": NOT_REPRODUCED}).verdict == PARTLY
    assert claims.combine({"a": REPRODUCED, "b": NOT_RUN}).verdict == PARTLY
    assert claims.combine({"a": NOT_REPRODUCED, "b": NOT_REPRODUCED}).verdict == NOT_REPRODUCED
    assert claims.combine({"a": INCONCLUSIVE, "b": NOT_REPRODUCED}).verdict == INCONCLUSIVE
    assert claims.combine({"a": NOT_RUN, "b": NOT_RUN}).verdict == NOT_RUN


def test_all_of_models():
    r, n, i = (Decision(v, "") for v in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE))
    assert claims.all_of({"a": r, "b": r}).verdict == REPRODUCED
    assert claims.all_of({"a": r, "b": n}).verdict == NOT_REPRODUCED
    assert claims.all_of({"a": r, "b": i}).verdict == INCONCLUSIVE
    assert claims.all_of({"a": Decision(NOT_RUN, "")}).verdict == NOT_RUN


def test_a_single_seed_never_decides():
    d = Decision(REPRODUCED, "x")
    assert claims.needs_seeds(d, 1).verdict == INCONCLUSIVE
    assert claims.needs_seeds(Decision(NOT_REPRODUCED, "x"), 1).verdict == INCONCLUSIVE
    assert claims.needs_seeds(d, 3) is d
    assert stats.bonferroni(10) == pytest.approx(0.995)


# ------------------------------------------------------------------ stats


def test_t_and_welch_intervals_match_scipy_and_hand():
    m, lo, hi = stats.t_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and lo == pytest.approx(2 - 4.302653 / math.sqrt(3), rel=1e-5)
    assert stats.t_interval([5.0])[1] != stats.t_interval([5.0])[1]  # nan: one value
    d, lo, hi = stats.welch_interval([10, 11, 12], [1, 2, 3])
    assert d == 9 and lo > 0
    d, lo, hi = stats.paired_interval([1.0, 2.0, 3.5], [0.9, 1.8, 3.3])
    assert lo > 0  # paired: the seed-to-seed spread cancels
    assert stats.welch_interval([1.0, 2.0, 3.5], [0.9, 1.8, 3.3])[1] < 0


def test_correlation_interval_and_sample_size():
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    r, lo, hi = stats.correlation_interval(x, x + rng.normal(size=400))
    assert lo < r < hi and lo > 0.5
    r, lo, hi = stats.correlation_interval(x[:3], x[:3])
    assert math.isnan(lo)
    n = stats.n_for_correlation(0.2)
    r, lo, hi = stats.correlation_interval(x[:n], rng.normal(size=n))
    assert hi - lo < 0.45  # about ±0.2 around r
    rho, lo, hi = stats.spearman_interval(np.arange(30), np.arange(30) + rng.normal(size=30))
    assert lo > 0.5
    assert stats.n_to_resolve(1.0, 1.0) == 5 and stats.n_to_resolve(1.0, 0.0) is None


def test_proportion_interval_is_exact_and_never_zero_width():
    share, lo, hi = stats.proportion_interval(0, 30)
    assert share == 0 and lo == 0 and 0.1 < hi < 0.12  # Clopper–Pearson: 0.116
    share, lo, hi = stats.proportion_interval(30, 30)
    assert share == 1 and hi == 1 and 0.88 < lo < 0.9
    assert stats.proportion_interval(4, 23)[1] < 4 / 23 < stats.proportion_interval(4, 23)[2]


def test_k_of_n_reads_counts_as_a_proportion():
    assert readings.k_of_n(1, 29, 30, 4 / 23).verdict == REPRODUCED  # one improves, beyond chance
    assert readings.k_of_n(0, 30, 30, 4 / 23).verdict == NOT_REPRODUCED  # none could reach 4/23
    assert readings.k_of_n(0, 10, 10, 4 / 23).verdict == INCONCLUSIVE  # too few to tell
    assert readings.k_of_n(0, 0, 30, 4 / 23).verdict == INCONCLUSIVE  # all undecided


def test_window_intervals_are_scipys_bca():
    from scipy import stats as st
    rng = np.random.default_rng(1)
    base = rng.normal(3.0, 0.3, (12, 32))
    new = base + rng.exponential(0.05, (12, 1))  # a skewed per-window change
    lo, hi = stats.bootstrap_ppl_ratio(base, new, 10000, 0)
    ref = st.bootstrap((base.mean(1), new.mean(1)), lambda b, s, axis: np.expm1(
        s.mean(axis) - b.mean(axis)), n_resamples=10000, paired=True, method="BCa",
        rng=np.random.default_rng(0)).confidence_interval
    assert (lo, hi) == pytest.approx((ref.low, ref.high))
    assert lo < np.expm1((new - base).mean()) < hi and hi - lo > 0
    lo, hi = stats.bootstrap_paired(rng.integers(0, 2, 50), rng.integers(0, 2, 50), "diff")
    assert lo < hi  # 0/1 items with spread: never a zero-width interval


def test_power_calculation_counts_the_windows_that_would_decide():
    w = readings.windows_to_decide
    # decided already: the windows there are; twice the half-width of the distance: 4×
    assert w({"a": (0.01, 0.02), "b": (0.02, 0.01)}, 8, 0.5) == 8
    assert w({"a": (0.01, 0.02), "b": (0.02, 0.01)}, 8, 1.0) == 32
    assert w({"a": (0.03, 0.01), "b": (0.02, 0.01)}, 10, 0.5) == 40
    assert w({"a": (0.03, 0.0)}, 8, 1.0) is None  # a point on its edge never decides


def test_fdr_discoveries_split_by_sign_and_correct_over_rows():
    f = readings.fdr_discoveries
    # one clear improvement, one clear worsening, one on 0
    assert f([-0.05, 0.05, 0.0], [(-0.06, -0.04), (0.04, 0.06), (-0.01, 0.01)]) == ([0], [1])
    # p = 0.02 alone is a discovery; among 20 rows of p ≈ 1 it is not (BH: 0.02 · 20 > 0.05)
    se = 0.01 / 1.959964
    lone = [(-2.326 * se, (-2.326 * se - 0.01, -2.326 * se + 0.01))]
    assert f(*zip(*lone)) == ([0], [])
    many = lone + [(0.0, (-0.01, 0.01))] * 19
    assert f(*map(list, zip(*many))) == ([], [])
    # the rate is the caller's: at q = 0.5 it is found again
    assert f(*map(list, zip(*many)), q=0.5) == ([0], [])


def test_fisher_interval_matches_scipys_pearson_interval():
    rng = np.random.default_rng(0)
    x = rng.normal(size=60)
    y = 0.3 * x + rng.normal(size=60)
    r, lo, hi = stats.correlation_interval(x, y)
    assert readings.fisher_interval(r, 60) == pytest.approx((lo, hi), abs=1e-9)


def test_selection_corrected_mean_undoes_the_winners_curse():
    from nlbudget.chapters.ch04_adaptive_gating.authors_nofly import selection_corrected_mean
    # far above the cut and precise: selection changed nothing
    assert selection_corrected_mean(1.0, 0.1, 100, 0.05) == pytest.approx(1.0, abs=1e-3)
    # barely above a noisy cut: the true mean is most likely below the cut
    assert selection_corrected_mean(0.06, 0.5, 10, 0.05) < 0.05
    # never above what was observed, and it follows the observation
    lo, hi = (selection_corrected_mean(m, 0.3, 12, 0.05) for m in (0.1, 0.3))
    assert lo < hi <= 0.3
    # against simulation: tokens of true mean 0 selected for a mean above the cut
    rng = np.random.default_rng(0)
    means = rng.normal(0.0, 0.3 / math.sqrt(12), 20000)
    kept = means[means > 0.05]
    est = np.mean([selection_corrected_mean(m, 0.3, 12, 0.05) for m in kept[:400]])
    assert est < 0.0 < kept.mean()  # the kept means overstate; the correction errs low
