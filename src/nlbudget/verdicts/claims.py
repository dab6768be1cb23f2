"""The claims ledger's vocabulary, and the rules that turn measurements into verdicts.

Every verdict of the book comes from a claim function in a chapter module
(`nlbudget.chapters.chNN_*`), built from the helpers here. A verdict compares with the control
the claim names, and uses an interval:

* `reproduced` — the claimed effect is present, in the claimed direction, beyond the
  uncertainty, against the named control;
* `not reproduced` — the uncertainty excludes the claimed effect, or the effect is significant
  the other way;
* `inconclusive` — the uncertainty holds both; the row says what budget would decide it;
* `not run` — not measured at this profile, with the reason;
* `partly` — a claim of several stated parts, of which some hold: the row names each part's
  verdict;
* `transfers` / `does not transfer` — what `reproduced` / `not reproduced` read as where the
  only decided evidence is a *transfer*: the paper's question asked of another model than
  the paper's (a claim tested on SmolLM2 alone never reads `not reproduced`).

Before a rule may decide, the experiment passes its positive control
(`nlbudget.verdicts.controls`): a failed control gives `inconclusive`, naming it. Each paper row
carries up to three pieces of `EVIDENCE`, each with its own verdict — the authors' own data
re-analysed with the same rule, a reproduction in the paper's setting as near as this machine
allows, a transfer to another model — and its headline verdict follows `HEADLINE_RULE`.

How a row was obtained, in the ACM artifact-review sense: `replicated` (the book's own,
independent code), `reproduced` (the author's own code or data), `derived` (a proof).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from nlbudget.verdicts import stats
from nlbudget.verdicts.controls import Control

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN, PARTLY = (
    "reproduced", "not reproduced", "inconclusive", "not run", "partly")
TRANSFERS, DOES_NOT_TRANSFER = "transfers", "does not transfer"
VERDICTS = (REPRODUCED, TRANSFERS, PARTLY, NOT_REPRODUCED, DOES_NOT_TRANSFER, INCONCLUSIVE,
            NOT_RUN)
#: The verdicts that decide: a row may carry one only if its positive control passed.
DECIDING = (REPRODUCED, TRANSFERS, PARTLY, NOT_REPRODUCED, DOES_NOT_TRANSFER)
#: The kinds of evidence a paper row rests on: the authors' own result files re-analysed with
#: the same rule; the paper's setting (its model family, task, sizes) as near as this machine
#: allows; the paper's question asked of another model.
AUTHORS, REPRODUCTION, TRANSFER = "authors' data", "reproduction", "transfer"
EVIDENCE = (AUTHORS, REPRODUCTION, TRANSFER)
#: How a row's headline verdict follows from its evidence.
HEADLINE_RULE = ("the reproduction where it decides; else the authors' data where they "
                 "decide; else the transfer, whose words are `transfers` / `does not "
                 "transfer`; where nothing decides, `inconclusive` (or `not run` where "
                 "nothing was measured), with every failed positive control named")
#: paper: a claim of one of the papers; derivation: a step of a paper's argument, checked by
#: proof; book: a question the book asks itself (no paper predicts an answer).
KINDS = ("paper", "derivation", "book")
#: ACM artifact review: replicated = independent code; reproduced = the author's code or data.
OBTAINED = ("replicated", "reproduced", "derived")
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


@dataclass(frozen=True)
class Claim:
    """One row of the claims ledger: what the paper says, what the book measured, against
    which control, with which verdict."""

    id: str  # a row of data/claims.csv, which holds the paper's text
    measured: str  # the book's figures, as text
    verdict: str  # one of VERDICTS
    control: str = ""  # the comparison the verdict is made against
    reason: str = ""  # why the rule gave this verdict
    needs: str = ""  # inconclusive: the budget that would decide; not run: why not
    parts: dict = field(default_factory=dict)  # partly: each stated part's verdict
    author_data: str = ""  # what the author's own files say, where they exist
    scale: str = ""  # what the measurement rests on (model, tokens, steps, seeds)
    kind: str = "paper"  # one of KINDS
    obtained: str = "replicated"  # one of OBTAINED
    note: str = ""
    #: what the experiment had to show before the rule could decide (`controls.Control`):
    #: {what, measured, passed, fix}; passed None where nothing was trained or fitted
    positive_control: dict = field(default_factory=dict)
    #: {kind of EVIDENCE: {verdict, reason, measured, setting, positive_control, finds, reads}}
    evidence: dict = field(default_factory=dict)
    #: what the headline decision finds about the effect (POSITIVE, NEGATIVE, "")
    finds: str = ""
    #: what the row can show (`SHOWS`): "" for a test of the paper's claim
    shows: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        if not self.measured:
            raise ValueError(f"{self.id}: say what was measured (or that nothing was)")
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {KINDS}")
        if self.obtained not in OBTAINED:
            raise ValueError(f"obtained {self.obtained!r} is not one of {OBTAINED}")
        if self.verdict in (INCONCLUSIVE, NOT_RUN) and not self.needs:
            raise ValueError(f"{self.id}: an {self.verdict!r} verdict must say what it needs")
        if self.verdict in (REPRODUCED, NOT_REPRODUCED) and not self.control:
            raise ValueError(f"{self.id}: a {self.verdict!r} verdict must name its control")
        if self.verdict in DECIDING and blocked_by(self.positive_control, self.finds):
            raise ValueError(f"{self.id}: {self.verdict!r} although its positive control "
                             f"failed in the direction it guards "
                             f"({self.positive_control.get('what')})")
        if self.shows not in SHOWS:
            raise ValueError(f"{self.id}: shows {self.shows!r} is not one of {SHOWS}")
        for k, e in self.evidence.items():
            if k not in EVIDENCE:
                raise ValueError(f"{self.id}: evidence {k!r} is not one of {EVIDENCE}")
            if e["verdict"] in DECIDING and blocked_by(e.get("positive_control") or {},
                                                       e.get("finds", "")):
                raise ValueError(f"{self.id}: its {k} decides although its control failed "
                                 "in the direction it guards")
            if k != TRANSFER and e["verdict"] in (TRANSFERS, DOES_NOT_TRANSFER):
                raise ValueError(f"{self.id}: only a transfer reads {e['verdict']!r}")
        if self.verdict in (TRANSFERS, DOES_NOT_TRANSFER) and \
                (self.evidence.get(TRANSFER) or {}).get("verdict") != self.verdict:
            raise ValueError(f"{self.id}: {self.verdict!r} is a transfer's word; no transfer "
                             "evidence reads it")
        if self.verdict == PARTLY:
            held = [p for p, v in self.parts.items() if v == REPRODUCED]
            if len(self.parts) < 2 or not held or len(held) == len(self.parts):
                raise ValueError(f"{self.id}: 'partly' needs several parts, some holding: "
                                 f"{self.parts}")

    def as_dict(self) -> dict:
        return asdict(self)


def guarded(decision: Decision, control: Control | None) -> Decision:
    """`decision`, unless the positive control failed *in the direction it guards*
    (`Control.blocks`): then `inconclusive`, naming the failed control and what the rule alone
    would have said. A decision of several parts is guarded part by part and combined again:
    a control that guards the negative findings leaves the parts that found an effect."""
    if control is None or not control.failed:
        return decision
    if decision.parts:
        parts = {k: guarded(d, control) for k, d in decision.parts.items()}
        if parts == decision.parts:
            return decision
        again = (all_of(parts) if decision.join == "all" else by_parts(parts)[0])
        return Decision(again.verdict, f"{again.reason} — parts blocked by a failed control: "
                        f"{control.why()} (the rule alone would read {decision.verdict})",
                        again.finds, again.parts, again.join)
    if decision.verdict not in DECIDING or not control.blocks(decision.finds):
        return decision
    return Decision(INCONCLUSIVE, f"{control.why()} (the rule alone would read "
                    f"{decision.verdict}: {decision.reason})")


def stands_despite(decision: Decision, control: Control | None) -> str:
    """Where a failed control leaves a decision standing (it guards the other direction), the
    sentence that says so; "" otherwise."""
    if control is None or not control.failed or decision.verdict not in DECIDING:
        return ""
    if guarded(decision, control).verdict != decision.verdict:
        return ""
    return (f"stands although a control failed: it guards the {control.guards} findings, "
            f"and this one is {decision.finds or 'of several parts'} — {control.why()}")


#: What a row can show, where it is not a test of the paper's claim itself: a symbolic proof
#: for every size; an identity checked numerically at the sizes named; the author's number
#: against the author's own text; a test of the book's own construction or experiment (not
#: credited to the paper).
SHOWS = ("", "proved", "verified at the sizes checked", "consistency check",
         "the book's construction")

#: How a piece of evidence reads its figures: the author's point estimates (no interval: a
#: count or a comparison of points), intervals from paired data (windows, documents or seeds
#: that both arms share), or intervals over independent runs.
READS = ("points", "paired intervals", "intervals")


def blocked_by(control: dict, finds: str) -> bool:
    """Whether a stored control (`Control.as_dict`) blocks a decision finding `finds`."""
    if control.get("passed") is not False:
        return False
    g = control.get("guards", "both")
    return g == "both" or not finds or g == finds


def evidence(kind: str, decision: Decision, *, measured: str, setting: str = "",
             control: Control | None = None, reads: str = "intervals") -> dict:
    """One piece of a paper row's evidence: its kind (`EVIDENCE`), its own verdict — guarded
    by its positive control in the direction it guards, and in a transfer's words for a
    transfer — what it measured, in which setting (what differs from the paper's), what it
    finds and how it reads its figures (`READS`)."""
    if kind not in EVIDENCE:
        raise ValueError(f"evidence {kind!r} is not one of {EVIDENCE}")
    if reads not in READS:
        raise ValueError(f"reads {reads!r} is not one of {READS}")
    d = guarded(decision, control)
    verdict = ({REPRODUCED: TRANSFERS, NOT_REPRODUCED: DOES_NOT_TRANSFER}.get(d.verdict, d.verdict)
               if kind == TRANSFER else d.verdict)
    return {"verdict": verdict, "reason": d.reason, "measured": measured, "setting": setting,
            "positive_control": control.as_dict() if control else {}, "finds": d.finds,
            "reads": reads, "stands": stands_despite(d, control),
            "parts": {k: v.verdict for k, v in d.parts.items()} if d.join == "parts" else {}}


def headline(pieces: dict) -> tuple[str | None, Decision]:
    """A paper row's headline (`HEADLINE_RULE`) from its evidence: (the kind that sets it, its
    decision); kind None where nothing was measured."""
    for kind in (REPRODUCTION, AUTHORS, TRANSFER):
        e = pieces.get(kind)
        if e and e["verdict"] in DECIDING:
            return kind, Decision(e["verdict"], f"{kind}: {e['reason']}", e.get("finds", ""))
    undecided = [k for k in (REPRODUCTION, TRANSFER, AUTHORS) if k in pieces
                 and pieces[k]["verdict"] == INCONCLUSIVE]
    if undecided:
        return undecided[0], Decision(INCONCLUSIVE, "; ".join(
            f"{k}: {pieces[k]['reason']}" for k in undecided))
    first = next((k for k in (REPRODUCTION, TRANSFER, AUTHORS) if k in pieces), None)
    return first, Decision(NOT_RUN, "; ".join(f"{k}: {e['reason']}" for k, e in pieces.items())
                           or "nothing was measured")


def decided(claim_id: str, decision: Decision, *, positive: Control | None = None,
            tested: str | None = None, setting: str = "", authors: dict | None = None,
            reads: str = "intervals", **kw) -> Claim:
    """A Claim whose verdict and reason come from `decision` — guarded by its positive
    control `positive` — or, for a paper row, from its evidence (`headline`): the book's own
    experiment is the evidence of kind `tested` (in `setting`), beside the authors' data
    (`authors`, an `evidence` piece) where there are any. `needs` (what would decide it) is
    kept only where the verdict is inconclusive or not run, with any failed control first."""
    if positive is None and kw.get("kind") == "derivation":
        positive = Control("none needed: a proof, checked numerically (its negative controls "
                           "are in the rule)", "", None)
    own = guarded(decision, positive)
    pieces = {}
    if authors:
        pieces[AUTHORS] = authors
    if tested:
        pieces[tested] = evidence(tested, decision, measured=kw.get("measured", ""),
                                  setting=setting, control=positive, reads=reads)
    if pieces:
        kind, own = headline(pieces)
        pc = pieces[kind].get("positive_control", {}) if kind else {}
        if kind and pieces[kind].get("parts"):  # the parts as guarded
            kw["parts"] = pieces[kind]["parts"]
        # a paper row decided by the author's points: the author's numbers against the text
        if kind == AUTHORS and own.verdict in DECIDING and kw.get("kind", "paper") == "paper" \
                and pieces[AUTHORS].get("reads") == "points" and not kw.get("shows"):
            kw["shows"] = "consistency check"
    else:
        pc = positive.as_dict() if positive else {}
        if own.join == "parts":
            kw["parts"] = {k: v.verdict for k, v in own.parts.items()}
    failed = [c for c in (positive,) if c is not None and c.failed]
    if own.verdict not in (INCONCLUSIVE, NOT_RUN):
        kw["needs"] = ""
        stands = stands_despite(own, positive) if not pieces or kind == tested else ""
        if stands:
            kw["note"] = "; ".join(x for x in (kw.get("note", ""), stands) if x)
    elif failed:
        # where the rule alone decided and the control blocked it, the control is what would
        # decide it: the rule's own budget (more windows, more seeds) is not needed
        blocked = decision.verdict in DECIDING and not decision.parts and \
            guarded(decision, positive).verdict == INCONCLUSIVE
        kw["needs"] = "; ".join([f.why() for f in failed] + ([kw["needs"]] if kw.get("needs")
                                                             and not blocked else []))
    return Claim(claim_id, verdict=own.verdict, reason=own.reason, positive_control=pc,
                 evidence=pieces, finds=own.finds, **kw)


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


def derivation(proved: bool, checks: dict[str, bool], controls: dict[str, bool]) -> Decision:
    """A derivation: the proof (sympy) and its numerical checks must hold, and the negative
    controls — the same checker on a statement that must *fail* — must fail, or the check
    has no power. `controls` maps each control to whether it was (correctly) rejected."""
    if not all(controls.values()):
        bad = [k for k, v in controls.items() if not v]
        return Decision(INCONCLUSIVE, f"a control the check should reject passed ({bad}): "
                        "the check cannot tell")
    if proved and all(checks.values()):
        return Decision(REPRODUCED, "the symbolic check holds (a proof, or an identity at the "
                        "sizes checked: see what the row can show), the numerical checks hold, "
                        "and the controls fail as they must")
    failed = ([] if proved else ["proof"]) + [k for k, v in checks.items() if not v]
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
    every model, not reproduced if it fails beyond the uncertainty on any, else inconclusive."""
    vs = {k: d.verdict for k, d in decisions.items() if d.verdict != NOT_RUN}
    text = "; ".join(f"{k}: {d.verdict} ({d.reason})" for k, d in decisions.items())
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
