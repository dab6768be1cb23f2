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
* `transfers` / `partly transfers` / `does not transfer` — what `reproduced` / `partly` /
  `not reproduced` read as where the only decided evidence is a *transfer*: the paper's
  question asked of another model than the paper's (a claim tested on SmolLM2 alone never
  reads `not reproduced`).

Before a rule may decide, the experiment passes its positive control
(`nlbudget.verdicts.controls`): a failed control gives `inconclusive`, naming it. Each paper row
carries up to three pieces of `EVIDENCE`, each with its own verdict — the authors' own data
re-analysed with the same rule, a reproduction in the paper's setting as near as this machine
allows, a transfer to another model — and its headline verdict follows `HEADLINE_RULE`.

How a row was obtained, in the ACM artifact-review sense: `replicated` (the book's own,
independent code), `reproduced` (the author's own data, re-analysed), `derived` (a proof),
`verified` (an identity checked symbolically at one small size, not proved for every size),
`none` (nothing the book ran or re-analysed decides it). Computed from the row's evidence and
verdict (`Claim.__post_init__`), never set by hand against them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from nlbudget.verdicts.controls import Control
# the verdict words and the rules, re-exported: chapters import them from here
from nlbudget.verdicts.decisions import (  # noqa: F401
    DECIDING, DOES_NOT_TRANSFER, INCONCLUSIVE, MIN_SEEDS, NEGATIVE, NOT_REPRODUCED, NOT_RUN,
    PARTLY, PARTLY_TRANSFERS, POSITIVE, REPRODUCED, TRANSFER_WORDS, TRANSFERS, VERDICTS, Decision, _decision, _finding, all_of,
    any_of, beyond, by_parts, combine, derivation, effect, majority, needs_seeds, null,
    over_runs, share_of)

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
#: ACM artifact review: replicated = independent code; reproduced = the author's code or data;
#: derived = a proof; verified = an identity checked at the sizes shown; none = nothing decides.
OBTAINED = ("replicated", "reproduced", "derived", "verified", "none")
OBTAINED_WORDS = {"replicated": "(the book's own, independent code)",
                  "reproduced": "(the author's own data, re-analysed)", "derived": "(a proof)",
                  "verified": "(an identity checked symbolically at one small size, not "
                              "proved for every size)",
                  "none": "(nothing run or re-analysed decides it)"}

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
    #: where the row tests the book's construction, not the paper's object (BOOKS_CONSTRUCTION):
    #: what that construction shows — {verdict, reason, parts} — while the paper's claim reads
    #: `not run`
    construction: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "obtained", self._obtained())
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
            if k != TRANSFER and e["verdict"] in TRANSFER_WORDS.values():
                raise ValueError(f"{self.id}: only a transfer reads {e['verdict']!r}")
        if (self.evidence.get(TRANSFER) or {}).get("verdict") in (REPRODUCED, PARTLY,
                                                                 NOT_REPRODUCED):
            raise ValueError(f"{self.id}: a transfer reads in its own words "
                             f"({', '.join(TRANSFER_WORDS.values())})")
        if self.verdict in TRANSFER_WORDS.values() and \
                (self.evidence.get(TRANSFER) or {}).get("verdict") != self.verdict:
            raise ValueError(f"{self.id}: {self.verdict!r} is a transfer's word; no transfer "
                             "evidence reads it")
        if self.kind != "book" and self.shows == BOOKS_CONSTRUCTION and (
                self.verdict in DECIDING or any(
                    e["verdict"] in DECIDING for e in self.evidence.values()
                    if e.get("shows", BOOKS_CONSTRUCTION) == BOOKS_CONSTRUCTION)):
            raise ValueError(f"{self.id}: a {self.kind} row that tests the book's construction "
                             f"cannot read {self.verdict!r} for the paper's claim (`not run`, "
                             "with the construction's result in `construction`)")
        if headline(self.evidence)[0] == TRANSFER and any(
                v in (REPRODUCED, NOT_REPRODUCED) for v in self.parts.values()):
            raise ValueError(f"{self.id}: its parts rest on a transfer alone and must read "
                             f"{TRANSFERS!r} / {DOES_NOT_TRANSFER!r}: {self.parts}")
        if self.verdict in (PARTLY, PARTLY_TRANSFERS):
            held = [p for p, v in self.parts.items() if v in (REPRODUCED, TRANSFERS)]
            if len(self.parts) < 2 or not held or len(held) == len(self.parts):
                raise ValueError(f"{self.id}: 'partly' needs several parts, some holding: "
                                 f"{self.parts}")

    def _obtained(self) -> str:
        """How the row's verdict was obtained, from what decides it: nothing (`not run`,
        `inconclusive`) → none; a derivation shown only at the sizes checked →
        verified; the author's files setting the headline → reproduced; else the row's own
        (`derived` for a proof, `replicated` for the book's code)."""
        if self.verdict in (NOT_RUN, INCONCLUSIVE):  # nothing decides it
            return "none"
        if self.kind == "derivation":
            return "verified" if self.shows == "verified at the sizes checked" else "derived"
        if self.evidence:
            kind, _ = headline(self.evidence)
            decides = [k for k, e in self.evidence.items() if e["verdict"] in DECIDING]
            if kind == AUTHORS or (decides and set(decides) <= {AUTHORS}):
                return "reproduced"
        return self.obtained if self.obtained in OBTAINED else "replicated"

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
#: A row that tests the book's own construction or proxy in place of the paper's object (a
#: construction the paper's text does not give here, a module the paper only outlines, a
#: setting the book chose for a paper that predicts nothing): the paper's claim reads `not
#: run` (`paper_object`); what the book's construction shows is kept beside it
#: (`Claim.construction`).
BOOKS_CONSTRUCTION = "the book's construction"

#: How a piece of evidence reads its figures: the author's point estimates (no interval: a
#: count or a comparison of points), intervals from paired data (windows, documents or seeds
#: that both arms share), or intervals over independent runs.
READS = ("points", "paired intervals", "intervals")


def transfer_words(verdict: str) -> str:
    """A verdict in a transfer's words (`TRANSFER_WORDS`: `reproduced` → `transfers`, `partly`
    → `partly transfers`, `not reproduced` → `does not transfer`); any other verdict as it
    is."""
    return TRANSFER_WORDS.get(verdict, verdict)


def blocked_by(control: dict, finds: str) -> bool:
    """Whether a stored control (`Control.as_dict`) blocks a decision finding `finds`."""
    if control.get("passed") is not False:
        return False
    g = control.get("guards", "both")
    return g == "both" or not finds or g == finds


def evidence(kind: str, decision: Decision, *, measured: str, setting: str = "",
             control: Control | None = None, reads: str = "intervals",
             observational: bool = False) -> dict:
    """One piece of a paper row's evidence: its kind (`EVIDENCE`), its own verdict — guarded
    by its positive control in the direction it guards, and in a transfer's words for a
    transfer — what it measured, in which setting (what differs from the paper's), what it
    finds and how it reads its figures (`READS`). `observational`: models that differ in more
    than the cause the claim names (data, tokenizer, size): the piece shows the difference, not
    its cause, and never sets a causal row's headline alone (`headline`)."""
    if kind not in EVIDENCE:
        raise ValueError(f"evidence {kind!r} is not one of {EVIDENCE}")
    if reads not in READS:
        raise ValueError(f"reads {reads!r} is not one of {READS}")
    d = guarded(decision, control)
    words = transfer_words if kind == TRANSFER else (lambda v: v)
    return {"verdict": words(d.verdict), "reason": d.reason, "measured": measured,
            "setting": setting, "positive_control": control.as_dict() if control else {},
            "finds": d.finds, "reads": reads, "stands": stands_despite(d, control),
            "parts": ({k: words(v.verdict) for k, v in d.parts.items()} if d.join == "parts"
                      else {}), **({"observational": True} if observational else {})}


def paper_object(claim_id: str, decision: Decision, needs: str,
                 parts: dict | None = None) -> tuple[Decision, dict]:
    """A paper (or derivation) row whose experiment is the book's construction or proxy
    (BOOKS_CONSTRUCTION): the paper's claim is `not run`, saying what would test the paper's
    object (`needs`) and what the book's construction showed; returns that decision and the
    construction's own reading ({verdict, reason, parts}) for `Claim.construction`."""
    if not needs:
        raise ValueError(f"{claim_id}: say what would test the paper's object")
    kept = {"verdict": decision.verdict, "reason": decision.reason,
            "parts": dict(parts or {}) or {k: v.verdict for k, v in decision.parts.items()}}
    return Decision(NOT_RUN, "the paper's object is not tested here: the row tests the book's "
                    f"construction, which reads {decision.verdict} ({decision.reason})"), kept


def headline(pieces: dict) -> tuple[str | None, Decision]:
    """A paper row's headline (`HEADLINE_RULE`) from its evidence: (the kind that sets it, its
    decision); kind None where nothing was measured. An observational piece (`evidence`) shows
    a difference, not its cause: where the causal evidence does not decide, the row reads the
    two as parts kept apart (`combine`: the difference observed, its cause undecided). A row
    with observational evidence alone claims the difference only: that evidence decides it."""
    obs = {k: e for k, e in pieces.items() if e.get("observational")}
    kind, dec = _headline({k: e for k, e in pieces.items() if k not in obs})
    seen = {k: e for k, e in obs.items() if e["verdict"] in DECIDING}
    if not seen or dec.verdict in DECIDING or kind is None:
        return (kind, dec) if kind or not obs else _headline(obs)
    parts = {f"the difference ({k}, observational)": e["verdict"] for k, e in seen.items()}
    parts["its cause" + (f" ({kind})" if kind else "")] = dec.verdict
    both = combine(parts)
    finds = {e.get("finds", "") for e in seen.values()}  # what the observed part finds
    return kind or next(iter(seen)), Decision(both.verdict, "; ".join(
        [f"{k} (observational): {e['reason']}" for k, e in seen.items()]
        + [f"cause: {dec.reason}"]), finds.pop() if len(finds) == 1 else "",
        {p: Decision(v, "") for p, v in parts.items()}, "parts")


def _headline(pieces: dict) -> tuple[str | None, Decision]:
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


def _blocked_too(own: Decision, failed: list) -> str:
    """An undecided row whose rule left it open and whose control, guarding either direction,
    failed as well: its reason says so (the control is in its needs)."""
    if own.verdict in (INCONCLUSIVE, NOT_RUN) and "positive control" not in own.reason and any(
            f.guards == "both" for f in failed):
        return "; its positive control failed too (needs)"
    return ""


def decided(claim_id: str, decision: Decision, *, positive: Control | None = None,
            tested: str | None = None, setting: str = "", authors: dict | None = None,
            reads: str = "intervals", **kw) -> Claim:
    """A Claim whose verdict and reason come from `decision` — guarded by its positive
    control `positive` — or, for a paper row, from its evidence (`headline`): the book's own
    experiment is the evidence of kind `tested` (in `setting`), beside the authors' data
    (`authors`, an `evidence` piece) where there are any. `needs` (what would decide it) is
    kept only where the verdict is inconclusive or not run, with any failed control first."""
    if positive is None and kw.get("kind") == "derivation":
        positive = Control("none needed: nothing is trained or fitted (a symbolic check; its "
                           "negative controls, the perturbed statements it must reject, are in "
                           "the rule)", "", None)
    if kw.get("shows") == BOOKS_CONSTRUCTION and kw.get("kind", "paper") != "book":
        decision, kw["construction"] = paper_object(claim_id, guarded(decision, positive),
                                                    kw.get("needs", ""), kw.pop("parts", None))
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
        if own.join == "parts" and own.parts:  # observed and caused, kept apart
            kw["parts"] = {k: v.verdict for k, v in own.parts.items()}
        elif kind and pieces[kind].get("parts"):  # the parts as guarded
            kw["parts"] = pieces[kind]["parts"]
        if kind == TRANSFER and kw.get("parts"):  # a transfer's parts in its own words
            kw["parts"] = {k: transfer_words(v) for k, v in kw["parts"].items()}
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
        if failed and tested and kind != tested:  # decided by other evidence: say why ours is not
            kw["note"] = "; ".join(x for x in (kw.get("note", ""),
                                               f"{tested}: {failed[0].why()}") if x)
        if failed and INCONCLUSIVE in (kw.get("parts") or {}).values():
            kw["needs"] = "; ".join(f.why() for f in failed)  # what would decide the open part
    elif failed:
        # where the rule alone decided and the control blocked it, the control is what would
        # decide it: the rule's own budget (more windows, more seeds) is not needed
        blocked = decision.verdict in DECIDING and not decision.parts and \
            guarded(decision, positive).verdict == INCONCLUSIVE
        kw["needs"] = "; ".join([f.why() for f in failed] + ([kw["needs"]] if kw.get("needs")
                                                             and not blocked else []))
    return Claim(claim_id, verdict=own.verdict, reason=own.reason + _blocked_too(own, failed),
                 positive_control=pc,
                 evidence=pieces, finds=own.finds, **kw)
