"""A ledger a referee signs, round three: one test per class of defect the referee found, each
on constructed rows (or the committed figures) that the engine before this change judged
wrongly — a paper verdict only for the paper's object, combination words that mean what they
say, intervals inside their statistic's range and controls on the claim's own quantity."""

import importlib
import json

import pytest

from nlbudget import paths
from nlbudget.verdicts import claims as V
from nlbudget.verdicts import controls

R, NR, INC, P, NRUN = V.REPRODUCED, V.NOT_REPRODUCED, V.INCONCLUSIVE, V.PARTLY, V.NOT_RUN
NONE = controls.none_needed("nothing trained")
# the modules (each chapter package's `claims` is also the name of its function)
c5 = importlib.import_module("nlbudget.chapters.ch05_fixed_universal.claims")
c6 = importlib.import_module("nlbudget.chapters.ch06_preprojection_probes.claims")
A3 = importlib.import_module("nlbudget.chapters.ch03_linear_surrogates.authors")


def _committed(cid: str) -> dict:
    for f in (paths.repo_root() / "data" / "results" / "full").glob("*.verdicts.json"):
        for c in json.loads(f.read_text(encoding="utf-8"))["claims"]:
            if c["id"] == cid:
                return c
    raise KeyError(cid)


# ------------------------------------------------ 1. a paper verdict only for the paper's object


def test_a_paper_row_on_the_books_construction_reads_not_run():
    """A paper row whose experiment is the book's construction keeps what the construction
    shows, but the paper's claim reads `not run`, saying what would test the paper's object
    (before: the construction's `reproduced` was the paper's verdict)."""
    c = V.decided("P2.x", V.Decision(R, "exact to 1e-12", V.POSITIVE), positive=NONE,
                  tested=V.REPRODUCTION, shows=V.BOOKS_CONSTRUCTION, measured="m",
                  control="a random program", needs="the paper's own construction")
    assert c.verdict == NRUN and c.needs == "the paper's own construction"
    assert c.construction == {"verdict": R, "reason": "exact to 1e-12", "parts": {}}
    assert c.evidence[V.REPRODUCTION]["verdict"] == NRUN
    with pytest.raises(ValueError, match="paper's object"):
        V.decided("P2.x", V.Decision(R, "r", V.POSITIVE), shows=V.BOOKS_CONSTRUCTION,
                  measured="m", control="c")  # no word of what would test the paper's object
    # a check at construction: no deciding verdict on a paper row that shows the book's own
    with pytest.raises(ValueError, match="book's construction"):
        V.Claim("P2.x", "m", R, control="c", shows=V.BOOKS_CONSTRUCTION)
    # the book's own question keeps its verdict
    assert V.Claim("BOOK.x", "m", R, control="c", kind="book",
                   shows=V.BOOKS_CONSTRUCTION).verdict == R


def test_a_derivation_with_no_symbolic_check_does_not_claim_one():
    """`derivation(None, …)`: the reason says there is no symbolic check (before, P1.rank-r's
    read "the symbolic check holds" where none exists)."""
    d = V.derivation(None, {"reduces": True}, {"control rejected": True})
    assert d.verdict == R and "no symbolic check" in d.reason and "symbolic check holds" not in d.reason
    assert V.derivation(None, {"reduces": False}, {"c": True}).verdict == NR
    assert "symbolic check holds" in V.derivation(True, {"x": True}, {"c": True}).reason


def test_no_residual_carrying_arm_in_an_attention_only_comparison():
    """The book's sparse UT keeps a residual path in every setting (universal.FrozenTransformer),
    so the attention-only k-hop comparison leaves it out: with a sparse arm at 100 % and a
    random one at 40 %, the trained model's 99 % beats the attention-only frozen UT (before:
    the gap was taken to the better of the two, the residual-carrying sparse arm)."""
    from nlbudget.universal import FrozenTransformer

    assert FrozenTransformer("sparse", 6, 2, 1, 1, 2, residual=False).residual  # keeps its own
    assert not FrozenTransformer("random", 6, 2, 1, 1, 2, m=8, residual=False).residual
    assert c5.RESIDUAL_ARMS == ("sparse",)
    runs = [{"task": "hop1", "kind": k, "setting": "attention-only", "seed": s,
             "acc_train_len": a + 0.01 * s, "steps": 2000, "stalled": True,
             "val_curve": [[1000, a + 0.01 * s], [2000, a + 0.01 * s]]}
            for k, a in (("sparse", 0.97), ("random", 0.40), ("trained", 0.97)) for s in range(3)]
    F = {"runs": runs}
    S = {"hops": "1", "hop_steps": 1000, "hop_max_steps": 8000, "hop_seeds": 3, "power_seeds": 3,
         "hop_vocab": 6, "heads": 1, "layers": 2, "d": 8, "m": 64, "steps": 100, "batch": 8,
         "seeds": 3, "n_test": 100, "dyck_len": 16}
    c = c5.claim_khop_attention_only(F, S)
    assert c.verdict == R, (c.verdict, c.reason)
    assert "sparse UT, which keeps a residual path" in c.measured and "not compared" in c.measured
    assert _committed("P2.dyck-sparse")["verdict"] == NRUN  # the sparse arm is the book's own


# ------------------------------------------------ 4. combination words that mean what they say


def test_transfer_only_parts_read_in_transfer_words():
    """A transfer's parts read `transfers` / `does not transfer`, and its split headline
    `partly transfers` (before, P3.u-shape's parts read `reproduced` from SmolLM2 alone, and
    P3.delta-skew `partly`); a row with a transfer headline and parts in the paper's words is
    refused at construction."""
    dec, _ = V.by_parts({"early": V.Decision(R, "e", V.POSITIVE),
                         "late": V.Decision(NR, "l", V.NEGATIVE)})
    c = V.decided("P3.x", dec, positive=NONE, tested=V.TRANSFER, measured="m", control="c")
    assert c.verdict == V.PARTLY_TRANSFERS == c.evidence[V.TRANSFER]["verdict"]
    assert c.parts == {"early": V.TRANSFERS, "late": V.DOES_NOT_TRANSFER}
    with pytest.raises(ValueError, match="transfer alone"):
        V.Claim("P3.x", "m", V.TRANSFERS, control="c", parts={"a": R, "b": R},
                evidence={V.TRANSFER: {"verdict": V.TRANSFERS, "reason": "r"}})
    u = _committed("P3.u-shape")["evidence"][V.TRANSFER]["parts"]
    assert u and set(u.values()) <= {V.TRANSFERS, V.DOES_NOT_TRANSFER}


def test_an_observational_difference_does_not_decide_its_cause():
    """Author models that differ in data, tokenizer and size show a difference, not its cause:
    with the matched (causal) test undecided, the row reads the difference and its cause as
    parts kept apart — `partly` — not `reproduced` (before: the author's points decided the
    topology claim)."""
    obs = V.evidence(V.AUTHORS, V.Decision(R, "Pythia costs more", V.POSITIVE), measured="m",
                     reads="points", observational=True)
    c = V.decided("P3.x", V.Decision(INC, "the pair's interval holds 0"), positive=NONE,
                  tested=V.REPRODUCTION, authors=obs, measured="m", control="c", needs="seeds")
    assert c.verdict == P and c.shows == ""
    assert c.parts == {"the difference (authors' data, observational)": R,
                       "its cause (reproduction)": INC}
    # the causal test decides the row when it decides
    c = V.decided("P3.x", V.Decision(NR, "below the margin", V.NEGATIVE), positive=NONE,
                  tested=V.REPRODUCTION, authors=obs, measured="m", control="c")
    assert c.verdict == NR
    # observational evidence alone: the row claims the difference, and it decides
    c = V.decided("P3.x", V.Decision(R, "r"), authors=obs, measured="m", control="c")
    assert c.verdict == R and not c.parts
    # the book's two rows: the difference observed (P3.sequential-vs-parallel) and its cause
    # (P3.topology-cause), apart (cold read 8: one `partly` merged them)
    assert _committed("P3.sequential-vs-parallel")["verdict"] == R
    assert _committed("P3.topology-cause")["verdict"] == INC


def test_sizes_of_one_claim_are_all_of_not_parts():
    """Target sizes are not parts the paper states: one size solved and another stalled is
    `inconclusive` (all_of), not `partly` (P2.random-universal, before)."""
    d = V.all_of({"H=1": V.Decision(R, "solved"), "H=2": V.Decision(INC, "stalls")})
    assert d.verdict == INC
    row = _committed("P2.random-universal")
    assert row["verdict"] != P and not row["parts"]


# ------------------------------------------------ 5. bounded intervals, controls on the quantity


def test_a_correlation_over_seeds_stays_inside_minus_one_one():
    """Per-seed Spearman ρ averaged in Fisher's z: the interval stays in [−1, 1] (before, a t
    interval over three ρ printed [−2.13, +1.06])."""
    F = {"by_seed": {"m": [{"skip_rho": -1.0}, {"skip_rho": 0.8}, {"skip_rho": 1.0}]}}
    lo, hi = c6._over_seeds(F, "m", "skip_rho", (-0.2, 0.3), correlation=True)
    assert -1 <= lo <= hi <= 1
    t_lo, t_hi = c6._over_seeds(F, "m", "skip_rho", (-0.2, 0.3))
    assert t_lo < -1 or t_hi > 1  # the plain t interval leaves the range on these values


def test_a_skip_row_needs_a_skip_that_is_used():
    """Switching the skip off lowers perplexity at every layer: the skip is unused, and its
    trend with depth cannot be read either way (the control guards both directions)."""
    unused = c6.skip_used([{"layer": i, "ppl_change": -0.001 * (i + 1)} for i in range(4)])
    assert unused.failed and unused.guards == "both"
    assert not c6.skip_used([{"layer": 0, "ppl_change": -0.01},
                             {"layer": 1, "ppl_change": 0.02}]).failed


def test_a_ceiling_claim_is_blocked_by_over_fitting_both_ways():
    """"Modest AUC" is a ceiling: over-fitting manufactures a modest held-out AUC, so a failed
    over-fitting control blocks `inside` as well as `outside` (before: P3.gate-auc read
    `transfers` past a gate whose fit − held-out gap was 0.091)."""
    ctrl = controls.not_overfit("gates do not over-fit", 0.627, 0.536, 0.05, "more tokens")
    inside = V.Decision(R, "24 of 30 inside", V.POSITIVE)
    assert V.guarded(inside, ctrl) == inside  # guarding one direction let it stand
    assert V.guarded(inside, ctrl.aimed(guards="both")).verdict == INC
    row = _committed("P3.gate-auc")
    assert row["evidence"][V.TRANSFER]["verdict"] == INC  # the book's own over-fitted gates
    # the author's own held-out AUCs are read on their points (the text's 0.54–0.61 is in the
    # files): a consistency check of the author's numbers, which the book's gates cannot block
    a = row["evidence"][V.AUTHORS]
    assert a["verdict"] == R == row["verdict"] and a["reads"] == "points"
    assert "0.5361" in a["reason"] and "consistency check" in a["positive_control"]["what"]


# ------------------------------------------------ 2. one reading of the author's files


def test_the_authors_single_runs_are_read_on_their_points():
    """A stored author run is read on its points as a consistency check, whichever way it
    points; the seed rule is the book's own training's (before: one run each "never decides").
    The author's two-phase gated run ends above the control (19.00 vs 18.25 PPL): the stored
    points contradict the text; a sentence no stored file holds (P3.progressive's five layers
    at 50 steps each) is a part that reads `not run`, saying so, beside the part the stored
    4-layer runs answer on their points."""
    from nlbudget.verdicts import readings

    one = readings.points_above([18.25 / 19.00 - 1], 0.0, "control / gated − 1", unit="run")
    assert one.verdict == NR and "1 run" in one.reason
    assert V.needs_seeds(one, 1).verdict == INC  # what the seed rule would have made of it
    row = _committed("P3.two-phase-gated")
    assert row["verdict"] == NR and row["evidence"][V.AUTHORS]["reads"] == "points"
    prog = _committed("P3.progressive")["evidence"][V.AUTHORS]
    assert prog["verdict"] == P and "no stored file" in prog["reason"]
    assert prog["parts"] == {A3.ONE_BY_ONE: NRUN,
                             A3.TOGETHER: R}
    assert "seed" not in prog["reason"]


# ------------------------------------------------ 3. what each file is


def test_a_file_of_one_gate_architecture_cannot_answer_a_best_of_four_sentence():
    """The GPT-2 Medium sweep's `best_gate` has 6,151 parameters at every layer: one bottleneck
    gate, not the best of the paper's four (tex line 204). It cannot refute the text's 4 of 23
    (before: P3.gated-negative-regularization read `not reproduced` from its 0 of 23) nor
    carry the 40 % share; a sweep whose best gate varies can."""
    import pandas as pd

    a4 = importlib.import_module("nlbudget.chapters.ch04_adaptive_gating.authors")
    one = pd.DataFrame({"gate_params": [6151] * 23})
    assert "one architecture" in a4.one_architecture(one)
    assert a4.one_architecture(pd.DataFrame({"gate_params": [1025, 6151, 3079]})) == ""
    row = _committed("P3.gated-negative-regularization")
    assert row["evidence"][V.AUTHORS]["verdict"] == NRUN
    assert "one architecture" in row["evidence"][V.AUTHORS]["reason"]
    assert row["verdict"] != NR
    assert _committed("P3.forty-percent")["parts"]["share"] == NRUN


def test_one_architecture_shows_what_a_gate_can_do_but_cannot_refute_it(monkeypatch):
    """"A gate can route 25–56 % at < 1 %" is an existence sentence: GPT-2 Medium's file of one
    gate architecture, on the paper's 12,000-token evaluation (tex 127), shows it where it
    reaches the share (14 of 23); where it falls short it cannot refute the best of four and
    reads `not run` (before: set aside whichever way it pointed, on the larger evaluation)."""
    a4 = importlib.import_module("nlbudget.chapters.ch04_adaptive_gating.authors")
    ev = a4.author_gate_routing(0.5, 0.25, 0.01)
    assert "gpt2-medium: reproduced (14 of 23" in ev["reason"]
    assert "bootstrap_ci_gpt2_medium_12k.json" in ev["measured"]
    real = a4.reference

    def costly(name):  # every GPT-2 Medium gate above 1 %: one architecture cannot say no
        t = real(name)
        return t.assign(gate_pct=t.gate_pct + 5) if name == "gpt2_medium_12k" else t
    monkeypatch.setattr(a4, "reference", costly)
    ev = a4.author_gate_routing(0.5, 0.25, 0.01)
    assert ev["verdict"] == R and "gpt2-medium: not run" in ev["reason"]


def test_a_compound_run_that_gates_layer_zero_is_not_the_papers():
    """The paper's compound run gates GPT-2 Medium's layers 1–23 (tex line 323); the stored
    GPT-2 Medium run gates all 24, layer 0 (catastrophic to linearize) included, so it cannot
    answer the sentence; Pythia-1B's stored run is in no sentence of the text (tex lines 321–343
    are GPT-2 Medium's): reported, not judged (before: the 24-layer run's +272 % decided the
    row, then Pythia-1B's +112 %)."""
    a = _committed("P3.compound-gating")["evidence"][V.AUTHORS]
    assert a["verdict"] == NRUN and "gpt2-medium" in a["reason"] and "pythia-1b" not in a["reason"]
    assert "pythia-1b" in a["measured"] and "not judged" in a["measured"]


def test_the_texts_numbers_no_stored_file_holds_are_listed_in_one_place():
    """The ledger page lists the text's numbers that no stored author file holds, each with
    its claim and tex lines (the 4 of 23 and the 39.9 % among them)."""
    from nlbudget.book import ledger

    lines = "\n".join(ledger.unstored_section())
    assert "no stored file holds" in lines
    for cid in ("P3.progressive", "P3.gated-negative-regularization", "P3.forty-percent"):
        assert f"**{cid}**" in lines
    assert "4 of 23" in lines and "39.9 %" in lines and "tex line" in lines
    assert "no stored file holds" in ledger.ledger_markdown("full")


def test_the_papers_own_evaluation_file_is_transcribed_and_read():
    """`bootstrap_ci_gpt2_medium_12k.json` is the paper's evaluation (12,000 tokens, tex line
    127; baseline 34.76 PPL, tex line 357): transcribed, and the 70 %-of-layers row reads it
    beside the larger evaluation (before: only the larger file was read)."""
    from nlbudget.assets.reference import reference

    t = reference("gpt2_medium_12k")
    assert len(t) == 24 and round(float(t.baseline_ppl.iloc[0]), 2) == 34.76
    assert set(t.eval_tokens) == {12087} and set(t.gate_params.dropna()) == {6151}
    ev = _committed("P3.layers-linearizable")["evidence"]["authors' data"]
    assert "12,000 tokens" in ev["reason"] and "larger evaluation" in ev["reason"]
    mid = t[t.layer.between(2, 15)].cost_pct  # the text's "layers 2–15 cost 1.6–2.5 %"
    assert f"{mid.min():.2f}–{mid.max():.2f} %" in ev["measured"]


def test_the_linear_probe_file_is_read_and_its_label_said():
    """`results_linear_probe.json` (AUROC 0.91–0.97) is transcribed and explained on the gate-AUC
    row: its label is the size of ‖MLP(x)‖, not the gate's (before: neither read nor said)."""
    from nlbudget.assets.reference import reference

    t = reference("linear_probe")
    assert list(t.layer) == [3, 10, 13, 18, 22] and t.linear_probe_auroc.min() > 0.9
    assert "‖MLP(x)‖" in _committed("P3.gate-auc")["author_data"]


def test_the_u_shape_uses_the_groups_the_paper_names_for_each_model():
    """GPT-2 Medium's boundary layers are the first and the last (tex line 35: layers 2–15 are
    cheap), not the first 9 % of depth, which took in the cheap L1–L2 (before: the early part
    read inconclusive on the author's sweep). A one-layer group, which no rank test can decide,
    is read on its points, and can say no."""
    a3 = importlib.import_module("nlbudget.chapters.ch03_linear_surrogates.authors")
    cost = a3.author_layers("gpt2-medium").cost_pct.to_numpy() / 100  # the author's sweep
    assert a3.u_shape(cost)[1]["early layers costlier"] == INC  # relative depth: L0–L2
    dec, parts = a3.u_shape(cost, a3.PAPER_GROUPS["gpt2-medium"])
    assert parts == {"early layers costlier": R, "late layers costlier": R}
    flat = [0.01] + [0.02] * 22 + [0.03]  # the first layer the cheapest: no U at the entry
    assert a3.u_shape(flat, a3.PAPER_GROUPS["gpt2-medium"])[1]["early layers costlier"] == NR
    assert _committed("P3.u-shape")["evidence"]["authors' data"]["parts"] == parts
    # a stand-in too shallow to hold a late group (4 layers: the `paper` profile's) is undecided
    assert a3.u_shape([0.1, 0.0, 0.0, 0.0])[1] == {"early layers costlier": R,
                                                   "late layers costlier": INC}


def test_a_layer_whose_token_and_context_parts_are_collinear_tests_neither_part(monkeypatch):
    """Pythia-410M's L0: the author's token and context parts point the same way (cos 0.975),
    so its token gate is its context gate; it is left out of both parts, whichever way it
    points (before: it counted as a layer where the full gate does not beat the token gate)."""
    import pandas as pd

    a4 = importlib.import_module("nlbudget.chapters.ch04_adaptive_gating.authors")
    row = dict(model="m", full=0.58, token_only=0.55, context_only=0.58, cos_token_context=0.1,
               n_tokens=50078, gate_params=1025, labels="median δ")
    t = pd.DataFrame([{**row, "layer": l} for l in range(4)]
                     + [{**row, "layer": l, "token_only": 0.58, "cos_token_context": 0.97}
                        for l in (4, 5)])
    monkeypatch.setattr(a4, "reference", lambda name: t)
    ev = a4.author_context_vs_token()
    assert ev["verdict"] == R and "4 layers" in ev["measured"] and "m L5 left out" in ev["measured"]
    t.loc[4:5, "cos_token_context"] = 0.5  # not collinear: they count, and 4 of 6 < 80 %
    assert a4.author_context_vs_token()["parts"]["full ≫ token"] == NR
    assert "pythia-410m L0 left out" in _committed(
        "P3.context-not-token")["evidence"]["authors' data"]["measured"]


def test_larger_gates_read_on_every_sweep_that_compares_them(monkeypatch):
    """"Larger gates (up to 24K parameters) provide no benefit" (tex 319) is read on every
    author sweep that compares gate sizes, each a setting (`all_of`), on their points, by both
    things a gate does: a larger gate benefits where it costs more than the 1 % margin less
    *while routing at least as many tokens*; cheaper only by routing fewer is a trade. Gates of
    25,000 parameters or more lie outside the sentence. A benefit can show only where the d+1
    gate itself costs more than the margin (a positive control): GPT-2 small's sweeps have no
    such layer and cannot answer (round 5: before, they read `reproduced` although no gate
    could have gained that much); Pythia-2.8B's two wins within 24K decide."""
    a4 = importlib.import_module("nlbudget.chapters.ch04_adaptive_gating.authors_gate_sizes")
    real = a4.reference("gate_sizes")
    assert real.query("model == 'gpt2'").params.max() == 24641
    assert real.groupby("model").layer.nunique().to_dict() == {
        "gpt2": 2, "gpt2 (compound sweep)": 12, "gpt2-large": 36, "pythia-2.8b": 31}
    ev = a4.author_larger_gates(0.01)
    assert ev["verdict"] == NR and "pythia-2.8b: not reproduced (2 of 48" in ev["reason"]
    assert "gpt2: not run (cannot show a benefit" in ev["reason"]
    assert "gpt2-large: reproduced (0 of 12" in ev["reason"]
    assert "31 gates of ≥ 25,000 parameters, outside the sentence" in ev["measured"]
    assert "GPT-2 Medium: no stored file compares its gate sizes" in ev["measured"]
    # without Pythia-2.8B the rest hold where they can answer; with its two winners routing
    # one token fewer each they become trades, and its sweep is undecided
    monkeypatch.setattr(a4, "reference", lambda name: real.query("model != 'pythia-2.8b'"))
    assert a4.author_larger_gates(0.01)["verdict"] == R
    cut = real.copy()
    for layer, gate in ((2, "b=3"), (29, "b=1")):
        row = (cut.model == "pythia-2.8b") & (cut.layer == layer) & (cut.gate == gate)
        lin = (cut.model == "pythia-2.8b") & (cut.layer == layer) & (cut.gate == "linear")
        cut.loc[row, "routed_pct"] = float(cut.loc[lin, "routed_pct"].iloc[0]) - 0.1
    monkeypatch.setattr(a4, "reference", lambda name: cut)
    assert a4.author_larger_gates(0.01)["verdict"] == INC
    row = _committed("P3.larger-gates")
    assert row["verdict"] == NR and row["evidence"]["authors' data"]["reads"] == "points"


def test_a_transfer_piece_in_the_papers_words_is_refused():
    """A transfer piece reading `partly` (or `reproduced`) is refused at construction: P3.delta-
    skew, decided on SmolLM2 alone, reads `partly transfers` (before: `partly`)."""
    ev = {"verdict": P, "reason": "r"}
    with pytest.raises(ValueError, match="own words"):
        V.Claim("P3.x", "m", P, control="c", parts={"a": V.TRANSFERS, "b": V.DOES_NOT_TRANSFER},
                evidence={V.TRANSFER: ev})
    # P3.delta-skew's SmolLM2 piece (its headline is now the author's clusters')
    assert _committed("P3.delta-skew")["evidence"][V.TRANSFER]["verdict"] == V.PARTLY_TRANSFERS


# ------------------------------------------------ round three, fourth cold read (44 of 53)


def test_the_near_linear_share_is_read_on_the_authors_cluster_percentiles(monkeypatch):
    """"90 % of MLP computations are near-linear (|δ| < 0.05)" (tex 522) against GPT-2
    Medium's residual-stream clusters: where a cluster's 10th percentile of δ is ≤ −0.05 (or
    its 90th ≥ +0.05) at least a tenth of its tokens lie outside, so at most ~80 % can be
    near-linear at L1, L12 and L23: not reproduced; the tail part has no per-token δ stored
    (before: no author evidence; the row read `partly transfers` from SmolLM2 alone)."""
    import pandas as pd

    ad = importlib.import_module("nlbudget.chapters.ch04_adaptive_gating.authors_delta")
    g = pd.DataFrame({"n": [100, 300], "p10_delta": [-0.2, -0.01], "p90_delta": [0.3, 0.02]})
    assert ad.far_share_at_least(g) == pytest.approx(0.05)  # 100 × 0.2 / 400
    ev = ad.author_delta_skew(0.9)
    assert ev["verdict"] == NR and ev["parts"] == {ad.NEAR_PART: NR, ad.TAIL_PART: NRUN}
    real = ad.reference("residual_clusters")
    tight = real.assign(p10_delta=-0.01, p90_delta=0.01)  # every cluster inside ±0.05
    monkeypatch.setattr(ad, "reference", lambda name: tight)
    assert ad.author_delta_skew(0.9)["parts"][ad.NEAR_PART] == R
    assert _committed("P3.delta-skew")["verdict"] == NR


def test_lambada_reads_every_stored_run_and_the_papers_negligible():
    """The 24-layer two-phase run (phase2_gated_24layers_gpt2-medium.json, LAMBADA +359 %) is
    one of the stored runs that degrade LAMBADA; "not a linearization artifact" is held to
    P3's own negligible 1 % (tex 19), not a tenth of the text's +38.6 % (the book's, before)."""
    a3 = importlib.import_module("nlbudget.chapters.ch03_linear_surrogates.authors")
    assert a3.ARTIFACT_MARGIN == 0.01
    row = _committed("P3.lambada-degradation")
    assert "+359.3 %" in row["measured"] and "over 7 runs" in row["reason"]
    assert row["parts"] == {"degrades": R, "not a linearization artifact": NR}


def test_the_symmetric_forms_perplexity_margin_is_the_papers_negligible():
    """BOOK.P1.lm-symmetric-vs-gated is held to P3's negligible 1 % of the gated form's
    perplexity (tex 19), the one perplexity margin the book's papers state (before: the book's
    2 %, which decided `not reproduced`); P1.symmetry-matters names its all_of rule."""
    c2 = importlib.import_module("nlbudget.chapters.ch02_does_symmetry_matter.claims")
    assert c2.MIN_PPL_GAP == 0.01
    lm = _committed("BOOK.P1.lm-symmetric-vs-gated")
    assert lm["verdict"] == INC and "P3's negligible" in lm["reason"]
    assert "more for a t interval" in lm["needs"]
    assert "each of which must hold" in _committed("P1.symmetry-matters")["reason"]
    assert "training length" in _committed("BOOK.P1.modular-symmetric-vs-gated")["note"]


# ------------------------------------------------ round three, fifth cold read (47 of 53)


def test_a_decided_row_names_the_control_that_blocked_its_own_experiment():
    """A row decided by other evidence says why its own experiment does not count (the failed
    control, in its note), and a `partly` with an open part says what would decide it (before:
    P3.sequential-vs-parallel's cause part read as merely noisy, its needs empty)."""
    sp = _committed("P3.topology-cause")
    assert sp["verdict"] == INC
    assert "middle third costs more than the topology gap's margin" in sp["needs"]
    assert "P3's negligible" in sp["reason"]
    assert "reproduction: the positive control failed" in _committed("P3.two-phase-gated")["note"]
    c = V.decided("P3.x", V.Decision(R, "r", V.POSITIVE), tested=V.REPRODUCTION,
                  positive=controls.Control("trained", "no", False, "train longer", "both"),
                  authors=V.evidence(V.AUTHORS, V.Decision(NR, "a", V.NEGATIVE), measured="m",
                                     reads="points", control=NONE),
                  measured="m", control="c")
    assert c.verdict == NR and "reproduction: the positive control failed" in c.note


def test_labels_and_scopes_say_no_more_than_the_evidence():
    """P2.random-universal is `verified at the sizes checked` only when every size was (one
    stalled: no label); P3.compound-gating's scope is the sentence's model (tex 321–343), the
    other stored compound runs reported, and the text's ~21 % said to be arithmetic."""
    assert _committed("P2.random-universal")["shows"] == ""
    import csv
    rows = {r["id"]: r for r in csv.DictReader(open(paths.repo_root() / "data" / "claims.csv",
                                                    encoding="utf-8"))}
    assert "Pythia" not in rows["P3.compound-gating"]["paper_scale"]
    m = _committed("P3.compound-gating")["evidence"][V.AUTHORS]["measured"]
    assert "gpt2: 12 of 12" in m and "arithmetic" in m and "not judged" in m


def test_an_undecided_row_whose_two_way_control_failed_says_so_in_its_reason():
    """BOOK.V.linear-vs-recovery: the rule leaves ρ undecided against Cohen's medium 0.3 (the
    book's margin, now named), and its read-out control, guarding both directions, failed: the
    reason says both (before: the control only in needs)."""
    r = _committed("BOOK.V.linear-vs-recovery")
    assert r["verdict"] == INC and "Cohen's medium" in r["reason"]
    assert r["reason"].endswith("its positive control failed too (needs)")
    assert "literal" in _committed("P3.gate-routing")["evidence"][V.AUTHORS]["measured"]


def test_a_derivation_without_numerical_checks_does_not_say_they_hold():
    """P1.kv-memory and P1.static-query run a symbolic check and its perturbed control only;
    their reason no longer says "the numerical checks hold" (before: a stock phrase)."""
    from nlbudget.verdicts.decisions import derivation

    none = derivation(True, {}, {"perturbed": True})
    assert none.verdict == R and "no numerical check is run" in none.reason
    some = derivation(True, {"matches": True}, {"perturbed": True})
    assert "the numerical checks hold" in some.reason
    assert derivation(True, {"matches": False}, {"perturbed": True}).verdict == NR
    assert "no numerical check is run" in _committed("P1.kv-memory")["reason"]


def test_the_pair_control_and_the_row_quote_one_ablation_figure():
    """P3.topology-cause's measured "MLPs zeroed" and its control's "zeroing the MLPs"
    are the same minimum over every seed of both models (before: +568 % against +856 %, the
    control reading the first seed only)."""
    import re

    c = _committed("P3.topology-cause")
    row = re.search(r"MLPs zeroed: (\+\d+%)", c["measured"]).group(1)
    ctl = re.search(r"zeroing the MLPs: (\+\d+%)", json.dumps(c, ensure_ascii=False)).group(1)
    assert row == ctl


def test_obtained_says_what_decides_the_row():
    """`obtained` is computed from what decides a row (before: "replicated" by default, so a
    row decided by the author's files, or one where nothing ran, claimed the book's own
    independent code, and an identity checked at one size claimed a proof)."""
    auth = V.evidence(V.AUTHORS, V.Decision(R, "4 of 4 points", V.POSITIVE), reads="points",
                      measured="the author's points", setting="file",
                      control=controls.none_needed("the author's files"))
    c = V.decided("P3.x", V.Decision(NRUN, "not measured"), positive=NONE, tested=V.TRANSFER,
                  authors=auth, measured="not measured here", control="c", needs="a run")
    assert c.verdict == R and c.obtained == "reproduced"
    own = V.decided("P3.y", V.Decision(R, "beyond its interval", V.POSITIVE), positive=NONE,
                    tested=V.REPRODUCTION, measured="m", control="c")
    assert own.obtained == "replicated"
    nothing = V.decided("P3.z", V.Decision(NRUN, "not measured"), positive=NONE,
                        tested=V.REPRODUCTION, measured="not measured", control="c", needs="n")
    assert nothing.obtained == "none"
    one_size = V.decided("P1.x", V.derivation(True, {}, {"perturbed": True}), kind="derivation",
                         shows="verified at the sizes checked", measured="sympy", control="c")
    proof = V.decided("P1.y", V.derivation(True, {}, {"perturbed": True}), kind="derivation",
                      shows="proved", measured="sympy", control="c")
    assert (one_size.obtained, proof.obtained) == ("verified", "derived")
    assert _committed("P3.two-phase-gated")["obtained"] == "reproduced"
    assert _committed("P3.forty-percent")["obtained"] == "none"  # not run
    assert _committed("P3.compound-gating")["obtained"] == "none"  # inconclusive
    assert _committed("P3.simultaneous")["obtained"] == "none"
