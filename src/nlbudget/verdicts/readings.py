"""How the rules read what they are given, beside the rules themselves (`claims`): an
author's file that holds point estimates, read as the author reports them (`points_within`,
`points_above`, `points_share`); a correlation a paper reports over n pairs
(`fisher_interval`); a family of rows at a false discovery rate (`fdr_discoveries`); and what
would decide an undecided row, counted against the rule's own edge (`runs_to_decide` over
seeds or runs, `windows_to_decide` over evaluation windows); a claim stated as "k of N" read
as a proportion (`k_of_n`)."""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from nlbudget.verdicts import stats
from nlbudget.verdicts.claims import (INCONCLUSIVE, NEGATIVE, NOT_REPRODUCED, POSITIVE,
                                      REPRODUCED, Decision, _decision, effect, needs_seeds)


def cheaper_edge(values, margin: float) -> float:
    """Of a gain rule's two edges — 0 (reproduced when the interval clears it) and `margin`
    (not reproduced when the interval ends below it) — the one more runs would reach most
    cheaply: the farther from the mean of `values`, among those on the side the mean lies."""
    return 0.0 if float(np.mean(values)) >= margin / 2 else margin


def last_gain(curve, steps: int) -> float | None:
    """A learning curve's ((step, value) points) gain over its last `steps` steps; None where
    it has no point `steps` before its last."""
    at = {int(n): a for n, a in curve or []}
    n = max(at, default=None)
    return None if n is None or n - steps not in at else at[n] - at[n - steps]


def stopped_short(runs, floor: float) -> list:
    """Runs of one arm ((value, steps, label) each) that a stop rule may have ended on a
    temporary plateau: below `floor`, stopped before the step at which the slowest run of the
    arm that reached `floor` did (a model can sit on a flat stretch for long, then climb).
    Their labels; none where no run reached `floor`."""
    climbed = [n for v, n, _ in runs if v >= floor and n]
    return [lab for v, n, lab in runs if climbed and v < floor and (n or 0) < max(climbed)]


def runs_to_decide(values, *, margin: float = 0.0, unit: str = "seeds",
                   level: float = 0.95) -> str:
    """The one power calculation of a rule decided over runs (`beyond`, `over_runs`): how many
    runs a t interval over the per-run `values` needs to clear `margin` (the rule's edge, not 0
    unless the rule's edge is 0) at the mean and spread seen; with the mean and spread it
    rests on (`stats.n_to_resolve` on the distance of the mean from the edge)."""
    v = np.asarray([float(x) for x in values], float)
    if len(v) < 2:
        return f"more {unit} (one run: the spread over {unit} is not yet estimable)"
    m, sd = float(v.mean()), float(v.std(ddof=1))
    edge = f"the rule's edge {margin:+.3g}" if margin else "0"
    n = t_runs(sd, m - margin, level)  # runs whose t interval excludes the edge
    if n is None:
        return f"the mean seen lies on {edge}: no number of {unit} decides it"
    more = f", {n - len(v)} more" if n > len(v) else ""
    return (f"about {n} {unit} in all{more} for a t interval to clear {edge} (mean {m:+.3g}, "
            f"s.d. {sd:.3g} over {len(v)} {unit})")


def t_runs(sd: float, diff: float, level: float = 0.95, most: int = 100_000) -> int | None:
    """The fewest runs n whose t interval (n − 1 degrees of freedom) around a mean `diff` with
    spread `sd` excludes 0: the same interval the rules decide with, so n is never at most the
    runs of an interval that did not clear (the normal approximation, `stats.n_to_resolve`,
    undercounts at few runs). None where diff is 0, sd undefined, or n exceeds `most`."""
    if not diff or not np.isfinite(sd) or not np.isfinite(diff):
        return None
    if sd == 0:
        return 2
    q = (1 + level) / 2
    n = 2
    while n <= most:
        if sps.t.ppf(q, n - 1) * sd / np.sqrt(n) < abs(diff):
            return n
        n = n + 1 if n < 1000 else int(n * 1.05)
    return None


def points_within(values, margin: float, what: str, unit: str = "layers") -> Decision:
    """A null claim read on point estimates (an author's file without intervals): reproduced
    if every value lies within ±margin, not reproduced if any lies beyond it."""
    v = np.asarray(values, float)
    text = (f"{what} {v.min():+.4f} to {v.max():+.4f} over {len(v)} {unit} (point estimates, "
            f"no interval), against ±{margin:g}")
    return _decision(REPRODUCED if np.all(np.abs(v) < margin) else NOT_REPRODUCED, text, NEGATIVE)


def points_above(values, edge: float, what: str, unit: str = "layers") -> Decision:
    """A claim "every one exceeds `edge`" read on point estimates (an author's file without
    intervals, read as the author reports it): reproduced if every value lies above the edge,
    not reproduced if any lies at or below it."""
    v = np.asarray(values, float)
    below = int(np.sum(v <= edge))
    text = (f"{what} {v.min():+.4f} to {v.max():+.4f} over {len(v)} {unit} (point estimates, "
            f"no interval): {len(v) - below} of {len(v)} above {edge:g}")
    return _decision(REPRODUCED if not below else NOT_REPRODUCED, text, POSITIVE)


def points_share(values, edge: float, share: float, what: str, *, below: bool = True,
                 unit: str = "layers", claims: str = POSITIVE,
                 whose: str = "the claim's") -> Decision:
    """A claim "`share` of the units lie below (`below`) or above `edge`", read on an
    author's point estimates as the author counts them (the paper's own denominator: pass
    exactly the units the paper counts): reproduced when the share of points on the claimed
    side reaches `share`, not reproduced when it does not. Points carry no uncertainty: this
    reads the author's numbers as reported, and says so."""
    v = np.asarray(values, float)
    k = int(np.sum(v < edge) if below else np.sum(v > edge))
    side = "below" if below else "above"
    pct = f"{share:.0%}" if round(share * 100, 6) == round(share * 100) else f"{share:.1%}"
    text = (f"{k} of {len(v)} {unit} {side} {edge:g} ({k / len(v):.1%}; point estimates as "
            f"the author reports them, no interval) against {whose} {pct}")
    return _decision(REPRODUCED if k >= share * len(v) else NOT_REPRODUCED, text, claims)


def fisher_interval(r: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Fisher-z interval of a correlation r reported over n pairs (a paper's table, with no
    pairs to resample)."""
    h = sps.norm.ppf(0.5 + level / 2) / np.sqrt(n - 3)
    return float(np.tanh(np.arctanh(r) - h)), float(np.tanh(np.arctanh(r) + h))


def windows_to_decide(rows: dict, windows: int, share: float) -> int | None:
    """A power calculation from a run's own intervals: how many windows would decide `share`
    of the rows. `rows` maps a row to (half-width of its interval, distance from its point to
    the edge it must clear); the half-width narrows as 1/√windows (windows are the resampled
    units), so a row needs windows × (half-width / distance)². Returns the count at which
    `share` of the rows decide (None: too many points lie on their edge)."""
    need = sorted(windows if hw < dist else int(np.ceil(windows * (hw / dist) ** 2))
                  for hw, dist in rows.values() if dist > 0 and np.isfinite(hw))
    k = int(np.ceil(share * len(rows)))
    return need[k - 1] if 0 < k <= len(need) else None


def fdr_discoveries(points: list, cis: list, q: float = 0.05) -> tuple[list[int], list[int]]:
    """The rows whose point lies below 0 and above 0 at a false discovery rate of `q` over the
    rows (Benjamini–Hochberg, scipy's): each row's two-sided p from its uncorrected 95 %
    interval by the normal approximation (se = width / 3.92)."""
    z = np.array([c / max((hi - lo) / (2 * 1.959964), 1e-12) for c, (lo, hi) in zip(points, cis)])
    found = sps.false_discovery_control(2 * sps.norm.sf(np.abs(z)), method="bh") < q
    return ([i for i in range(len(z)) if found[i] and z[i] < 0],
            [i for i in range(len(z)) if found[i] and z[i] > 0])


def k_of_n(k: int, k_not: int, n: int, paper_share: float, *, what: str = "layers",
           claims: str = POSITIVE) -> Decision:
    """A claim stated as "k of N" (e.g. "4 of 23 layers improve"), as a proportion with
    Clopper–Pearson intervals. Of `n` units, `k` show the effect beyond their (corrected)
    interval and `k_not` show its absence beyond it; the rest are undecided. Reproduced if the
    interval of k/n excludes 0 (some do, beyond chance); not reproduced if even counting every
    undecided unit as showing it, the interval of (n − k_not)/n lies below the paper's share;
    inconclusive otherwise."""
    share, lo, _ = stats.proportion_interval(k, n)
    _, _, hi = stats.proportion_interval(n - k_not, n)
    points = "point estimates" in what
    how = "by point estimate" if points else "beyond their intervals"
    text = (f"{k} of {n} {what.replace(' (point estimates)', '')} {how} ({share:.0%}, "
            f"Clopper–Pearson lower "
            f"{lo:.0%}), {k_not} {'do not, by point estimate' if points else 'clearly do not'}"
            f" (at most {hi:.0%} could), against the paper's {paper_share:.0%}")
    if lo > 0:
        return _decision(REPRODUCED, text, claims)
    if hi < paper_share:
        return _decision(NOT_REPRODUCED, text, claims)
    return Decision(INCONCLUSIVE, text)


def some_of(k: int, k_not: int, n: int, what: str, claims: str = POSITIVE) -> Decision:
    """A question "do *some* units show it?" (no share stated): reproduced if at least one of
    the `n` shows it beyond its interval (or by its point, for an author's points), not
    reproduced if every one clearly does not, inconclusive otherwise."""
    points = "point estimates" in what
    how = "by point estimate" if points else "beyond their intervals"
    text = (f"{k} of {n} {what.replace(' (point estimates)', '')} {how}, {k_not} "
            f"{'do not, by point estimate' if points else 'clearly do not'} (the question: "
            "does any?)")
    if k > 0:
        return _decision(REPRODUCED, text, claims)
    if k_not == n:
        return _decision(NOT_REPRODUCED, text, claims)
    return Decision(INCONCLUSIVE, text)


def accuracy_at_least(vals, target: float, what: str, n_test: int, why: str = "") -> Decision:
    """Accuracies over seeds against `target`. The interval is the union of two: a binomial
    one (the correct answers of every seed's `n_test` held-out strings pooled, Clopper–Pearson:
    never zero-width, even at 100 %) and a t interval over seeds (the spread between seeds,
    which pooling hides), kept inside [0, 1]. Reproduced if it lies above the target, not
    reproduced if below;
    fewer than MIN_SEEDS seeds never decide."""
    k = int(round(sum(a * n_test for a in vals)))
    _, blo, bhi = stats.proportion_interval(k, n_test * len(vals))
    _, tlo, thi = stats.t_interval(vals) if len(vals) > 1 else (None, blo, bhi)
    lo, hi = max(min(blo, tlo), 0.0), min(max(bhi, thi), 1.0)  # an accuracy lies in [0, 1]
    return needs_seeds(effect(lo - target, hi - target, what=f"accuracy − {target:.3g}"
                              + (f" ({why})" if why else "")), len(vals))
