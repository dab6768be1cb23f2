"""Positive controls: before a rule may say `reproduced` or `not reproduced`, the experiment
must show that it *could* have detected the effect (assay sensitivity). A model trained from
scratch has reached its plateau and its MLPs are measurably nonlinear; a gate beats chance on
held-out tokens; a probe moves perplexity off its frozen base; the trained reference learns the
task in the very setting compared; a fitted read-out does not over-fit.

A `Control` says what must hold, what was measured, whether it held (`passed`: None where the
row's experiment trains and fits nothing), what would make it pass, **the direction it guards**
and **where it measured** (the layers, tokens or hops: a control on layer 0 says nothing of the
middle third). A failed control turns a decision into `inconclusive` (`claims.guarded`) only
where its failure could have produced that decision:

* `guards="negative"` — the failure can only *understate* the effect (an over-fitted gate or
  read-out scored held out, an under-trained reference, an evaluation without power, layers
  that cost less than the margin): it blocks a finding of *no* effect (a directional claim's
  `not reproduced`, a null claim's `reproduced`) and leaves a finding of an effect standing;
* `guards="positive"` — the failure can only *overstate* it (a leak between fit and test):
  it blocks a finding of an effect;
* `guards="both"` — it could do either (the default where a control names no direction).

A control whose figure the run did not record has failed: nothing shows the experiment could
tell."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from nlbudget.verdicts import stats

#: The directions a control guards (module docstring).
GUARDS = ("negative", "positive", "both")

#: A learning curve has reached its plateau when the loss improved by less than this share
#: over the last fifth of training (the upper end of a Welch interval of the improvement,
#: the last fifth against the fifth before: a noisy curve does not pass by luck).
PLATEAU_SHARE = 0.02


@dataclass(frozen=True)
class Control:
    """One positive control: `what` must hold; `measured`, what the run found; `passed` (None:
    nothing trained or fitted, nothing to control); `fix`, what would make it pass."""

    what: str
    measured: str
    passed: bool | None
    fix: str = ""
    #: which findings its failure blocks (`GUARDS`): a finding of no effect ("negative"), of an
    #: effect ("positive"), or either ("both")
    guards: str = "both"
    #: where it measured: the layers, tokens or hops (empty: the whole experiment)
    scope: str = ""

    def __post_init__(self):
        if self.guards not in GUARDS:
            raise ValueError(f"guards {self.guards!r} is not one of {GUARDS}")

    def blocks(self, finding: str) -> bool:
        """Whether this control, failed, blocks a decision resting on `finding` ("positive":
        an effect found; "negative": none found, or less than the margin; "" — a rule that
        does not say — counts as either)."""
        return self.failed and (self.guards == "both" or not finding or finding == self.guards)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def failed(self) -> bool:
        return self.passed is False

    def why(self) -> str:
        """The failed control in one line, for a row's `needs`."""
        return (f"the positive control failed — {self.what}"
                + (f" [{self.scope}]" if self.scope else "") + f": {self.measured}"
                + (f"; {self.fix}" if self.fix else ""))

    def aimed(self, guards: str | None = None, scope: str | None = None) -> "Control":
        """The same control with its direction and place stated."""
        return replace(self, guards=self.guards if guards is None else guards,
                       scope=self.scope if scope is None else scope)


def none_needed(why: str) -> Control:
    """A row whose experiment trains and fits nothing (a proof, a count, a re-analysis)."""
    return Control(f"none needed: {why}", "", None)


def joined(*controls: Control) -> Control:
    """Several controls as one: passed when every one that applies passed, failed when any
    failed; the failed ones first in the text, each fix named once."""
    cs = [c for c in controls if c is not None]
    if not cs:
        return none_needed("no control given")
    if len(cs) == 1:
        return cs[0]
    applied = [c for c in cs if c.passed is not None]
    passed = None if not applied else all(c.passed for c in applied)
    order = sorted(cs, key=lambda c: c.passed is not False)
    # the joined control guards what its failed members guard (all of them, where none failed)
    dirs = {c.guards for c in ([c for c in cs if c.failed] or cs)}
    guards = dirs.pop() if len(dirs) == 1 else "both"
    scopes = list(dict.fromkeys(c.scope for c in order if c.scope))
    return Control("; ".join(c.what for c in order),
                   "; ".join(c.measured for c in order if c.measured), passed,
                   "; ".join(dict.fromkeys(c.fix for c in order if c.failed and c.fix)),
                   guards, "; ".join(scopes))


def trained(curves: dict, fix: str, *others: Control, guards: str = "negative") -> Control:
    """Each model of `curves` ({name: its recorded validation curve, or None}) trained to its
    plateau (`plateau`; `not_recorded` where the run kept no curve), joined with `others`. An
    under-trained model can only shrink what training builds (a gap between arms, a layer's
    nonlinearity): it guards the negative findings unless told otherwise."""
    return joined(*(plateau(c, what=f"{k} trained to its plateau", fix=fix, guards=guards) if c
                    else not_recorded(f"{k} trained to its plateau (its validation curve)", fix,
                                      guards=guards)
                    for k, c in curves.items()), *others)


def not_recorded(what: str, fix: str, *, guards: str = "both", scope: str = "") -> Control:
    """A control whose figure this run did not record: failed (nothing shows it holds)."""
    return Control(what, "not recorded by this run", False, fix, guards, scope)


def above(what: str, lo: float | None, floor: float, measured: str, fix: str = "", *,
          guards: str = "both", scope: str = "") -> Control:
    """A control that holds when the lower end `lo` of an interval lies above `floor`."""
    ok = lo is not None and np.isfinite(lo) and lo > floor
    return Control(what, measured, bool(ok), "" if ok else fix, guards, scope)


def plateau(curve, *, what: str = "trained to its plateau", share: float = PLATEAU_SHARE,
            fix: str = "train longer", guards: str = "negative", scope: str = "") -> Control:
    """A learning curve (losses, in training order) has reached its plateau: the loss improved
    by less than `share` over the last fifth of training — the upper end of the Welch interval
    of (mean of the fifth before − mean of the last fifth) / mean of the fifth before."""
    v = np.asarray([x for x in (curve or []) if x is not None], float)
    if len(v) < 10:
        return Control(what, f"a learning curve of {len(v)} point(s): too short to show a "
                       "plateau", False, fix, guards, scope)
    n = len(v) // 5
    before, last = v[-2 * n:-n], v[-n:]
    d, lo, hi = stats.welch_interval(before, last)
    base = float(before.mean())
    rel, rlo, rhi = d / base, lo / base, hi / base
    ok = bool(np.isfinite(rhi) and rhi < share)
    return Control(what + f" (loss improved < {share:.0%} over the last fifth)",
                   f"improvement over the last fifth {rel:+.1%} [{rlo:+.1%}, {rhi:+.1%}] "
                   f"({len(v)} points, {v[0]:.3g} → {last.mean():.3g})", ok, "" if ok else fix,
                   guards, scope)


def not_overfit(what: str, fit: float, held_out: float, gap: float, fix: str = "", *,
                scope: str = "") -> Control:
    """A fitted model does not over-fit: its held-out score is not below its fit score by more
    than `gap`. Scored held out, an over-fitted model can only understate what it finds: it
    guards the negative findings (`guards="negative"`)."""
    ok = bool(np.isfinite(fit) and np.isfinite(held_out) and fit - held_out <= gap)
    return Control(what + f" (fit − held out ≤ {gap:g})",
                   f"fit {fit:.3f}, held out {held_out:.3f} (gap {fit - held_out:+.3f})", ok,
                   "" if ok else fix, "negative", scope)
