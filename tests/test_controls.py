"""Positive controls and kinds of evidence: a rule never decides where its experiment failed
its positive control; a transfer never reads `not reproduced`; the headline follows the stated
rule; and the committed `full` results hold to all of it."""

import importlib
import json

import pytest

from nlbudget.book import ledger
from nlbudget.verdicts import claims as V
from nlbudget.verdicts import controls

# the synthetic figures of `test_chapter_claims.py` (a sibling test module, not a package)
_t = importlib.import_module("test_chapter_claims")
FLAT, ACC_WORSE, GATES, WORSE = _t.FLAT, _t.ACC_WORSE, _t.GATES, _t.WORSE
c2, c4, c6, f02, f04, f06 = _t.c2, _t.c4, _t.c6, _t.f02, _t.f04, _t.f06
layer_row, settings = _t.layer_row, _t.settings

DOWN = [5.0 - 0.1 * i for i in range(20)]  # still falling steeply: no plateau


def test_plateau_passes_a_flat_curve_and_fails_a_falling_or_short_one():
    assert controls.plateau(FLAT).passed is True
    assert controls.plateau(DOWN).passed is False
    assert controls.plateau([3.0, 2.9, 2.8]).passed is False  # too short to show anything
    assert controls.plateau(None).passed is False
    noisy = [3.0 + (0.5 if i % 2 else -0.5) for i in range(20)]  # flat but noisy: not shown
    assert controls.plateau(noisy).passed is False
    assert controls.plateau([3.0 + 0.001 * (i % 2) for i in range(40)]).passed is True


def test_overfit_and_floors_and_joined():
    assert controls.not_overfit("g", 0.83, 0.52, 0.05).passed is False
    assert controls.not_overfit("g", 0.56, 0.55, 0.05).passed is True
    assert controls.above("x", 0.02, 0.01, "m").passed is True
    assert controls.above("x", None, 0.01, "m").passed is False
    ok, bad, na = (controls.Control("a", "", True), controls.Control("b", "", False, "fix b"),
                   controls.none_needed("c"))
    assert controls.joined(ok, na).passed is True
    j = controls.joined(ok, bad, na)
    assert j.passed is False and j.what.startswith("b") and j.fix == "fix b"
    assert controls.joined(na).passed is None
    # two failed controls with one remedy name it once
    again = controls.Control("b2", "", False, "fix b")
    assert controls.joined(bad, again, ok).fix == "fix b"


def test_majority_over_layers():
    R, N, I = (V.Decision(V.REPRODUCED, ""), V.Decision(V.NOT_REPRODUCED, ""),
               V.Decision(V.INCONCLUSIVE, ""))
    assert V.majority([R] * 8 + [I] * 2, 0.8, "x").verdict == V.REPRODUCED
    assert V.majority([R] * 7 + [N] * 3, 0.8, "x").verdict == V.NOT_REPRODUCED
    d = V.majority([R] * 7 + [I] * 3, 0.8, "x")
    assert d.verdict == V.INCONCLUSIVE and "7 of 10 layers hold, 0 do not" in d.reason


def test_a_failed_control_of_both_directions_turns_any_decision_inconclusive():
    bad = controls.Control("trained to its plateau", "still falling", False, "train longer")
    for v in (V.REPRODUCED, V.NOT_REPRODUCED, V.PARTLY):
        d = V.guarded(V.Decision(v, "the rule"), bad)
        assert d.verdict == V.INCONCLUSIVE and "trained to its plateau" in d.reason
        assert f"would read {v}" in d.reason
        c = V.decided("X", V.Decision(v, "the rule"), positive=bad, measured="m", control="c",
                      parts={"a": V.REPRODUCED, "b": V.NOT_REPRODUCED})
        assert c.verdict == V.INCONCLUSIVE and c.needs.startswith("the positive control failed")
        assert c.positive_control["passed"] is False
    with pytest.raises(ValueError, match="positive control"):
        V.Claim("X", "m", V.REPRODUCED, control="c", positive_control=bad.as_dict())


def test_transfer_words_and_the_headline_rule():
    yes, no = V.Decision(V.REPRODUCED, "r"), V.Decision(V.NOT_REPRODUCED, "n")
    c = V.decided("X", no, tested=V.TRANSFER, measured="m", control="c")
    assert c.verdict == V.DOES_NOT_TRANSFER and c.evidence["transfer"]["verdict"] == c.verdict
    assert V.decided("X", yes, tested=V.TRANSFER, measured="m", control="c").verdict == V.TRANSFERS
    # a reproduction never reads a transfer's words, and only a transfer may
    assert V.decided("X", no, tested=V.REPRODUCTION, measured="m", control="c").verdict == \
        V.NOT_REPRODUCED
    with pytest.raises(ValueError, match="transfer"):
        V.Claim("X", "m", V.TRANSFERS, control="c")
    # the headline: the reproduction where it decides, else the authors' data, else the transfer
    ev = {k: V.evidence(k, d, measured="m") for k, d in
          ((V.AUTHORS, yes), (V.TRANSFER, no), (V.REPRODUCTION, V.Decision(V.INCONCLUSIVE, "i")))}
    assert V.headline(ev) == (V.AUTHORS, V.Decision(V.REPRODUCED, "authors' data: r"))
    ev[V.REPRODUCTION] = V.evidence(V.REPRODUCTION, no, measured="m")
    assert V.headline(ev)[1].verdict == V.NOT_REPRODUCED
    del ev[V.REPRODUCTION], ev[V.AUTHORS]
    assert V.headline(ev)[1].verdict == V.DOES_NOT_TRANSFER
    # the authors' data decide even where the book's own experiment failed its control
    bad = controls.Control("plateau", "no", False)
    c = V.decided("X", no, tested=V.REPRODUCTION, positive=bad, measured="m", control="c",
                  authors=V.evidence(V.AUTHORS, yes, measured="a"))
    assert c.verdict == V.REPRODUCED and c.evidence["reproduction"]["verdict"] == V.INCONCLUSIVE
    assert set(V.VERDICTS) >= {V.TRANSFERS, V.DOES_NOT_TRANSFER}


def test_constructed_figures_that_fail_a_control_block_the_direction_it_guards():
    # chapter 02: the symmetric form far worse, but neither form trained to its plateau: an
    # under-trained model can only shrink the gap, so the gap found stands (named) …
    F = f02(**WORSE, **ACC_WORSE, **GATES)
    assert c2.claim_lm(F, settings(c2)).verdict == V.REPRODUCED
    F["lm_curves"] = {k: [DOWN] * 3 for k in F["lm_curves"]}
    c = c2.claim_lm(F, settings(c2))
    assert c.verdict == V.REPRODUCED and "plateau" in c.note
    # … while "not worse" from the same under-trained models is blocked
    lm = F["lm_val_ppl"]
    lm["symmetric-silu"], lm["gated-silu"] = lm["gated-silu"], lm["symmetric-silu"]
    c = c2.claim_lm(F, settings(c2))
    assert c.verdict == V.INCONCLUSIVE and "plateau" in c.needs
    del F["lm_curves"]
    assert c2.claim_lm(F, settings(c2)).verdict == V.INCONCLUSIVE  # not recorded: failed
    # chapter 04: AUCs inside the paper's band, but the gates over-fit (train AUC 0.9): the
    # in-sample AUC no longer bounds the band's upper edge, so "modest" cannot be signed
    S4 = settings(c4)
    assert c4.claim_gate_auc(f04(), S4).evidence["transfer"]["verdict"] == V.TRANSFERS
    over = f04(rows=[{**layer_row(l), "auc_train": 0.9} for l in range(10)])
    assert c4.claim_gate_auc(over, S4).evidence["transfer"]["verdict"] == V.INCONCLUSIVE
    # …and gates at chance cannot show that context matches full (a null), nor that routing
    # is not cheap, nor that larger gates add nothing (a null)
    chance = dict(auc=(0.5, 0.48, 0.52), mlp_gain=(0.0, -0.005, 0.005))
    for fn in (c4.claim_context_not_token, c4.claim_larger_gates):
        c = fn(f04(**chance), S4)
        book = c.evidence["transfer"]
        assert book["verdict"] != V.TRANSFERS and book["positive_control"]["passed"] is False
        assert "beat chance" in book["reason"] + c.needs + book["positive_control"]["what"], \
            fn.__name__
    c = c4.claim_gate_routing(f04(**chance, cost=0.05), S4)  # the transfer's reading (the
    book = c.evidence["transfer"]  # headline is the author's GPT-2 Large sweep's)
    assert book["verdict"] == V.INCONCLUSIVE and "beat chance" in book["reason"]
    # chapter 06: probes far better than LoRA over three seeds, but nothing moved off the
    # base — against LoRA the control guards both directions (an idle LoRA flatters a probe)
    S6 = settings(c6)
    F = f06(seeds=(0, 1, 2))
    assert c6.claim_ppl(F, S6).verdict == V.TRANSFERS
    for v in F["studies"]["smollm2-135m"].values():
        v["vs_base"] = {"ppl_change": 0.0, "ppl_ci": (-0.01, 0.01)}
    c = c6.claim_ppl(F, S6)
    assert c.verdict == V.INCONCLUSIVE and "off the frozen base" in c.needs


def _committed():
    for f in sorted(ledger.committed_dir("full").glob("*.verdicts.json")):
        for c in json.loads(f.read_text(encoding="utf-8"))["claims"]:
            yield f.name, c


def test_committed_full_results_never_decide_past_a_failed_control():
    rows = list(_committed())
    assert len(rows) >= 40
    for name, c in rows:
        pc = c.get("positive_control") or {}
        if c["verdict"] != V.NOT_RUN:
            assert {"what", "measured", "passed"} <= set(pc), (name, c["id"])
        if c["verdict"] in V.DECIDING:  # never past a control failed in its direction
            assert not V.blocked_by(pc, c.get("finds", "")), (name, c["id"])
            if pc.get("passed") is False:  # standing past a failed control: said, with why
                assert pc["guards"] in ("negative", "positive") and c["finds"] != pc["guards"]
        for kind, e in c.get("evidence", {}).items():
            assert kind in V.EVIDENCE and e.get("reads") in V.READS, c["id"]
            if e["verdict"] in V.DECIDING:
                assert not V.blocked_by(e.get("positive_control") or {}, e.get("finds", "")), \
                    c["id"]
                if (e.get("positive_control") or {}).get("passed") is False:
                    assert e["stands"], c["id"]
        if c["kind"] == "paper":  # every paper row says what it tested
            assert c.get("evidence"), (name, c["id"])
        if c["verdict"] in (V.TRANSFERS, V.DOES_NOT_TRANSFER):
            assert c["evidence"]["transfer"]["verdict"] == c["verdict"]


def test_the_ledger_states_the_rule_and_counts_by_kind_of_evidence():
    text = ledger.ledger_markdown("full")
    assert V.HEADLINE_RULE in text and "by kind of evidence" in text
    # a build at a committed scale prints its counts once (cold read 8: twice)
    assert text.count("| kind | reproduced") == 1 and "At `full`" not in text
    assert "By kind of evidence at `full`" in ledger.ledger_markdown("ci")
    assert "positive control" in text and "| evidence |" in text
    assert "does not transfer" in ledger.ledger_text("full")
