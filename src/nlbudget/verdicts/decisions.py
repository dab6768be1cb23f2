"""Decisions and the rules that make them: the verdict words, what a decision finds, and the
rules (`effect`, `beyond`, `null`, `any_of`, `share_of`, `derivation`, `combine`, `all_of`,
`by_parts`, `majority`) that turn an interval or a count into a `Decision`. `claims` builds the
ledger's rows from them (and re-exports them: chapters import both from there)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from nlbudget.verdicts import stats

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN, PARTLY = (
    "reproduced", "not reproduced", "inconclusive", "not run", "partly")
TRANSFERS, PARTLY_TRANSFERS, DOES_NOT_TRANSFER = (
    "transfers", "partly transfers", "does not transfer")
#: What `reproduced`, `partly` and `not reproduced` read as where a transfer alone decides.
TRANSFER_WORDS = {REPRODUCED: TRANSFERS, PARTLY: PARTLY_TRANSFERS,
                  NOT_REPRODUCED: DOES_NOT_TRANSFER}
VERDICTS = (REPRODUCED, TRANSFERS, PARTLY, PARTLY_TRANSFERS, NOT_REPRODUCED, DOES_NOT_TRANSFER,
            INCONCLUSIVE, NOT_RUN)
#: The verdicts that decide: a row may carry one only if its positive control passed.
DECIDING = (REPRODUCED, TRANSFERS, PARTLY, PARTLY_TRANSFERS, NOT_REPRODUCED, DOES_NOT_TRANSFER)

#: Training claims: fewer seeds than this never decide (a single seed is never evidence).
MIN_SEEDS = 2


#: What a decision finds about the measured effect, so that a failed positive control blocks
#: only the findings its failure could produce (`controls.Control.guards`): an effect
#: (POSITIVE), no effect or less than the margin (NEGATIVE).
POSITIVE, NEGATIVE = "positive", "negative"


@dataclass(frozen=True)
class Decision:
    """A verdict, the one-line reason the rule gives for it, and what it finds about the
    measured effect (`finds`: POSITIVE, NEGATIVE, or "" where the rule does not say — then any
    failed control blocks it). A decision combined from parts keeps them (`parts`, and `join`:
    "parts" for a claim's stated parts, "all" for one claim on several models or settings), so
    that a control can block the parts it guards and leave the others."""

    verdict: str
    reason: str
    finds: str = ""
    parts: dict = field(default_factory=dict, compare=False)
    join: str = ""


def _finding(verdict: str, claims: str) -> str:
    """What a verdict finds, for a rule whose `reproduced` finds `claims` (POSITIVE: the claim
    asserts an effect; NEGATIVE: it asserts none, or one within a margin)."""
    if claims not in (POSITIVE, NEGATIVE):
        raise ValueError(f"claims {claims!r} is not one of {(POSITIVE, NEGATIVE)}")
    other = NEGATIVE if claims == POSITIVE else POSITIVE
    return {REPRODUCED: claims, NOT_REPRODUCED: other}.get(verdict, "")


def _decision(verdict: str, reason: str, claims: str = POSITIVE) -> Decision:
    return Decision(verdict, reason, _finding(verdict, claims))


# ------------------------------------------------------------------ rules


def effect(lo: float | None, hi: float | None, *, min_effect: float = 0.0,
           what: str = "effect", claims: str = POSITIVE) -> Decision:
    """A directional claim, oriented so that the claimed effect is positive, judged on an
    interval [lo, hi] of the effect against its control.

    * not reproduced — hi < min_effect: the interval excludes an effect of the size that
      counts (with min_effect = 0: the effect is significant the other way);
    * reproduced — lo > 0: present, in the claimed direction, beyond the uncertainty;
    * inconclusive — otherwise: the interval holds both.

    `claims`: what `reproduced` finds — POSITIVE where the oriented quantity is the effect
    itself, NEGATIVE where it is a margin minus the effect (a non-inferiority claim, "costs
    nothing": its `reproduced` finds no cost).
    """
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return Decision(INCONCLUSIVE, f"no interval for the {what}")
    if hi < min_effect:
        size = f"{min_effect:+.3g}" if min_effect else "0"
        return _decision(NOT_REPRODUCED, f"the interval of the {what} [{lo:+.3g}, {hi:+.3g}] "
                         f"lies below {size}", claims)
    if lo > 0:
        return _decision(REPRODUCED, f"the interval of the {what} [{lo:+.3g}, {hi:+.3g}] "
                         "lies above 0", claims)
    return Decision(INCONCLUSIVE, f"the interval of the {what} [{lo:+.3g}, {hi:+.3g}] "
                    f"holds both 0 and {min_effect:+.3g}" if min_effect else
                    f"the interval of the {what} [{lo:+.3g}, {hi:+.3g}] holds 0")


def beyond(lo: float | None, hi: float | None, margin: float, *,
           what: str = "effect") -> Decision:
    """A claim that the effect (oriented so the claim is positive) exceeds `margin` — a
    superiority rule, or, with the quantity margin − cost, a non-inferiority one: `effect` on
    the interval shifted by the margin. Reproduced when the interval lies above the margin, not
    reproduced when below it. The one rule the chapters and the exercises decide with, and
    whose edge `runs_to_decide` counts seeds against."""
    shift = (lambda x: None if x is None else x - margin)
    return effect(shift(lo), shift(hi), what=f"{what} beyond {margin:g}" if margin else what)


def null(lo: float | None, hi: float | None, *, margin: float, what: str = "effect") -> Decision:
    """A claim of *no* effect ("does not transfer", "adds nothing"), judged on an interval of
    the effect with an equivalence margin: reproduced if the interval lies inside
    (−margin, margin); not reproduced if it lies wholly outside; inconclusive otherwise."""
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return Decision(INCONCLUSIVE, f"no interval for the {what}")
    span = f"[{lo:+.3g}, {hi:+.3g}]"
    if -margin < lo and hi < margin:
        return _decision(REPRODUCED, f"the interval of the {what} {span} lies within "
                         f"±{margin:g}", NEGATIVE)
    if lo >= margin or hi <= -margin:
        return _decision(NOT_REPRODUCED, f"the interval of the {what} {span} lies outside "
                         f"±{margin:g}", NEGATIVE)
    return Decision(INCONCLUSIVE, f"the interval of the {what} {span} crosses ±{margin:g}")


def any_of(intervals: dict, *, what: str = "effect") -> Decision:
    """"Some of these show the effect" (each interval oriented so the effect is positive and
    already corrected for multiplicity, e.g. at `stats.bonferroni(len(intervals))`):
    reproduced if any interval lies above 0; not reproduced if every interval lies below 0;
    inconclusive otherwise."""
    if not intervals:
        return Decision(INCONCLUSIVE, "nothing was measured")
    above = [k for k, (lo, hi) in intervals.items() if lo > 0]
    if above:
        return _decision(REPRODUCED, f"{len(above)} of {len(intervals)} corrected intervals "
                         f"of the {what} lie above 0")
    if all(hi < 0 for lo, hi in intervals.values()):
        return _decision(NOT_REPRODUCED, f"all {len(intervals)} corrected intervals of the "
                         f"{what} lie below 0")
    return Decision(INCONCLUSIVE, f"no corrected interval of the {what} lies above 0, and "
                    f"{sum(hi >= 0 for _, hi in intervals.values())} of {len(intervals)} hold 0")


def share_of(intervals: dict, *, share: float, what: str = "effect",
             claims: str = POSITIVE) -> Decision:
    """"At least `share` of these show the effect" (intervals oriented, corrected): reproduced
    if at least that share lie above 0; not reproduced if more than 1 − share lie below 0
    (the share cannot be reached); inconclusive otherwise."""
    n = len(intervals)
    if not n:
        return Decision(INCONCLUSIVE, "nothing was measured")
    above = sum(lo > 0 for lo, _ in intervals.values())
    below = sum(hi < 0 for _, hi in intervals.values())
    text = (f"{above} of {n} corrected intervals of the {what} lie above 0, {below} below "
            f"(needed: {share:.0%} above)")
    if above >= share * n:
        return _decision(REPRODUCED, text, claims)
    if n - below < share * n:
        return _decision(NOT_REPRODUCED, text, claims)
    return Decision(INCONCLUSIVE, text)


def derivation(proved: bool | None, checks: dict[str, bool],
               controls: dict[str, bool]) -> Decision:
    """A derivation: the proof (sympy) and its numerical checks must hold, and the negative
    controls — the same checker on a statement that must *fail* — must fail, or the check
    has no power. `controls` maps each control to whether it was (correctly) rejected.
    `proved` None: no symbolic check exists for the step (the reason says so)."""
    if not all(controls.values()):
        bad = [k for k, v in controls.items() if not v]
        return Decision(INCONCLUSIVE, f"a control the check should reject passed ({bad}): "
                        "the check cannot tell")
    if proved is None and all(checks.values()):  # no symbolic check exists for this step
        return Decision(REPRODUCED, "the numerical checks hold (there is no symbolic check of "
                        "this step) and the controls fail as they must")
    if proved and all(checks.values()):
        return Decision(REPRODUCED, "the symbolic check holds (a proof, or an identity at the "
                        "sizes checked: see what the row can show), "
                        + ("the numerical checks hold" if checks else
                           "no numerical check is run for this step")
                        + ", and the controls fail as they must")
    failed = ([] if proved in (True, None) else ["proof"]) + [k for k, v in checks.items() if not v]
    return Decision(NOT_REPRODUCED, f"failed: {', '.join(failed)}")


def combine(parts: dict[str, str]) -> Decision:
    """A claim of several stated parts, each with its own verdict."""
    vs = [v for v in parts.values() if v != NOT_RUN]
    if not vs:
        return Decision(NOT_RUN, "no part was measured")
    if all(v == REPRODUCED for v in vs) and len(vs) == len(parts):
        return Decision(REPRODUCED, "every part holds")
    if REPRODUCED in vs:
        held = [p for p, v in parts.items() if v == REPRODUCED]
        return Decision(PARTLY, "holds: " + ", ".join(held) + "; not: " + ", ".join(
            f"{p} ({v})" for p, v in parts.items() if v != REPRODUCED))
    if all(v == NOT_REPRODUCED for v in vs):
        return Decision(NOT_REPRODUCED, "no part holds")
    return Decision(INCONCLUSIVE, "no part holds beyond the uncertainty: " + ", ".join(
        f"{p} ({v})" for p, v in parts.items()))


def needs_seeds(decision: Decision, n_seeds: int, *, minimum: int = MIN_SEEDS) -> Decision:
    """A training claim is never decided by a single seed: below `minimum` seeds a
    reproduced or not-reproduced decision becomes inconclusive."""
    if n_seeds >= minimum or decision.verdict not in DECIDING:
        return decision
    return Decision(INCONCLUSIVE, f"{n_seeds} seed(s): a training claim needs ≥ {minimum} "
                    f"(the single-seed reading: {decision.verdict}, {decision.reason})")


def over_runs(values, what: str) -> Decision:
    """A directional effect measured once per run (seeds, or the stored runs of one budget):
    `effect` on the t interval over the runs; fewer than MIN_SEEDS runs never decide
    (`needs_seeds`), the single run's reading kept in the reason."""
    v = [float(x) for x in values]
    lo, hi = (v[0], v[0]) if len(v) == 1 else stats.t_interval(v)[1:]
    return needs_seeds(effect(lo, hi, what=what), len(v))


def _common_finding(decisions) -> str:
    """The finding shared by every deciding decision ("" where they differ or none decides)."""
    fs = {d.finds for d in decisions if d.verdict in DECIDING}
    return fs.pop() if len(fs) == 1 else ""


def all_of(decisions: dict[str, Decision]) -> Decision:
    """One claim tested on several models (not several stated parts): reproduced if it holds on
    every model, not reproduced if it fails beyond the uncertainty on any, else inconclusive.
    A model whose evidence cannot answer the claim (`not run`) is left out and named first: the
    verdict is that of the models judged, and says which they are."""
    vs = {k: d.verdict for k, d in decisions.items() if d.verdict != NOT_RUN}
    text = "; ".join(f"{k}: {d.verdict} ({d.reason})" for k, d in decisions.items())
    if vs and len(vs) < len(decisions):  # a model that cannot be judged is said, not counted
        text = (f"judged on {', '.join(vs)} alone ({len(decisions) - len(vs)} of "
                f"{len(decisions)} not run): " + text)
    keep = dict(parts=dict(decisions), join="all")
    if not vs:
        return Decision(NOT_RUN, text, **keep)
    if all(v == REPRODUCED for v in vs.values()):
        return Decision(REPRODUCED, text, _common_finding(decisions.values()), **keep)
    if NOT_REPRODUCED in vs.values():
        return Decision(NOT_REPRODUCED, text, _common_finding(
            d for d in decisions.values() if d.verdict == NOT_REPRODUCED), **keep)
    return Decision(INCONCLUSIVE, text, **keep)


def by_parts(decisions: dict[str, Decision]) -> tuple[Decision, dict[str, str]]:
    """`combine` for parts each decided by a rule: the combined decision, with every part's
    reason, and the parts' verdicts (for `Claim.parts`)."""
    parts = {k: d.verdict for k, d in decisions.items()}
    verdict = combine(parts).verdict
    held = [d for d in decisions.values() if d.verdict == REPRODUCED] if verdict == PARTLY \
        else list(decisions.values())
    return Decision(verdict, "; ".join(d.reason for d in decisions.values()),
                    _common_finding(held), dict(decisions), "parts"), parts


def majority(decisions: list[Decision], share: float, what: str, unit: str = "layers") -> Decision:
    """Per-unit decisions (one per layer, say) → one: reproduced if at least `share` of them
    reproduce, not reproduced if the rest cannot reach it, inconclusive otherwise."""
    n = len(decisions)
    yes = sum(d.verdict == REPRODUCED for d in decisions)
    no = sum(d.verdict == NOT_REPRODUCED for d in decisions)
    text = f"{what}: {yes} of {n} {unit} hold, {no} do not (needed: {share:.0%})"
    if yes >= share * n:
        return Decision(REPRODUCED, text, _common_finding(
            d for d in decisions if d.verdict == REPRODUCED))
    if n - no < share * n:
        return Decision(NOT_REPRODUCED, text, _common_finding(
            d for d in decisions if d.verdict == NOT_REPRODUCED))
    return Decision(INCONCLUSIVE, text)
