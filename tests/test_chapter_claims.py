"""Every claim function of every chapter, fed synthetic figures: each reaches each verdict it can
return, an input with no effect is never `reproduced`, and the control is actually read
(changing only the control changes the verdict)."""

import copy
import importlib

import numpy as np
import pytest
from scipy import stats as sps

from nlbudget.book import profiles
from nlbudget.verdicts import results, stats
from nlbudget.chapters import (ch01_gated_mlp_symmetry as c1, ch02_does_symmetry_matter as c2,
                               ch03_linear_surrogates as c3, ch04_adaptive_gating as c4,
                               ch05_fixed_universal as c5, ch06_preprojection_probes as c6,
                               ch07_budget_atlas as c7)

R, NR, INC, NRUN, P = "reproduced", "not reproduced", "inconclusive", "not run", "partly"
TR, PTR, DNT = "transfers", "partly transfers", "does not transfer"
#: a learning curve at its plateau: every sample's training passed its positive control
FLAT = [3.0] * 20
REGISTRY = {r["id"]: r for r in results.claims_registry()}
A3 = importlib.import_module("nlbudget.chapters.ch03_linear_surrogates.authors")


def settings(ch, profile="ci"):
    return profiles.validate(ch.KEY, profile=profile, seed=0)


SEEN: dict[str, set] = {}  # claim function -> the verdicts the tests below reached


def verdict(fn, F, S):
    """The claim's verdict, a transfer's words read as the rule's own (`transfers` as
    reproduced): the rules are tested here; the words, by `test_transfer_words`."""
    c = fn(F, S)
    assert c.id in REGISTRY and c.kind == REGISTRY[c.id]["kind"]
    if c.construction:  # the book's construction: the paper's claim is not run, the rule's
        assert c.verdict == "not run" and c.shows == "the book's construction"  # verdict kept
        c = type(c)(c.id, c.measured, c.construction["verdict"], control=c.control or "c",
                    needs=c.needs or "n", kind="book", parts=c.construction["parts"])
    if c.verdict in (TR, PTR, DNT):
        assert c.evidence["transfer"]["verdict"] == c.verdict
    v = {TR: R, PTR: P, DNT: NR}.get(c.verdict, c.verdict)
    SEEN.setdefault(fn.__name__, set()).add(v)
    return v


def test_every_registered_claim_has_one_function():
    ids = []
    for ch in (c1, c2, c3, c4, c5, c6, c7):
        for fn in ch.CLAIMS:
            assert fn.__doc__, fn.__name__
        produced = [c.id for c in ch.claims(*SAMPLES[ch.KEY]())]
        assert len(produced) == len(set(produced)) == len(ch.CLAIMS)
        assert set(produced) == {r for r in REGISTRY if REGISTRY[r]["chapter"] == ch.KEY}
        for fn, cid in zip(ch.CLAIMS, produced):  # the paper's claims quote the paper
            if REGISTRY[cid]["kind"] != "book":
                assert '"' in fn.__doc__, f"{fn.__name__}: quote the paper's sentence"
        ids += produced
    assert sorted(ids) == sorted(REGISTRY)


# ------------------------------------------------------------------ chapter 01


def f01():
    ids = ["kv", "static", "rank1", "exchange", "symmetric-exchange", "symmetric-inverse-scaling"]
    al = [-2.0, -1.0, 0.5, 2.0]
    return {
        "proofs": {k: True for k in ids}, "proof_controls_rejected": {k: True for k in ids},
        "exchange_counterexamples": {"relu": -0.5, "gelu": 0.1, "silu": 0.2, "linear": None},
        "inverse_scaling_proved": {"relu": {"positive": True, "negative": False},
                                   "gelu": {"positive": False, "negative": False},
                                   "silu": {"positive": False, "negative": False},
                                   "linear": {"positive": True, "negative": True}},
        "alphas": al,
        "inverse_error_gated": {"relu": [1.0, 1.0, 0.0, 0.0], "gelu": [1.0, 0.5, 0.1, 0.2],
                                "silu": [1.0, 0.5, 0.1, 0.2], "linear": [0.0] * 4},
        "exchange_error_gated": {"relu": 1.0, "gelu": 1.2, "silu": 1.1, "linear": 1e-16},
        "exchange_error_symmetric": {a: 1e-16 for a in ("relu", "gelu", "silu", "linear")},
        "inverse_error_symmetric": {a: 1e-16 for a in ("relu", "gelu", "silu", "linear")},
        "reductions": {"rank1_vs_eq3_of_symmetric": 1e-14, "symmetric_vs_eq3": 1e-14,
                       "rankr_vs_eq3": 1e-14, "control_rank2_vs_symmetric": 0.5,
                       "control_rankr_vs_wrong_eq3": 0.7, "gated_vs_llama_mlp": 0.0},
    }


def set_path(F, path, value):
    F = copy.deepcopy(F)
    d = F
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    return F


CH01 = [  # (function, change that breaks the statement, change that breaks the control)
    (c1.claim_kv_memory, [("proofs", "kv")], [("proof_controls_rejected", "kv")]),
    (c1.claim_static_query, [("proofs", "static")], [("proof_controls_rejected", "static")]),
    (c1.claim_rank1, [("reductions", "symmetric_vs_eq3")],
     [("reductions", "control_rankr_vs_wrong_eq3")]),
    (c1.claim_exchange_iff_linear, [("exchange_error_gated", "linear")],
     [("exchange_error_gated", "gelu")]),
    (c1.claim_counterexamples, [("exchange_counterexamples", "gelu")],
     [("exchange_counterexamples", "linear")]),
    (c1.claim_inverse_scaling, [("inverse_scaling_proved", "relu", "positive")],
     [("inverse_error_gated", "relu")]),
    (c1.claim_symmetric_invariant, [("exchange_error_symmetric", "silu")],
     [("exchange_error_gated", "silu")]),
    (c1.claim_rank_r, [("reductions", "rankr_vs_eq3")],
     [("reductions", "control_rank2_vs_symmetric")]),
]
BREAK = {bool: False, float: 0.5}


def _broken(F, path, control=False):
    F = copy.deepcopy(F)
    d = F
    for k in path[:-1]:
        d = d[k]
    old = d[path[-1]]
    if isinstance(old, bool):
        d[path[-1]] = not old
    elif isinstance(old, list):
        d[path[-1]] = [0.0] * len(old)
    elif old is None:
        d[path[-1]] = 0.3
    else:  # a number: a big one where zero was expected, zero where big was expected
        d[path[-1]] = None if path[0] == "exchange_counterexamples" else (
            0.0 if abs(old) > 1e-3 else 0.5)
    return F


@pytest.mark.parametrize("fn,statement,control", CH01, ids=lambda x: getattr(x, "__name__", ""))
def test_ch01_derivations(fn, statement, control):
    S = settings(c1)
    assert verdict(fn, f01(), S) == R
    assert verdict(fn, _broken(f01(), statement[0]), S) == NR
    assert verdict(fn, _broken(f01(), control[0], True), S) == INC  # the control is read


# ------------------------------------------------------------------ chapter 02


def f02(sym_ppl, gated_ppl, sym_acc, gated_acc, trained, random):
    return {"lm_val_ppl": {"symmetric-silu": sym_ppl, "gated-silu": gated_ppl},
            "lm_curves": {"symmetric-silu": [FLAT] * len(sym_ppl),
                          "gated-silu": [FLAT] * len(gated_ppl)},
            "lm_later_mlps": {"symmetric-silu": [0.9] * len(sym_ppl),
                              "gated-silu": [1.2] * len(gated_ppl)},
            "modular": {"symmetric-silu": {"test_acc": sym_acc, "train_acc": [1.0] * len(sym_acc)},
                        "gated-silu": {"test_acc": gated_acc, "train_acc": [1.0] * len(gated_acc)}},
            "real_gates": {"trained": [{"exchange": x} for x in trained],
                           "random": [{"exchange": x} for x in random], "tokens": 1000}}


WORSE = dict(sym_ppl=[110.0, 121.0, 131.0], gated_ppl=[100.0, 110.0, 120.0])
BETTER = dict(sym_ppl=[90.0, 99.0, 109.0], gated_ppl=[100.0, 110.0, 120.0])
SAME = dict(sym_ppl=[101.0, 109.0, 121.0], gated_ppl=[100.0, 110.0, 120.0])
ACC_WORSE = dict(sym_acc=[0.3, 0.4, 0.35], gated_acc=[0.9, 0.95, 0.92])
ACC_SAME = dict(sym_acc=[0.9, 0.7, 0.95], gated_acc=[0.92, 0.95, 0.7])
ACC_BETTER = dict(sym_acc=[0.95, 0.97, 0.96], gated_acc=[0.6, 0.7, 0.65])
ACC_NONE = dict(sym_acc=[0.05, 0.04, 0.06], gated_acc=[0.05, 0.06, 0.04])
GATES = dict(trained=[1.2, 1.3, 1.1, 1.4], random=[0.6, 0.7, 0.65, 0.6])
# worse, beyond the uncertainty, but by less than the minimum effect (2 % of PPL, 5 points)
TINY = dict(sym_ppl=[100.5, 110.6, 120.5], gated_ppl=[100.0, 110.0, 120.0])
ACC_TINY = dict(sym_acc=[0.9, 0.94, 0.91], gated_acc=[0.91, 0.95, 0.92])


def test_ch02_differences_inside_the_minimum_effect_are_not_reproduced():
    S = settings(c2)
    assert verdict(c2.claim_lm, f02(**TINY, **ACC_WORSE, **GATES), S) == NR
    assert verdict(c2.claim_modular, f02(**WORSE, **ACC_TINY, **GATES), S) == NR
    assert verdict(c2.claim_real_gates, f02(**WORSE, **ACC_WORSE, trained=[1.2, 1.3, 1.1, 1.4],
                                            random=[1.19, 1.29, 1.09, 1.38]), S) == NR
    assert verdict(c2.claim_symmetry_matters, f02(**TINY, **ACC_TINY, **GATES), S) == NR


@pytest.mark.parametrize("lm,v", [(WORSE, R), (BETTER, NR), (SAME, INC)])
def test_ch02_language_modelling(lm, v):
    S = settings(c2)
    assert verdict(c2.claim_lm, f02(**lm, **ACC_WORSE, **GATES), S) == v
    one_seed = {k: x[:1] for k, x in lm.items()}  # a single seed never decides
    assert verdict(c2.claim_lm, f02(**one_seed, **ACC_WORSE, **GATES), S) == INC
    F = f02(**lm, **ACC_WORSE, **GATES)
    del F["lm_val_ppl"]["gated-silu"]
    assert verdict(c2.claim_lm, F, S) == NRUN


def test_ch02_language_models_with_their_later_mlps_off_decide_no_null():
    S = settings(c2)
    F = f02(**WORSE, **ACC_WORSE, **GATES)
    assert verdict(c2.claim_lm, F, S) == R
    F["lm_later_mlps"]["gated-silu"][1] = 0.01  # one seed's second layer switched off
    # switched-off MLPs can only hide a difference between the forms: a difference found
    # stands (and says what failed), no difference found is blocked
    c = c2.claim_lm(F, S)
    assert c.verdict == R and "later MLPs" in c.note and c.positive_control["passed"] is False
    lm = F["lm_val_ppl"]
    lm["symmetric-silu"], lm["gated-silu"] = lm["gated-silu"], lm["symmetric-silu"]
    c = c2.claim_lm(F, S)
    assert c.verdict == INC and "later MLPs" in c.needs
    del F["lm_later_mlps"]
    assert verdict(c2.claim_lm, F, S) == INC  # not recorded: failed


@pytest.mark.parametrize("acc,v", [(ACC_WORSE, R), (ACC_BETTER, NR), (ACC_SAME, INC),
                                   (ACC_NONE, INC)])
def test_ch02_modular(acc, v):
    assert verdict(c2.claim_modular, f02(**WORSE, **acc, **GATES), settings(c2)) == v
    F = f02(**WORSE, **acc, **GATES)
    del F["modular"]["symmetric-silu"]
    assert verdict(c2.claim_modular, F, settings(c2)) == NRUN


def test_ch02_real_gates_read_the_random_counterpart():
    S = settings(c2)
    t = [1.2, 1.3, 1.1, 1.4]
    assert verdict(c2.claim_real_gates, f02(**WORSE, **ACC_WORSE, trained=t,
                                            random=[0.6, 0.7, 0.65, 0.6]), S) == R
    assert verdict(c2.claim_real_gates, f02(**WORSE, **ACC_WORSE, trained=t,
                                            random=[2.0, 2.1, 2.2, 2.0]), S) == NR
    assert verdict(c2.claim_real_gates, f02(**WORSE, **ACC_WORSE, trained=t,
                                            random=[1.3, 1.1, 1.4, 1.2]), S) == INC


# the two settings are one reading's (all_of), not parts the paper states: either refuted
# refutes it, one undecided leaves it undecided
@pytest.mark.parametrize("lm,acc,v", [(WORSE, ACC_WORSE, R), (BETTER, ACC_BETTER, NR),
                                      (BETTER, ACC_WORSE, NR), (SAME, ACC_WORSE, INC),
                                      (SAME, ACC_SAME, INC), (TINY, ACC_SAME, NR)])
def test_ch02_symmetry_matters(lm, acc, v):
    assert verdict(c2.claim_symmetry_matters, f02(**lm, **acc, **GATES), settings(c2)) == v


# ------------------------------------------------------------------ chapter 03


def report(costs, half=0.002):
    c = list(costs)
    return {"cost": {"plain": c, "keep-first": c}, "ci": {v: [(x - half, x + half) for x in c]
                                                           for v in ("plain", "keep-first")},
            "ci_family": {v: [(x - half, x + half) for x in c] for v in ("plain", "keep-first")},
            "middle": {"plain": {"cost": float(np.mean(c))}, "keep-first": {"cost": float(np.mean(c))}},
            "fit_tokens": 10240, "eval_tokens": 8192, "n_layers": len(c)}


def progressive_run(lin, ctl, seeds=1, start=150.0):
    """`seeds` runs whose final perplexities differ a little from seed to seed."""
    by_seed = [{"seed": k, "start_ppl": start + 0.1 * k, "linearized_ppl": lin + 0.3 * k,
                "control_ppl": ctl + 0.2 * k} for k in range(seeds)]
    return {"order": [2], "linearized": [{"val_ppl": start}, {"val_ppl": lin}],
            "control": [{"val_ppl": start}, {"val_ppl": ctl}], "by_seed": by_seed}


def pair_model(mid, ablation, seeds, middle_ablation=0.3):
    rep = report([mid] * 6)
    return {"ablation": {"cost": ablation}, "report": rep, "train_tokens": 1, "curve": FLAT,
            "by_seed": [{"seed": k, "ablation_cost": ablation, "middle_cost": mid + 0.001 * k,
                         "middle_ablation": middle_ablation, "curve": FLAT}
                        for k in range(seeds)]}


def f03(costs, seq_mid=0.01, par_mid=0.02, ablation=5.0, lin=(140.0, 130.0), ctl=(141.0, 131.0),
        large=None, seeds=1, middle_ablation=0.3):
    F = {"pretrained": {"smollm2-135m": report(costs)},
         "pair": {"neox-seq": pair_model(seq_mid, ablation, seeds, middle_ablation),
                  "neox-par": pair_model(par_mid, ablation, seeds, middle_ablation)},
         "progressive": {"neox-seq": progressive_run(lin[0], ctl[0], seeds),
                         "neox-par": progressive_run(lin[1], ctl[1], seeds)}}
    if large is not None:
        F["pretrained"]["gpt2-large"] = report(large)
    return F


def book(c):
    """The verdict of the book's own experiment in a paper row (its transfer or reproduction),
    in the rule's words."""
    e = c.evidence.get("transfer") or c.evidence["reproduction"]
    return {TR: R, PTR: P, DNT: NR}.get(e["verdict"], e["verdict"])


def test_ch03_layers_linearizable():
    S = settings(c3)
    assert book(c3.claim_layers_linearizable(f03([0.01] * 30), S)) == R
    assert book(c3.claim_layers_linearizable(f03([0.10] * 30), S)) == NR
    assert book(c3.claim_layers_linearizable(f03([0.03] * 30), S)) == INC  # on the line
    # the author's files, on their points over the 23 layers the paper counts: 16 of 23
    # (69.6 %) is the text's "70 %" to its precision — a consistency check
    c = c3.claim_layers_linearizable(f03([0.10] * 30), S)
    a = c.evidence["authors' data"]
    assert a["reads"] == "points" and a["verdict"] == R
    assert "23 layers the paper counts" in a["measured"] and "16 below 3 %" in a["measured"]
    assert c.verdict == R and c.shows == "consistency check"


def test_ch03_negative_regularization_asks_whether_any_layer_improves():
    """The book's question (the paper's 4 of 23 and 11 of 36 are gated counts, not a share to
    hold all-linear layers to): does any layer improve when fully linear?"""
    S = settings(c3)
    assert book(c3.claim_negative_regularization(f03([0.01] * 29 + [-0.05]), S)) == R
    # 0 of 30 improve and all are clearly worse: none does
    c = c3.claim_negative_regularization(f03([0.05] * 30), S)
    assert book(c) == NR and "paper's 17%" not in c.reason
    assert book(c3.claim_negative_regularization(f03([0.0] * 30), S)) == INC  # undecided
    assert book(c3.claim_negative_regularization(f03([0.05] * 10), S)) == NR  # no share needed
    # the book's question asked of the author's points: no all-linear layer of GPT-2 Medium
    # (of the 23 the paper counts) or Large lies below the baseline
    c = c3.claim_negative_regularization(f03([0.01] * 30), S)
    assert c.kind == "book" and c.evidence["authors' data"]["verdict"] == NR
    assert "0 of 23" in c.evidence["authors' data"]["measured"]


def test_ch03_gpt2_large():
    S = settings(c3)
    # not measured here: the author's own GPT-2 Large sweep decides (its points, ≤ 3.7 %)
    c = c3.claim_gpt2_large_max_cost(f03([0.01] * 30), S)
    assert c.verdict == R and c.evidence["reproduction"]["verdict"] == NRUN
    assert c.reason.startswith("authors' data") and "point estimates" in c.reason
    assert verdict(c3.claim_gpt2_large_max_cost, f03([0.01] * 30, large=[0.01] * 36), S) == R
    assert verdict(c3.claim_gpt2_large_max_cost, f03([0.01] * 30, large=[0.01] * 35 + [0.2]),
                   S) == NR
    # the reproduction undecided: the headline falls back on the author's data
    c = c3.claim_gpt2_large_max_cost(f03([0.01] * 30, large=[0.037] * 36), S)
    assert c.evidence["reproduction"]["verdict"] == INC and c.reason.startswith("authors'")


def test_ch03_topology_cause_needs_seeds_and_mlps_that_matter():
    S = settings(c3)
    assert book(c3.claim_topology_cause(f03([0.01] * 30), S)) == INC  # one seed
    c = c3.claim_topology_cause(f03([0.01] * 30, ablation=0.1, seeds=3), S)
    pc = c.evidence["reproduction"]["positive_control"]
    assert book(c) == INC and pc["passed"] is False and "zeroing" in pc["what"]
    # dead middle layers (zeroing them costs nothing) cannot show a linearization cost either
    for F in (f03([0.01] * 30, par_mid=0.04, seeds=3, middle_ablation=0.01),
              f03([0.01] * 30, seq_mid=0.03, seeds=3, middle_ablation=0.01)):
        c = c3.claim_topology_cause(F, S)
        # dead middle layers can only hide a gap: a gap found stands, none found is blocked
        if c.evidence["reproduction"]["finds"] == "positive":
            assert c.evidence["reproduction"]["verdict"] == R
            assert "middle layers' MLPs matter" in c.evidence["reproduction"]["stands"]
        else:
            assert book(c) == INC
            assert "middle layers' MLPs matter" in c.evidence["reproduction"]["reason"]
    assert book(c3.claim_topology_cause(f03([0.01] * 30, par_mid=0.04, seeds=3),
                                                 S)) == R
    assert book(c3.claim_topology_cause(f03([0.01] * 30, seq_mid=0.03,
                                                     par_mid=0.025, seeds=3), S)) == NR
    # …but only where the middle third costs more than the margin: at 1 % or less no gap of
    # 1 % can show, and "not reproduced" is an artifact of the assay (blocked)
    c = c3.claim_topology_cause(f03([0.01] * 30, seq_mid=0.01, par_mid=0.005,
                                            seeds=3), S)
    assert book(c) == INC and "middle third costs more" in c.evidence["reproduction"]["reason"]
    # higher beyond doubt, but by less than the minimum effect: not reproduced
    F = f03([0.01] * 30, seq_mid=0.02, par_mid=0.025, seeds=3)
    assert book(c3.claim_topology_cause(F, S)) == NR
    F = f03([0.01] * 30, seeds=3)
    for r, x in zip(F["pair"]["neox-par"]["by_seed"], (0.0, 0.02, 0.05)):
        r["middle_cost"] = x  # a spread over seeds that holds both 0 and the minimum effect
    c = c3.claim_topology_cause(F, S)
    assert book(c) == INC and not c.evidence.get("authors' data")  # the pair alone: a cause


def test_ch03_sequential_vs_parallel_is_the_observed_difference_alone():
    """P3.sequential-vs-parallel: the author's points show the difference — each Pythia ranks
    costlier than the GPT-2 of comparable size by more than the gap (tex line 372) — and the
    row says nothing of its cause (P3.topology-cause): the observation decides alone, and says
    no where the costs do not differ or run the other way."""
    a3 = importlib.import_module("nlbudget.chapters.ch03_linear_surrogates.authors")
    S, real = settings(c3), a3.author_layers
    c = c3.claim_sequential_vs_parallel(f03([0.01] * 30), S)
    assert c.verdict == R and c.reason.startswith("authors' data") and not c.parts
    assert "rank" in c.reason and set(c.evidence) == {"authors' data"}

    def fake(pythia, gpt2):
        def layers(model, counted=False):
            t = real(model, counted).copy()
            t["cost_pct"] = (pythia if model.startswith("pythia") else gpt2)(len(t))
            return t
        return layers
    try:  # the author's costs replaced: Pythia costlier by the gap exactly, or cheaper
        a3.author_layers = fake(lambda n: np.linspace(2, 4, n), lambda n: np.linspace(1, 3, n))
        assert c3.claim_sequential_vs_parallel(f03([0.01] * 30), S).verdict == INC
        a3.author_layers = fake(lambda n: np.linspace(1, 2, n), lambda n: np.linspace(5, 9, n))
        assert c3.claim_sequential_vs_parallel(f03([0.01] * 30), S).verdict == NR
    finally:
        a3.author_layers = real


def test_ch03_progressive_is_judged_against_the_original_model():
    S = settings(c3)
    mid = dict(seq_mid=0.03, par_mid=0.04)  # middle thirds that cost more than the margin
    F = f03([0.01] * 30, lin=(130.0, 120.0), ctl=(120.0, 110.0), seeds=3, **mid)
    assert book(c3.claim_progressive(F, S)) == R  # below the original, whatever the control
    # middle layers that cost less than the margin to linearize cannot show a cost: "costs
    # nothing" is then an artifact of the assay
    F = f03([0.01] * 30, lin=(130.0, 120.0), ctl=(120.0, 110.0), seeds=3)
    c = c3.claim_progressive(F, S)
    assert book(c) == INC and "middle third costs more" in c.evidence["reproduction"]["reason"]
    F = f03([0.01] * 30, lin=(160.0, 155.0), ctl=(140.0, 130.0), seeds=3)
    assert book(c3.claim_progressive(F, S)) == NR  # a cost found stands, whatever the assay
    F = f03([0.01] * 30, lin=(130.0, 151.5), ctl=(140.0, 130.0), seeds=3, **mid)
    assert book(c3.claim_progressive(F, S)) == INC  # one model on the margin
    # one seed: never decided, however large the difference
    c = c3.claim_progressive(f03([0.01] * 30, lin=(120.0, 110.0)), S)
    assert book(c) == INC
    # …and the author's files then decide what they hold: the 4-layer runs beat the original
    # (on their points); the 5-layer, 50-step sentence is in no stored file
    assert c.verdict == P and c.parts == {A3.ONE_BY_ONE: NRUN,
                                          A3.TOGETHER: R}


def test_ch03_progressive_control_is_the_books_question_per_model():
    S = settings(c3)
    c = c3.claim_progressive_control(f03([0.01] * 30, lin=(145.0, 135.0), ctl=(140.0, 130.0),
                                         seeds=3), S)
    assert c.verdict == R and c.kind == "book"  # the control ends ahead, in both models
    # (the pair's middle third costs 3 %: the assay can show a 1 % gap)
    assert verdict(c3.claim_progressive_control, f03([0.01] * 30, lin=(130.0, 120.0),
                                                      ctl=(140.0, 130.0), seeds=3,
                                                      seq_mid=0.03, par_mid=0.03), S) == NR
    # behind, but by less than P3's negligible 1 % (tex line 19): not reproduced
    assert verdict(c3.claim_progressive_control, f03([0.01] * 30, lin=(140.1, 130.1),
                                                      ctl=(140.0, 130.0), seeds=3,
                                                      seq_mid=0.03, par_mid=0.03), S) == NR
    # where the pair does not decide, the author's stored runs do, read on their points (one
    # run each: a consistency check, whichever way it points)
    for lin, ctl, seeds in (((141.07, 131.0), (140.0, 130.0), 3), ((160.0, 150.0), (140.0, 130.0), 1)):
        c = c3.claim_progressive_control(f03([0.01] * 30, lin=lin, ctl=ctl, seeds=seeds), S)
        assert c.evidence["reproduction"]["verdict"] == INC  # one seed, or a spread
        assert c.verdict == c.evidence["authors' data"]["verdict"] != INC
        assert c.reason.startswith("authors' data") and "point estimates" in c.reason


def test_ch03_u_shape_ranks_boundary_layers_against_the_middle():
    S = settings(c3)
    mid = [0.01 + 0.001 * (l % 3) for l in range(30)]
    def shaped(early, late):
        return [early + 1e-4 * l if l < 3 else late + 1e-4 * (l - 27) if l >= 27 else x
                for l, x in enumerate(mid)]
    # the transfer's rule (SmolLM2's costs), each part in transfer words
    def tr(costs):
        return book(c3.claim_u_shape(f03(costs), S))
    assert tr(shaped(0.2, 0.2)) == R
    assert tr(shaped(0.001, 0.001)) == NR
    assert tr(shaped(0.2, 0.001)) == P
    assert tr(mid) == INC
    # the author's sweeps decide the headline, each part on both models (all_of), with the
    # groups the paper names for each (GPT-2 Medium: its first and last layer, tex line 35):
    # both parts hold on both, whatever the transfer says
    for costs in (shaped(0.2, 0.2), mid):
        c = c3.claim_u_shape(f03(costs), S)
        assert c.evidence["authors' data"]["measured"].startswith("pythia-2.8b")
        assert c.verdict == R and c.parts == {"early layers costlier": R,
                                              "late layers costlier": R}
    c = c3.claim_u_shape(f03(shaped(0.2, 0.2)), S)
    assert c.evidence["transfer"]["parts"] == {"early layers costlier": TR,
                                               "late layers costlier": TR}


# ------------------------------------------------------------------ chapter 04


def layer_row(l, routed=0.5, cost=0.005, half=0.002, random_gain=(0.01, 0.03),
              auc=(0.56, 0.53, 0.59), ctx_diff=(0.0, -0.005, 0.005), tok_auc=(0.5, 0.49, 0.51),
              mlp_gain=None, near=0.7, top=0.7, auc_train=None):
    row = {"layer": l, "gate": {"routed": routed, "cost": cost, "ci": (cost - half, cost + half),
                                "ci_family": (cost - half, cost + half)},
           "random": {"cost": cost + 0.02, "vs_gate_ci_family": random_gain,
                      "vs_gate": sum(random_gain) / 2},
           "all_linear": {"cost": 2 * cost, "ci": (2 * cost - half, 2 * cost + half)},
           "auc_train": auc[0] + 0.01 if auc_train is None else auc_train,
           "auc": {"linear:x": list(auc), "linear:h": list(auc), "linear:c": list(auc),
                   "linear:e": list(tok_auc)},
           "auc_family": {"linear:x": list(auc), "linear:h": list(auc), "linear:e": list(tok_auc)},
           "auc_diff_family": {"linear:c−linear:h": list(ctx_diff),
                               "linear:e−linear:h": [tok_auc[0] - auc[0]] * 3},
           "delta": {"share_abs_below_0.05": near, "share_of_total_from_top_10pct": top}}
    if mlp_gain is not None:
        row["auc_diff_family"]["mlp-16−linear:x"] = list(mlp_gain)
    return row


def two_phase_run(gated, control, seeds):
    by_seed = [{"seed": k, "start_ppl": 20.0, "phase1_ppl": 19.5, "phase2_soft_ppl": gated + 0.1 * k,
                "phase2_hard_ppl": gated, "control_ppl": control + 0.05 * k, "curve": FLAT}
               for k in range(seeds)]
    return {"start_ppl": 20.0, "phase1_ppl": 19.5, "phase2_soft_ppl": gated,
            "phase2_hard_ppl": gated, "control_ppl": control, "mean_gate": {"2": 0.4}, "seed": 0,
            "by_seed": by_seed}


def f04(rows=None, compound=(0.01, 0.005, 0.015, 0.2), nofly=(0.0, -0.1, 0.1), found=100,
        two_phase=(18.0, 19.0), seeds=1, **row_kw):
    rows = rows or [layer_row(l, **row_kw) for l in range(10)]
    cost, lo, hi, saved = compound
    rep = {"per_layer": rows, "tokens": {"gate": 3072, "select": 2048, "eval": 2560},
           "n_layers": len(rows),
           "compound": {"all": {"cost": cost, "ci": (lo, hi), "flops_saved": saved},
                        "k_star": 2, "chosen": {"cost": 0.001, "flops_saved": 0.02}}}
    r, rlo, rhi = nofly
    tr = {"n_nofly": found, "found": found, "r_nofly": r, "r_nofly_ci": [rlo, rhi],
          "n_common": 500, "r_common": 0.1, "r_common_ci": [0.05, 0.2]}
    return {"pretrained": {"smollm2-135m": rep}, "pair": {},
            "nofly": {"smollm2-135m": {"layer": 5, "by_target": {"shakespeare": tr,
                                                                 "pydocs (test split)": tr}}},
            "two_phase": {k: two_phase_run(*two_phase, seeds) for k in ("neox-seq", "neox-par")}}


def test_ch04_routing():
    S = settings(c4)
    def tr(F):  # the transfer's rule (SmolLM2's gates)
        return book(c4.claim_gate_routing(F, S))
    assert tr(f04()) == R
    # random routing does not enter the paper's claim: cheap routing alone decides it
    assert tr(f04(random_gain=(-0.03, -0.01))) == R
    assert tr(f04(cost=0.05)) == NR
    assert tr(f04(routed=0.1)) == NR
    assert tr(f04(cost=0.01, half=0.02)) == INC
    # gates at chance held out can only understate what routing saves: cheap routing found
    # stands (the row says which control failed), costly routing is no verdict
    c = c4.claim_gate_routing(f04(auc=(0.5, 0.48, 0.52)), S)
    assert c.evidence["transfer"]["verdict"] == TR
    assert "beat chance" in c.evidence["transfer"]["stands"]
    c = c4.claim_gate_routing(f04(auc=(0.5, 0.48, 0.52), cost=0.05), S)
    assert c.evidence["transfer"]["verdict"] == INC
    assert "beat chance" in c.evidence["transfer"]["reason"]
    # the author's sweeps decide the headline on their points: GPT-2 Large's best-of-four gates
    # route ≥ 25 % at < 1 % at 34 of 36 layers; GPT-2 Medium's one gate on the paper's 12k
    # evaluation at 14 of 23 (one architecture shows what a gate can do)
    a = c.evidence["authors' data"]
    assert c.verdict == R and c.shows == "consistency check" and a["reads"] == "points"
    assert "34 of 36" in a["reason"] and "gpt2-medium: reproduced (14 of 23" in a["reason"]


def test_ch04_gate_against_random_routing():
    S = settings(c4)
    book = c4.claim_gate_vs_random
    assert verdict(book, f04(), S) == R and book(f04(), S).kind == "book"
    # the control is read: random routing better than the gate → not reproduced
    assert verdict(book, f04(random_gain=(-0.03, -0.01)), S) == NR
    # an interval that reaches both 0 and the margin, at every layer: undecided
    assert verdict(book, f04(random_gain=(-0.01, 0.01)), S) == INC
    # better than random, but by less than the margin (a quarter of random's cost): not enough
    assert verdict(book, f04(random_gain=(0.001, 0.004)), S) == NR
    # half the layers clearly better, half undecided: the share is reached
    rows = [layer_row(l, random_gain=(0.01, 0.03) if l % 2 else (-0.01, 0.03)) for l in range(10)]
    assert verdict(book, f04(rows=rows), S) == R
    rows = [layer_row(l, random_gain=(0.01, 0.03) if l < 4 else (-0.01, 0.03)) for l in range(10)]
    assert verdict(book, f04(rows=rows), S) == INC
    # the gates over-fit: a gate that still beats random routing stands; one that does not
    # could be a gate fitted badly, so that is no verdict
    c = book(f04(auc_train=0.9), S)
    assert c.verdict == R and "over-fit" in c.note
    c = book(f04(auc_train=0.9, random_gain=(-0.03, -0.01)), S)
    assert c.verdict == INC and "over-fit" in c.needs


def test_ch04_auc():
    """The headline is the author's held-out AUCs against the text's band (a consistency
    check, reproduced); the book's own gates are the transfer, judged by the rule here."""
    S = settings(c4)

    def tr(F):
        c = c4.claim_gate_auc(F, S)
        assert c.verdict == R and c.reason.startswith("authors' data")
        v = c.evidence["transfer"]["verdict"]
        return {TR: R, PTR: P, DNT: NR}.get(v, v)
    assert tr(f04()) == R
    # a gate at chance is outside the paper's band (0.54–0.61): the claim fails
    assert tr(f04(auc=(0.5, 0.48, 0.52))) == NR
    assert tr(f04(auc=(0.4, 0.38, 0.42))) == NR
    assert tr(f04(auc=(0.8, 0.78, 0.82))) == NR  # not modest
    assert tr(f04(auc=(0.55, 0.45, 0.7))) == INC


def test_ch04_larger_gates():
    """The author's sweeps decide the headline on their points (Pythia-2.8B: two larger gates
    within 24K parameters more than 1 % cheaper while routing as many tokens: not reproduced);
    the book's own MLP gates are the transfer, judged by the rule here."""
    S = settings(c4)

    def tr(F):
        c = c4.claim_larger_gates(F, S)
        assert c.verdict == NR and c.reason.startswith("authors' data")
        v = c.evidence["transfer"]["verdict"]
        return {TR: R, PTR: P, DNT: NR}.get(v, v)
    assert tr(f04()) == NRUN  # no MLP gate measured: the transfer is not run
    assert tr(f04(mlp_gain=(0.0, -0.005, 0.005))) == R
    assert tr(f04(mlp_gain=(0.05, 0.03, 0.07))) == NR
    assert tr(f04(mlp_gain=(0.01, -0.01, 0.03))) == INC


def test_ch04_context_not_token():
    S = settings(c4)

    def transfer(F):
        """The author's own AUC files decide the headline on their points, by the paper's
        criterion (tex line 139: context ≈ full ≫ token) on the layers whose token and context
        parts are not collinear (Pythia-410M's L0 is left out): context within 0.004 of full at
        every layer (tex line 39), all 6; full beats token by more than 0.004 at 80 % of each
        model's layers (the book's share: the paper gives the token clause no scope; models are
        settings), GPT-2 Medium 2 of 3 (its L1 does not): partly. The transfer is judged
        beside them."""
        c = c4.claim_context_not_token(F, S)
        assert c.verdict == P and c.reason.startswith("authors' data")
        assert c.parts == {"context ≈ full": R, "full ≫ token": NR}
        return {TR: R, PTR: P, DNT: NR}.get(c.evidence["transfer"]["verdict"],
                                    c.evidence["transfer"]["verdict"])

    ok = dict(ctx_diff=(0.0, -0.002, 0.002))  # within the paper's 0.004
    assert transfer(f04(**ok)) == R
    # a token gate as good as the full gate is not "≫": the token part fails (the old rule,
    # "token within 0.07 of chance", passed it)
    assert transfer(f04(**ok, tok_auc=(0.56, 0.55, 0.565))) == P
    assert transfer(f04(**ok, tok_auc=(0.62, 0.58, 0.65))) == P
    assert transfer(f04(ctx_diff=(-0.05, -0.07, -0.03), tok_auc=(0.62, 0.58, 0.65))) == NR
    # context undecided, full above token by 0.01 (> 0.004): the token part alone holds
    assert transfer(f04(ctx_diff=(0.0, -0.03, 0.03), tok_auc=(0.55, 0.47, 0.63))) == P
    assert transfer(f04(ctx_diff=(0.0, -0.03, 0.03), tok_auc=(0.557, 0.47, 0.63))) == INC


def test_ch04_nofly_null_claim_needs_power():
    """The transfer reads the paper's "r < 0.05" (tex lines 19, 624) on its interval: below it
    no transfer, above it transfer, crossing it undecided. The author's stored lists decide the
    headline on their points (test_referee_round4: author_nofly_cross)."""
    S = settings(c4)

    def tr(F):
        c = c4.claim_nofly(F, S)
        return c, {TR: R, DNT: NR}.get(c.evidence["transfer"]["verdict"],
                                       c.evidence["transfer"]["verdict"])

    assert tr(f04(nofly=(0.0, -0.03, 0.03)))[1] == R  # below 0.05
    assert tr(f04(nofly=(-0.3, -0.5, -0.1)))[1] == R  # a negative r transfers nothing either
    assert tr(f04(nofly=(0.0, -0.1, 0.1)))[1] == INC  # crosses 0.05 (the old ±0.2 passed)
    assert tr(f04(nofly=(0.6, 0.4, 0.75)))[1] == NR
    c, v = tr(f04(nofly=(0.02, -0.6, 0.6), found=10))  # ~10 tokens: no power
    assert v == INC and "crosses 0.05" in c.evidence["transfer"]["reason"]
    assert tr(f04(nofly=(None, None, None), found=2))[1] == INC
    assert c.verdict == c.evidence["authors' data"]["verdict"] == R


def test_ch04_delta_skew():
    """The author's cluster percentiles decide the headline (at most ~80 % near-linear at L1,
    L12, L23: not reproduced); the book's SmolLM2 δ is the transfer, judged by the rule here."""
    S = settings(c4)

    def tr(near, top, swing=0.0):
        c = c4.claim_delta_skew(f04(rows=[layer_row(l, near=near + 0.005 * l + swing * (-1) ** l,
                                                    top=top + swing * (-1) ** l)
                                          for l in range(10)]), S)
        assert c.verdict == NR and c.reason.startswith("authors' data")
        v = c.evidence["transfer"]["verdict"]
        return {TR: R, PTR: P, DNT: NR}.get(v, v)
    # "near-linear" against the paper's 90 % (tex line 522): 70 % no longer passes
    assert tr(0.93, 0.7) == R
    assert tr(0.7, 0.7) == P
    assert tr(0.2, 0.7) == P
    assert tr(0.2, 0.2) == NR
    assert tr(0.9 - 0.0225, 0.5, swing=0.05) == INC


def test_ch04_compound():
    S = settings(c4)
    # the author's files cannot answer the sentence (its model is GPT-2 Medium, whose stored
    # run gates layer 0; Pythia-1B's is in no sentence of the text): the transfer to SmolLM2
    # is the only decided evidence, judged by the rule
    def transfer(F):
        c = c4.claim_compound(F, S)
        assert c.evidence["authors' data"]["verdict"] == NRUN
        assert c.verdict == c.evidence["transfer"]["verdict"]
        return c.evidence["transfer"]["verdict"]

    assert transfer(f04(compound=(0.01, 0.005, 0.015, 0.2))) == TR
    assert transfer(f04(compound=(2.0, 1.8, 2.4, 0.24))) == DNT
    assert transfer(f04(compound=(0.01, 0.005, 0.015, 0.05))) == DNT
    assert transfer(f04(compound=(0.02, 0.01, 0.03, 0.2))) == INC


def test_ch04_gated_negative_regularization_is_a_proportion():
    S = settings(c4)
    rows = [layer_row(l) for l in range(9)] + [layer_row(9, cost=-0.01)]
    fn = c4.claim_gated_negative_regularization
    assert book(fn(f04(rows=rows), S)) == R  # 1 of 10
    # none of 30 improves and every one is clearly worse: below the paper's 4 of 23
    assert book(fn(f04(rows=[layer_row(l) for l in range(30)]), S)) == NR
    # none of 10: too few layers to place the share below 4/23
    assert book(fn(f04(), S)) == INC
    # none clearly better or worse: undecided layers could all improve
    assert book(fn(f04(rows=[layer_row(l, cost=0.0) for l in range(30)]), S)) == INC
    # the author's GPT-2 Medium sweep holds one gate architecture (6,151 parameters at every
    # layer), not the best of the four the text's 4 of 23 counts: not run; GPT-2 Large's 11 of
    # 36 is its own row, reported here and not counted twice (before: parts, read `partly`;
    # then models as settings, GPT-2 Large deciding alone)
    c = fn(f04(rows=rows), S)
    a = c.evidence["authors' data"]
    assert a["verdict"] == NRUN and "one architecture" in a["reason"]
    assert "0 of 23" in a["measured"] and "P3.large-gated-beats-baseline" in a["measured"]
    assert c.verdict == TR  # the transfer alone decides, in its own words


def with_pair(F, cost=0.02, curve=FLAT, nonlinear_layer=1):
    """`F` with a 3-layer matched pair trained to its plateau, one of whose MLPs is nonlinear
    (all-linear cost 2·cost): chapter 04's pair control passes when it is the middle one."""
    F["pair"] = {k: {"n_layers": 3, "curve": curve,
                     "per_layer": [layer_row(l, cost=cost if l == nonlinear_layer else 0.0)
                                   for l in range(3)]}
                 for k in ("neox-seq", "neox-par")}
    for run in F.get("two_phase", {}).values():  # each seed's learning curve
        for r in run.get("by_seed", []):
            r["curve"] = curve
    return F


def test_ch04_two_phase_per_model_over_seeds():
    S = settings(c4)
    c = c4.claim_two_phase(with_pair(f04(two_phase=(15.0, 19.0))), S)
    rep = c.evidence["reproduction"]
    assert rep["verdict"] == INC and "no interval" in rep["reason"]  # models are not seeds
    # …the author's stored run then decides, on its points: the control (18.25 PPL at 2,000
    # steps) ends below the gated model (19.00): the stored points contradict the text
    assert c.verdict == NR and c.evidence["authors' data"]["reads"] == "points"
    assert verdict(c4.claim_two_phase, with_pair(f04(two_phase=(15.0, 19.0), seeds=3)), S) == R
    assert verdict(c4.claim_two_phase, with_pair(f04(two_phase=(19.0, 15.0), seeds=3)), S) == NR
    # the first layer nonlinear, the middle one (what two-phase linearizes) not: nothing for a
    # gate to win back, so "the control does as well" is no verdict — while a gated run that
    # beats the control all the same stands
    c = c4.claim_two_phase(with_pair(f04(two_phase=(19.0, 15.0), seeds=3), nonlinear_layer=0), S)
    assert c.evidence["reproduction"]["verdict"] == INC
    assert "middle MLPs are nonlinear" in c.evidence["reproduction"]["reason"]
    c = c4.claim_two_phase(with_pair(f04(two_phase=(15.0, 19.0), seeds=3), nonlinear_layer=0), S)
    assert c.evidence["reproduction"]["verdict"] == R
    c = c4.claim_two_phase(with_pair(f04(two_phase=(19.0, 19.05), seeds=3)), S)
    assert c.evidence["reproduction"]["verdict"] == INC
    # the positive control: a pair whose MLPs are linear, or that did not plateau, cannot show
    # the gated run failing to beat the control (it guards the negative finding)
    for F in (with_pair(f04(two_phase=(19.0, 15.0), seeds=3), cost=0.001),
              with_pair(f04(two_phase=(19.0, 15.0), seeds=3), curve=list(range(20, 0, -1))),
              f04(two_phase=(19.0, 15.0), seeds=3)):
        c = c4.claim_two_phase(F, S)
        assert c.evidence["reproduction"]["verdict"] == INC
        assert "positive control failed" in c.evidence["reproduction"]["reason"]


# ------------------------------------------------------------------ chapter 05


def f05(err=1e-12, miss=1.0, best=(1e-4, 1e-4), degen=(0.5, 0.5), dyck_sparse=(1.0, 1.0),
        dyck_random=(0.95, 0.951), hop=None):
    F = {"construction": [{"max |UT − target|": err, "random program: max |UT − target|": miss}],
         "width_per_d": {"2": [9, 45, 189, 729, 2673, 9477]},
         "random_universality": {f"t{i}": [{"rel_error": b, "degenerate": False, "m": 64,
                                            "rel_error_token_position": 0.6},
                                           {"rel_error": d, "degenerate": True, "m": 64,
                                            "rel_error_token_position": 0.6}]
                                 for i, (b, d) in enumerate(zip(best, degen))},
         "runs": []}

    def add(task, kind, setting, accs):  # every run trained until it stalled
        F["runs"] += [{"task": task, "kind": kind, "setting": setting, "seed": s,
                       "acc_train_len": a, "steps": 1000, "stalled": True,  # hop_steps: 50
                       "val_curve": [[950, a], [1000, a]]} for s, a in enumerate(accs)]

    add("dyck", "trained", "attention-only", (1.0, 1.0))
    add("dyck", "sparse", "attention-only", dyck_sparse)
    add("dyck", "random", "attention-only", dyck_random)
    for kind, setting, accs in hop or []:
        add("hop1", kind, setting, accs)
    return F


HOP_OK = [("trained", "attention-only", (0.99, 0.98)), ("sparse", "attention-only", (0.3, 0.35)),
          ("random", "attention-only", (0.35, 0.3)), ("trained", "+residual+LN", (0.99, 0.99)),
          ("sparse", "+residual+LN", (1.0, 1.0)), ("random", "+residual+LN", (0.9, 0.905)),
          ("trained", "+residual+LN+MLP", (0.99, 0.99)),
          ("random", "+residual+LN+MLP", (0.97, 0.98))]


def hop_with(**changes):
    out = []
    for kind, setting, accs in HOP_OK:
        out.append((kind, setting, changes.get(f"{kind}|{setting}", accs)))
    return out


def test_ch05_construction_and_universality():
    S = settings(c5)
    # the book's construction is exact; the paper's O(HLd) one is not built here, so the
    # paper's claim is `not run` (its width never `not reproduced`, whatever the book's own
    # width does), the construction's reading kept beside it
    for widths in ([9, 45, 189, 729, 2673, 9477], [4 * (L + 1) for L in range(6)]):
        c = c5.claim_sparse_construction({**f05(), "width_per_d": {"2": widths}}, S)
        assert c.verdict == NRUN and c.construction["verdict"] == P
        assert c.construction["parts"] == {"exact simulation through E": R,
                                           "width O(HLd)": NRUN}
    assert verdict(c5.claim_sparse_construction, f05(err=0.1), S) == NR
    assert verdict(c5.claim_sparse_construction, f05(miss=1e-6), S) == INC
    assert verdict(c5.claim_random_universal, f05(), S) == R
    assert verdict(c5.claim_random_universal, f05(degen=(1e-4, 0.5)), S) == INC  # control
    assert verdict(c5.claim_random_universal, f05(best=(0.3, 0.2)), S) == INC
    # three seeds of one target: the search gains nothing over the UT that cannot attend
    seeds3 = {"random_universality": {"t0": [
        {"rel_error": e, "degenerate": dg, "m": 64, "rel_error_token_position": 0.6}
        for e, dg in ((0.44, False), (0.45, True), (0.47, False), (0.46, True), (0.43, False),
                      (0.45, True))]}}
    # …which says `not reproduced` only where the program was also solved for exactly: a
    # gradient search that gains nothing may have stalled for the optimiser's reasons
    c = c5.claim_random_universal({**f05(), **seeds3}, S)
    assert c.verdict == INC and "positive control failed" in c.needs

    def exact(errors, planted, m=32, name="t0"):
        runs = [{"m": m, "seed": i, "planted": False, "rel_error": e} for i, e in enumerate(errors)]
        runs += [] if planted is None else [{"m": m, "seed": 0, "planted": True, "rel_error": planted}]
        return {name: runs}

    def ru(errors, planted, F=None):
        return verdict(c5.claim_random_universal, {**f05(), **seeds3, **(F or {}),
                                                   "random_universality_exact":
                                                   exact(errors, planted)}, S)

    # the exact solve stalls, the solver recovers a planted program, the search gains nothing
    assert ru((0.44, 0.45), 1e-12) == NR
    # …but not where the solver could not have found a program: no planted one, or it missed it
    assert ru((0.44, 0.45), None) == INC
    assert ru((0.44, 0.45), 0.3) == INC
    # the exact solve reaches float64's precision on every seed: reproduced, whatever the search
    assert ru((1e-12, 3e-12), 0.3) == R
    assert ru((1e-12,), 1e-12) == INC  # one seed decides nothing
    # one target solved exactly, the other stalled where the search still gains: the sizes
    # are one claim's (all_of), not stated parts — undecided, not partly
    both = {**exact((1e-12, 2e-12), 1e-12, name="t0"), **exact((0.2, 0.25), 1e-12, name="t1")}
    c = c5.claim_random_universal({**f05(best=(0.3, 0.3)),
                                   "random_universality_exact": both}, S)
    assert c.verdict == INC and not c.parts and "t0: reproduced" in c.reason
    assert c.positive_control["passed"] is True
    # …a solver that could tell on no target (none simulated, no planted program recovered)
    # fails its control
    none = {**exact((0.2, 0.25), 0.3, name="t0"), **exact((0.2, 0.25), 0.3, name="t1")}
    c = c5.claim_random_universal({**f05(best=(0.3, 0.3)), "random_universality_exact": none}, S)
    assert c.verdict == INC and c.positive_control["passed"] is False
    # …and an exact solve missing on one target is a failed control
    c = c5.claim_random_universal({**f05(best=(0.3, 0.3)), "random_universality_exact":
                                   exact((1e-12, 2e-12), 1e-12, name="t0")}, S)
    assert c.verdict == INC and "positive control failed" in c.needs
    # …and one that gains clearly but stalls above the exact level stays undecided
    for r in seeds3["random_universality"]["t0"]:
        r["rel_error"] = r["rel_error"] - (0.0 if r["degenerate"] else 0.3)
    assert verdict(c5.claim_random_universal, {**f05(), **seeds3}, S) == INC
    assert ru((0.14, 0.15), 1e-12, seeds3) == INC
    assert verdict(c5.claim_lower_bound, f05(), S) == NRUN


def test_ch05_looped():
    S = settings(c5)

    def looped(accs, ref=(1.0, 1.0)):
        F = f05()
        F["runs"] += [{"task": "dyck", "kind": k, "setting": "+residual+LN", "seed": s,
                       "acc_train_len": a} for k, v in (("random (looped)", accs), ("trained", ref))
                      for s, a in enumerate(v)]
        return F

    # its construction part is never decided here; the programmed looped UT is the book's
    # own test, so the paper's claim is `not run` and that reading is the row's construction
    c = c5.claim_looped(looped((0.98, 0.99)), S)
    assert c.verdict == NRUN and c.construction["verdict"] == P
    assert c.construction["parts"]["looped construction"] == NRUN
    assert verdict(c5.claim_looped, looped((0.6, 0.62)), S) == NR
    assert verdict(c5.claim_looped, looped((0.9, 1.0)), S) == INC
    # a reference that does not learn Dyck-1 in this setting decides nothing
    c = c5.claim_looped(looped((0.6, 0.62), ref=(0.6, 0.6)), S)
    assert c.verdict == NRUN and c.construction["verdict"] == INC
    assert "positive control failed" in c.construction["reason"]


def test_ch05_dyck():
    S = settings(c5)
    assert verdict(c5.claim_dyck_sparse, f05(), S) == R
    assert verdict(c5.claim_dyck_sparse, f05(dyck_sparse=(0.6, 0.62)), S) == NR
    # 100 % on both seeds: a binomial interval over the held-out strings, not zero-width
    assert verdict(c5.claim_dyck_sparse, f05(dyck_sparse=(0.96, 0.98)), S) == INC
    assert verdict(c5.claim_dyck_sparse, f05(dyck_sparse=(0.9, 1.0)), S) == INC
    assert verdict(c5.claim_dyck_sparse, f05(dyck_sparse=(0.9, 0.9)), S) == NR
    assert verdict(c5.claim_dyck_sparse, f05(dyck_sparse=(1.0,)), S) == INC  # one seed
    assert verdict(c5.claim_dyck_random, f05(), S) == R
    assert verdict(c5.claim_dyck_random, f05(dyck_random=(0.5, 0.52)), S) == NR  # chance
    assert verdict(c5.claim_dyck_random, f05(dyck_random=(0.8, 1.0)), S) == INC


def test_ch05_khop_needs_a_trained_reference():
    S = settings(c5)
    weak = hop_with(**{"trained|attention-only": (0.4, 0.4), "trained|+residual+LN": (0.4, 0.4),
                       "trained|+residual+LN+MLP": (0.4, 0.4)})
    for fn in (c5.claim_khop_attention_only, c5.claim_khop_random_mlp):
        c = fn(f05(hop=weak), S)  # the positive control failed: undecided, and why
        assert c.verdict == INC and "positive control failed" in c.needs
    # the reference compared must learn the task in the very setting compared: a reference
    # that learns it only with MLPs does not license the attention-only comparison
    only_mlp = hop_with(**{"trained|attention-only": (0.8, 0.8)})
    assert verdict(c5.claim_khop_attention_only, f05(hop=only_mlp), S) == INC
    # residual + LN: the frozen models against the paper's figures; the budget suffices when a
    # model of this shape (the trained one, or the sparse UT) learns the hop. The sparse part
    # is the book's own construction: not run, so the row reads at best partly
    assert verdict(c5.claim_khop_residual_ln, f05(hop=weak), S) == P
    weaker = hop_with(**{"trained|+residual+LN": (0.4, 0.4), "sparse|+residual+LN": (0.5, 0.5)})
    assert verdict(c5.claim_khop_residual_ln, f05(hop=weaker), S) == INC
    assert verdict(c5.claim_khop_attention_only, f05(hop=HOP_OK), S) == R
    assert verdict(c5.claim_khop_attention_only, f05(hop=hop_with(
        **{"random|attention-only": (0.97, 0.98)})), S) == NR
    assert verdict(c5.claim_khop_attention_only, f05(hop=hop_with(
        **{"random|attention-only": (0.5, 0.9)})), S) == INC
    # the book's sparse UT keeps a residual path of its own: never the attention-only arm
    # compared, however well it does
    assert verdict(c5.claim_khop_attention_only, f05(hop=hop_with(
        **{"sparse|attention-only": (0.97, 0.98)})), S) == R
    c = c5.claim_khop_residual_ln(f05(hop=HOP_OK), S)
    assert c.verdict == P and c.parts == {"sparse ≈ 100 %": NRUN, "random ≥ 85.7 %": R}
    assert "not the paper's construction, reads reproduced" in c.reason
    assert verdict(c5.claim_khop_residual_ln, f05(hop=hop_with(
        **{"random|+residual+LN": (0.5, 1.0), "sparse|+residual+LN": (0.5, 1.0)})), S) == INC
    assert verdict(c5.claim_khop_residual_ln, f05(hop=hop_with(
        **{"random|+residual+LN": (0.3, 0.32)})), S) == NR
    assert verdict(c5.claim_khop_residual_ln, f05(hop=hop_with(
        **{"random|+residual+LN": (0.3, 0.32), "sparse|+residual+LN": (0.3, 0.33)})), S) == NR
    assert verdict(c5.claim_khop_random_mlp, f05(hop=HOP_OK), S) == R
    assert verdict(c5.claim_khop_random_mlp, f05(hop=hop_with(
        **{"random|+residual+LN+MLP": (0.6, 0.61)})), S) == NR
    assert verdict(c5.claim_khop_random_mlp, f05(hop=hop_with(
        **{"random|+residual+LN+MLP": (0.92, 0.9)})), S) == INC  # no effect


def test_ch05_runs_stopped_at_the_cap_block_only_what_they_flatter():
    S = settings(c5)
    F = f05(hop=HOP_OK)
    assert verdict(c5.claim_khop_attention_only, F, S) == R

    def capped(F, kind, setting="attention-only"):  # still gaining 10 points at the cap
        F = copy.deepcopy(F)
        for r in F["runs"]:
            if r["setting"] == setting and r["kind"] == kind:
                r["stalled"] = False
                r["val_curve"] = [[950, r["acc_train_len"] - 0.1], [1000, r["acc_train_len"]]]
        return F

    c = c5.claim_khop_attention_only(capped(F, "random"), S)  # a frozen model still learning
    assert c.verdict == INC and "at their plateau" in c.needs
    # a frozen model that matches the trained one is a finding of no gap: a frozen model
    # stopped early can only understate itself, so it does not block that finding
    matched = capped(F, "random")
    for r in matched["runs"]:
        if r["setting"] == "attention-only" and r["kind"] == "random":
            r["acc_train_len"] = 0.985
    assert verdict(c5.claim_khop_attention_only, matched, S) == NR
    # a reference stopped at the cap blocks that finding of no gap, not a gap it shows
    assert c5.claim_khop_attention_only(capped(matched, "trained"), S).verdict == INC
    assert verdict(c5.claim_khop_attention_only, capped(F, "trained"), S) == R
    old = copy.deepcopy(F)  # results from before runs recorded their curves
    for r in old["runs"]:
        del r["val_curve"]
    assert c5.claim_khop_attention_only(old, S).verdict == INC
    # one seed of an arm at the cap, still gaining a little: the arm as a whole is at its
    # plateau when its mean gain over seeds is below the stall rule's point
    one = copy.deepcopy(F)
    r = next(r for r in one["runs"] if r["setting"] == "attention-only" and r["kind"] == "random")
    r["stalled"], r["val_curve"] = False, [[950, r["acc_train_len"] - 0.015], [1000, r["acc_train_len"]]]
    assert verdict(c5.claim_khop_attention_only, one, S) == R
    # the gain from frozen MLPs: both arms frozen, either stopped short blocks both ways
    assert verdict(c5.claim_khop_random_mlp, F, S) == R
    assert c5.claim_khop_random_mlp(capped(F, "random", "+residual+LN"), S).verdict == INC


def test_ch05_a_run_stopped_on_a_temporary_plateau_is_flagged():
    # a frozen UT can sit near 45 % for thousands of steps, then climb: a run stopped there,
    # before the slowest seed of its arm had climbed, is flagged; it understates its arm
    S = settings(c5)
    F = f05(hop=HOP_OK)
    for r in F["runs"]:
        if r["kind"] == "random" and r["setting"] in ("+residual+LN", "+residual+LN+MLP"):
            r["steps"] = 3000 if r["seed"] == 0 else 5000
            r["acc_train_len"] = 0.45 if (r["seed"], r["setting"]) == (0, "+residual+LN") else 0.98
    F["runs"] += [dict(r, seed=2, acc_train_len=0.97) for r in F["runs"]
                  if r["kind"] == "random" and r["setting"] == "+residual+LN" and r["seed"] == 1]
    F["runs"] += [dict(r, seed=2, acc_train_len=0.98) for r in F["runs"]
                  if r["kind"] == "random" and r["setting"] == "+residual+LN+MLP" and r["seed"] == 1]
    c = c5.claim_khop_random_mlp(F, S)  # both arms frozen: the flagged run blocks both ways
    assert c.verdict == INC and "stopped early: hop1 random seed 0" in c.needs
    # the frozen models against the paper's figures: a run stopped early can only understate
    # them, so a finding that they reach the figure stands
    ok = copy.deepcopy(F)
    for r in ok["runs"]:
        if r["kind"] == "random" and r["setting"] == "+residual+LN" and r["seed"] == 0:
            r["acc_train_len"] = 0.89  # stopped early, yet the arm clears 82.7 %
    c = c5.claim_khop_residual_ln(ok, S)
    assert c.verdict != NR and "stopped early" in c.positive_control["measured"]
    assert "positive control failed" not in c.reason
    cl5 = importlib.import_module("nlbudget.chapters.ch05_fixed_universal.claims")
    assert cl5._stopped_early(ok, ["hop1"], "+residual+LN", ("random",)) == [
        "hop1 random seed 0 (89% at 3,000 steps)"]


def test_ch05_reference_stalls():
    from nlbudget.chapters.ch05_fixed_universal import study

    assert study._stalled([(500, 0.7), (1000, 0.705)], 500)
    assert not study._stalled([(500, 0.7), (1000, 0.75)], 500)
    assert not study._stalled([(1000, 0.7)], 1000)  # one chunk: nothing to compare
    assert [study._quarter(n) for n in (8, 50, 1000, 7)] == [2, 10, 250, 1]


def test_ch05_power_is_fixed_before_the_run():
    from nlbudget.chapters.ch05_fixed_universal import study

    p = study.POWER["P2.khop-random-mlp"]
    # the pilot: the committed full results of commit 7fe5821, hop 1, MLP − no MLP per seed
    assert np.allclose(p["pilot_values"], (-0.0035, 0.019, -0.054))
    sd = float(np.std(p["pilot_values"], ddof=1))
    # the recorded size is the calculation's, and the calculation is a power calculation:
    # at n, an interval from a true gain of 0 ends below the margin with 80 % probability
    assert study.power_n(sd, p["margin"]) == p["seeds"] == 15
    n = p["seeds"]
    half = sps.t.ppf(0.975, n - 1) * sd / np.sqrt(n)
    assert sps.norm.cdf((p["margin"] - half) / (sd / np.sqrt(n))) >= 0.79
    assert study.power_n(sd, p["margin"] / 2) > n and study.power_n(sd / 2, p["margin"]) < n
    S = settings(c5, "full")
    assert S["power_seeds"] == n
    extra = study.power_grid(S)
    assert {r[3] for r in extra} == set(range(S["hop_seeds"], n))
    assert {r[2] for r in extra} == set(p["arms"]) and {r[0] for r in extra} == {p["task"]}
    assert study.power_grid(settings(c5)) == []  # ci runs no extra seeds
    runs = [{"task": "hop1", "kind": "random", "setting": a, "seed": k} for a in p["arms"]
            for k in range(4)]
    assert study.power(S, runs)["P2.khop-random-mlp"]["seeds_run"] == {a: 4 for a in p["arms"]}


def test_ch05_a_gain_below_the_margin_is_not_a_gain():
    S = settings(c5)
    small = hop_with(**{"random|+residual+LN": (0.90, 0.905, 0.90, 0.905),
                        "random|+residual+LN+MLP": (0.905, 0.91, 0.905, 0.912)})
    F = f05(hop=small)
    c = c5.claim_khop_random_mlp(F, S)  # +0.5 points, tight: below the 3-point margin
    assert c.verdict == NR


def test_ch05_khop_judges_every_hop():
    S = {**settings(c5), "hops": "1,2"}
    F = f05(hop=HOP_OK)
    F["runs"] += [{**r, "task": "hop2"} for r in F["runs"] if r["task"] == "hop1"]
    assert verdict(c5.claim_khop_attention_only, F, S) == R
    worse = copy.deepcopy(F)
    for r in worse["runs"]:
        if r["task"] == "hop2" and r["kind"] == "random" and r["setting"] == "attention-only":
            r["acc_train_len"] = 0.98  # on hop 2 a frozen model matches the trained one
    c = c5.claim_khop_attention_only(worse, S)
    assert c.verdict == NR and "hop2" in c.measured and "hop1" in c.measured
    # hop 2 not learnt by the trained reference: hop 1's stated parts still decide, and the
    # reason says hop 2 was not run
    split = copy.deepcopy(F)
    for r in split["runs"]:
        if r["task"] == "hop2":
            r["acc_train_len"] = (0.4 if r["kind"] in ("trained", "sparse")
                                  else r["acc_train_len"])
        elif r["kind"] == "random" and r["setting"] == "+residual+LN":
            r["acc_train_len"] = 0.31  # hop 1: random far below the paper's 85.7 %
    c = c5.claim_khop_residual_ln(split, S)
    assert c.verdict == NR and "hop2: not run" in c.reason
    # an undecided gain says how many seeds would decide it at the spread seen
    noisy = copy.deepcopy(F)
    for i, r in enumerate(r for r in noisy["runs"] if r["setting"] == "+residual+LN+MLP"
                          and r["kind"] == "random"):
        r["acc_train_len"] = 0.9 + (0.05 if i % 2 else -0.04)
    c = c5.claim_khop_random_mlp(noisy, S)
    assert c.verdict == INC and "for a t interval to clear" in c.needs


# ------------------------------------------------------------------ chapter 06


def variant(ppl, acc, vs_lora_ppl=None, vs_lora_acc=None, rho_up=True, cache=(1000, 0.01, 1.0),
            ref=0.5):
    r = {"ppl": ppl, "accuracy": acc, "correct": int(acc * 200), "trainable": 100,
         "train_loss": FLAT,
         "cache_check": {"bytes": cache[0], "max_abs": cache[1], "scale": cache[2],
                         "reference_max_abs": ref}}
    r["vs_base"] = {"ppl_change": -0.1, "ppl_ci": (-0.12, -0.08)}
    if vs_lora_ppl is not None:
        r["vs_lora"] = {"ppl_change": sum(vs_lora_ppl) / 2, "ppl_ci": vs_lora_ppl,
                        "acc_diff": sum(vs_lora_acc) / 2, "acc_diff_ci": vs_lora_acc}
    r["skip_use"] = [{"layer": l, "ratio": (l if rho_up else -l) + 0.1 * (l % 2), "gate": 0.5}
                     for l in range(12)]
    # the skip is used (switching it off raises perplexity), more late or more early
    r["skip_ablation"] = [{"layer": l, "ppl_change": 0.01 * ((l if rho_up else 12 - l)
                                                             + 0.1 * (l % 2)),
                           "ci": (0.0, 0.1)} for l in range(12)]
    return r


def f06(vs_lora_ppl=(-0.2, -0.1), vs_lora_acc=(0.02, 0.08), base_acc=0.5, seeds=(0,), **kw):
    st = {"base": variant(40.0, base_acc, cache=kw.get("base_cache", (1000, 0.01, 1.0))),
          "lora": variant(36.0, 0.55),
          "pre+skip": variant(35.0, 0.6, vs_lora_ppl, vs_lora_acc, kw.get("rho_up", True),
                              kw.get("cache", (1000, 0.01, 1.0)), kw.get("ref", 0.5))}
    rho = 0.9 if kw.get("rho_up", True) else -0.9
    by_seed = [{"seed": k, "ppl_vs_lora": sum(vs_lora_ppl) / 2 + 0.01 * i,
                "acc_diff_vs_lora": sum(vs_lora_acc) / 2 + 0.005 * i, "skip_rho": rho - 0.01 * i}
               for i, k in enumerate(seeds)]
    return {"studies": {"smollm2-135m": st}, "n_items": 200, "by_seed": {"smollm2-135m": by_seed},
            "setup": {"smollm2-135m": {"k": 16, "steps": 24, "batch": 4, "window": 128,
                                       "layers": 30, "d": 576,
                                       "eval_tokens": 4096, "items": 200, "seed": seeds[0],
                                       "seeds": list(seeds)}}}


def test_ch06_probes_are_judged_against_lora_and_need_seeds():
    S = settings(c6)
    for fn in (c6.claim_ppl, c6.claim_lambada):
        c = fn(f06(), S)
        assert c.verdict == INC and "seeds" in c.needs and "LoRA" in c.control
    # the single-seed reading follows LoRA, not the frozen base (which every variant beats)
    better = c6.claim_ppl(f06(vs_lora_ppl=(-0.2, -0.1)), S).reason
    worse = c6.claim_ppl(f06(vs_lora_ppl=(0.05, 0.2)), S).reason
    assert "reading: reproduced" in better and "reading: not reproduced" in worse
    assert verdict(c6.claim_lambada, f06(base_acc=0.05), S) == NRUN  # too few right
    # the number of seeds comes from the results, not from the rule: three seeds decide
    assert verdict(c6.claim_ppl, f06(seeds=(0, 1, 2)), S) == R
    assert verdict(c6.claim_ppl, f06(vs_lora_ppl=(0.05, 0.2), seeds=(0, 1, 2)), S) == NR
    assert verdict(c6.claim_lambada, f06(vs_lora_acc=(0.04, 0.1), seeds=(0, 1, 2)), S) == R
    # intervals that hold 0 but exclude the minimum effect: not reproduced (without the
    # margin they would stay inconclusive for ever)
    assert verdict(c6.claim_lambada, f06(vs_lora_acc=(-0.01, 0.0), seeds=(0, 1, 2)), S) == NR
    assert verdict(c6.claim_ppl, f06(vs_lora_ppl=(-0.005, 0.005), seeds=(0, 1, 2)), S) == NR
    assert verdict(c6.claim_lambada, f06(vs_lora_acc=(-0.08, -0.02), seeds=(0, 1, 2)), S) == NR


def f06c(pre_acc, lora_acc, lora_ppl=(-0.12, -0.08), seeds=(0, 1, 2), base_acc=0.5):
    """Chapter 06's figures with the pre-projection variant and accuracy against the base."""
    F = f06(seeds=seeds, base_acc=base_acc)
    st = F["studies"]["smollm2-135m"]
    st["pre"] = variant(35.5, 0.6)
    st["pre"]["vs_base"].update(acc_diff=sum(pre_acc) / 2, acc_diff_ci=pre_acc)
    st["lora"]["vs_base"].update(ppl_change=sum(lora_ppl) / 2, ppl_ci=lora_ppl,
                                 acc_diff=sum(lora_acc) / 2, acc_diff_ci=lora_acc)
    for i, r in enumerate(F["by_seed"]["smollm2-135m"]):  # each seed's change vs the base
        r.update(pre_acc_vs_base=sum(pre_acc) / 2 + 0.001 * i,
                 lora_acc_vs_base=sum(lora_acc) / 2 + 0.001 * i)
    return F


def test_ch06_comprehension_in_three_parts():
    S = settings(c6)
    fn = c6.claim_comprehension
    assert verdict(fn, f06c((0.02, 0.1), (-0.01, 0.01)), S) == R
    assert verdict(fn, f06c((0.02, 0.1), (0.05, 0.1)), S) == P  # LoRA helps accuracy too
    assert verdict(fn, f06c((-0.1, -0.05), (0.05, 0.1)), S) == NR
    # LoRA learned nothing: "LoRA does not help comprehension" is no verdict, while
    # pre-projection helping it stands (the control guards the negative findings)
    c = fn(f06c((0.02, 0.1), (-0.01, 0.01), lora_ppl=(0.01, 0.05)), S)
    assert c.verdict == PTR and c.parts["LoRA not comprehension"] == INC
    assert "off the frozen base" in c.evidence["transfer"]["reason"]
    assert verdict(fn, f06c((0.02, 0.1), (-0.01, 0.01), seeds=(0,)), S) == INC  # one seed
    assert verdict(fn, f06c((0.02, 0.1), (-0.01, 0.01), base_acc=0.05), S) == NRUN
    F = f06c((0.02, 0.1), (-0.01, 0.01))
    F["studies"]["smollm2-135m"]["pre"]["train_loss"] = list(range(20, 0, -1))  # no plateau
    c = fn(F, S)
    assert c.verdict == PTR and c.parts["pre-projection helps comprehension"] == "transfers"
    F = f06c((-0.1, -0.05), (0.05, 0.1))
    F["studies"]["smollm2-135m"]["pre"]["train_loss"] = list(range(20, 0, -1))
    c = fn(F, S)
    assert c.verdict == INC and "positive control failed" in c.needs


def test_ch06_skip_by_depth():
    S = settings(c6)
    assert verdict(c6.claim_skip_by_depth, f06(), S) == INC  # one seed
    assert verdict(c6.claim_skip_by_depth, f06(seeds=(0, 1, 2)), S) == R
    assert verdict(c6.claim_skip_by_depth, f06(rho_up=False, seeds=(0, 1, 2)), S) == NR
    assert "reading: not reproduced" in c6.claim_skip_by_depth(f06(rho_up=False), S).reason
    # a skip used nowhere (switching it off never raises perplexity) has no trend to read
    unused = f06(seeds=(0, 1, 2))
    for u in unused["studies"]["smollm2-135m"]["pre+skip"]["skip_ablation"]:
        u["ppl_change"] = -abs(u["ppl_change"]) - 0.001
    c = c6.claim_skip_by_depth(unused, S)
    assert c.verdict == INC and "skip is used" in c.needs


def test_ch06_no_kv_overhead_is_a_check_that_can_fail():
    S = settings(c6)
    assert verdict(c6.claim_no_kv_overhead, f06(), S) == R
    assert verdict(c6.claim_no_kv_overhead, f06(cache=(2000, 0.01, 1.0)), S) == NR  # bytes
    assert verdict(c6.claim_no_kv_overhead, f06(cache=(1000, 0.5, 1.0)), S) == NR  # stale
    assert verdict(c6.claim_no_kv_overhead, f06(ref=0.001), S) == INC  # control cannot tell



# ------------------------------------------------------------------ chapter 07


def f07(lin=None, rf_iv=(-0.02, -0.01), asym=None, gate=None, L=30, more=()):
    """Chapter 07's figures: an atlas of one model (and the models `more` gives, each a dict
    of m07's arguments), per layer the linear cost (default rising with depth), random
    features' change against it (an interval, the same at every layer) and the other lenses."""
    atlas = {"smollm2-135m": m07(lin, rf_iv, asym, gate, L, "SmolLM2-135M")}
    for i, kw in enumerate(more):
        atlas[f"model-{i}"] = m07(**{"name": f"model {i}", **kw})
    return {"atlas": atlas}


def first07(F):
    return next(iter(F["atlas"].values()))


def m07(lin=None, rf_iv=(-0.02, -0.01), asym=None, gate=None, L=30, name="SmolLM2-135M",
        recovery=None):
    """One model's figures in chapter 07's atlas."""
    lin = lin or [0.01 + 0.002 * l for l in range(L)]
    rows = [{"layer": l, "r2_linear": 0.9, "r2_rf": 0.9, "r2_rf_held_out": 0.88, "linear": c,
             "rf": c / 2, "recovered": 0.5,
             "rf_vs_linear_ci_family": list(rf_iv)} for l, c in enumerate(lin)]
    lens = {"linear cost": lin, "random-feature recovery": recovery or [0.5] * L,
            "gate vs random": gate, "exchange asymmetry": asym, "skip use": None}
    return {"model": name, "measured": {"per_layer": rows, "width": 1536, "draws": 1,
                                                   "fit_tokens": 10000, "eval_tokens": 500,
                                                   "family_level": 0.95},
            "lenses": {k: {"values": v, "source": "chapter NN (ci)", "high": "",
                           # each lens with its noise, far below its spread (reliable); the
                           # recovery lens's comes from its intervals (`recovery_se`)
                           **({"se": [1e-9] * len(v)} if v is not None
                              and k != "random-feature recovery" else {}),
                           **({"gates_beat_chance": {"what": "gates beat chance", "measured":
                                                     "10 of 10", "passed": True},
                               "gates_not_overfit": {"what": "gates do not over-fit",
                                                     "measured": "gap +0.01", "passed": True}}
                              if k == "gate vs random" else {})}
                       for k, v in lens.items()}}


def test_ch07_random_features_recover_beyond_a_quarter_of_the_linear_cost():
    S = {**settings(c7), "n_perm": 500}
    # ppl_rf / ppl_lin − 1 ∈ [−2 %, −1 %]: a recovery of 1–2 % of perplexity
    assert verdict(c7.claim_rf_recovers, f07(rf_iv=(-0.03, -0.02)), S) == R
    # no better than the linear surrogate, or worse
    assert verdict(c7.claim_rf_recovers, f07(rf_iv=(0.0, 0.01)), S) == NR
    # better, but by less than a quarter of the linear cost (1 %–7 %): not a recovery
    assert verdict(c7.claim_rf_recovers, f07(rf_iv=(-0.001, -0.0005)), S) == NR
    assert verdict(c7.claim_rf_recovers, f07(rf_iv=(-0.05, 0.01)), S) == INC


def test_ch07_an_over_fit_read_out_decides_nothing():
    """The positive control: a read-out whose held-out R² falls more than OVERFIT_GAP below its
    fit R² gives `inconclusive` whatever the intervals say; with λ already chosen by
    cross-validation the remedy named is more fit tokens, not cross-validation again."""
    S = {**settings(c7), "n_perm": 500}
    F = f07(rf_iv=(-0.03, -0.02))  # a recovery found held out stands: over-fitting hides one
    first07(F)["measured"]["per_layer"][3]["r2_rf_held_out"] = 0.9 - c7.OVERFIT_GAP - 0.01
    c = c7.claim_rf_recovers(F, S)
    assert c.verdict == R and "over-fit" in c.note and c.positive_control["passed"] is False
    for iv in ((0.0, 0.01),):  # would be not reproduced
        F = f07(rf_iv=iv)
        first07(F)["measured"]["per_layer"][3]["r2_rf_held_out"] = 0.9 - c7.OVERFIT_GAP - 0.01
        c = c7.claim_rf_recovers(F, S)
        assert c.verdict == INC and "over-fit" in c.needs and "cross-validation" in c.needs
        for r in first07(F)["measured"]["per_layer"]:
            r["lambda_rf"] = 1.0
        c = c7.claim_rf_recovers(F, S)
        assert c.verdict == INC and "more fit tokens: ≈ 12k" in c.needs  # 10,000 × 0.06/0.05
        assert c.positive_control["passed"] is False


def test_ch07_lenses_relate_by_rank_with_a_permutation_control():
    S = {**settings(c7), "n_perm": 500}
    L = 30
    rng = np.random.default_rng(0)
    lin = list(0.01 + 0.002 * np.arange(L))
    same = list(np.arange(L) + rng.normal(0, 0.5, L))  # the same order as the linear cost
    noise = list(rng.normal(0, 1, L))
    reverse = list(-np.arange(L) + rng.normal(0, 0.5, L))
    for fn, key in ((c7.claim_linear_vs_asymmetry, "asym"), (c7.claim_linear_vs_routing, "gate")):
        assert verdict(fn, f07(lin=lin, **{key: same}), S) == R
        assert verdict(fn, f07(lin=lin, **{key: reverse}), S) == NR
        c = fn(f07(lin=lin, **{key: noise}), S)
        SEEN.setdefault(fn.__name__, set()).add(c.verdict)
        assert c.verdict in (INC, NR) and "layers" in (c.needs or c.reason)
        assert verdict(fn, f07(lin=lin, **{key: noise[:L // 3] * 3}), S) != R
        assert verdict(fn, f07(lin=lin), S) == NRUN  # the other chapter's result is missing
    # a weak relation: ρ about 0.3, its interval holding 0.3 — undecided at 30 layers
    weak = list(np.arange(L) * 0.3 + rng.normal(0, 8, L))
    assert verdict(c7.claim_linear_vs_asymmetry, f07(lin=lin, asym=weak), S) == INC

def test_ch07_a_relation_needs_lenses_that_measure_layers_not_noise():
    """Reliability (1 − mean se² / variance across layers) below MIN_RELIABILITY fails the
    positive control: `inconclusive` whatever ρ; the not-reproduced side is judged on ρ's upper
    end corrected for attenuation, so noisy lenses cannot rule a relation out."""
    S = {**settings(c7), "n_perm": 500}
    L, rng = 30, np.random.default_rng(1)
    lin = list(0.01 + 0.002 * np.arange(L))
    same = list(np.arange(L) + rng.normal(0, 0.5, L))
    reverse = list(-np.arange(L) + rng.normal(0, 0.5, L))
    for values, clean in ((same, R), (reverse, NR)):
        F = f07(lin=lin, gate=values)
        sd = float(np.std(values, ddof=1))
        first07(F)["lenses"]["gate vs random"]["se"] = [0.2 * sd] * L  # reliability 0.96
        c = c7.claim_linear_vs_routing(F, S)
        assert c.verdict == clean and c.positive_control["passed"] is True
        first07(F)["lenses"]["gate vs random"]["se"] = [2 * sd] * L  # noise 4× the spread
        c = c7.claim_linear_vs_routing(F, S)
        if clean == R:  # noise pulls ρ towards 0: a relation found through it stands
            assert c.verdict == R and "not noise" in c.note
        else:
            assert c.verdict == INC and "not noise" in c.needs and "more windows" in c.needs
    assert c7.reliability([1.0, 2.0, 3.0], [0.0] * 3) == 1.0
    assert c7.reliability([1.0, 2.0, 3.0], None) is None
    # a weakly negative ρ from a lens of reliability 0.3: the corrected upper end reaches 0.3
    weak = list(-0.2 * np.arange(L) + rng.normal(0, 4, L))
    F = f07(lin=lin, gate=weak)
    first07(F)["lenses"]["gate vs random"]["se"] = [np.sqrt(0.7) * float(np.std(weak, ddof=1))] * L
    assert c7.attenuation(first07(F), ("linear cost", "gate vs random")) < 0.6
    assert c7.claim_linear_vs_routing(F, S).verdict == INC


def test_ch07_random_features_are_judged_over_every_model_of_the_atlas():
    """The recovery rule pools the layers of every model; each model's read-out must pass the
    over-fitting control."""
    S = {**settings(c7), "n_perm": 500}
    recovers, does_not = dict(rf_iv=(-0.03, -0.02)), dict(rf_iv=(0.0, 0.01))
    assert verdict(c7.claim_rf_recovers, f07(**recovers, more=[{**recovers, "L": 18}]), S) == R
    # 30 of 48 layers recover: over half
    assert verdict(c7.claim_rf_recovers, f07(**recovers, more=[{**does_not, "L": 18}]), S) == R
    # 18 of 48 do: under half, whatever the first model shows
    assert verdict(c7.claim_rf_recovers, f07(**does_not, more=[{**recovers, "L": 18}]), S) == NR
    F = f07(**does_not, more=[{**does_not, "L": 18}])
    F["atlas"]["model-0"]["measured"]["per_layer"][2]["r2_rf_held_out"] = 0.5  # over-fits
    c = c7.claim_rf_recovers(F, S)
    assert c.verdict == INC and c.positive_control["passed"] is False
    assert "model 0: median" in c.measured and "18 layers" in c.scale


def test_ch07_lenses_relate_over_both_models_by_within_model_ranks():
    """Linear cost against recovery over two models: ranks within each model pooled, the
    permutation within models. Two models whose lenses run in the same order relate; reversed
    in both they do not; a relation made only by the models' different scales (high values in
    one model, low in the other, no order inside either) is no relation."""
    S = {**settings(c7), "n_perm": 500}
    rng = np.random.default_rng(2)
    up30, up18 = list(0.01 + 0.002 * np.arange(30)), list(0.05 + 0.01 * np.arange(18))

    def noisy(x, sd):
        return list(np.array(x) + rng.normal(0, sd, len(x)))

    same = f07(lin=up30, more=[dict(lin=up18, L=18, recovery=noisy(np.arange(18), 0.5))])
    first07(same)["lenses"]["random-feature recovery"]["values"] = noisy(np.arange(30), 0.5)
    c = c7.claim_linear_vs_recovery(same, S)
    assert c.verdict == R and "48 layers of 2 models" in c.measured
    rev = f07(lin=up30, more=[dict(lin=up18, L=18, recovery=noisy(-np.arange(18), 0.5))])
    first07(rev)["lenses"]["random-feature recovery"]["values"] = noisy(-np.arange(30), 0.5)
    assert c7.claim_linear_vs_recovery(rev, S).verdict == NR
    # scale alone: model 0's costs and recoveries all above SmolLM2's, no order inside either
    scale = f07(lin=list(rng.normal(0.01, 0.001, 30)),
                more=[dict(lin=list(rng.normal(0.5, 0.001, 18)), L=18,
                           recovery=list(rng.normal(0.9, 0.01, 18)))])
    first07(scale)["lenses"]["random-feature recovery"]["values"] = list(rng.normal(0.1, 0.01, 30))
    raw = [v for M in scale["atlas"].values() for v in M["lenses"]["linear cost"]["values"]]
    rec = [v for M in scale["atlas"].values()
           for v in M["lenses"]["random-feature recovery"]["values"]]
    assert sps.spearmanr(raw, rec).statistic > 0.5  # pooled raw values would "relate"
    assert c7.claim_linear_vs_recovery(scale, S).verdict != R
    # a weak relation, ρ about 0.3 within each model: undecided over 48 layers
    weak = f07(lin=up30, more=[dict(lin=up18, L=18, recovery=noisy(0.3 * np.arange(18), 5))])
    first07(weak)["lenses"]["random-feature recovery"]["values"] = noisy(0.3 * np.arange(30), 8)
    c = c7.claim_linear_vs_recovery(weak, S)
    SEEN.setdefault("claim_linear_vs_recovery", set()).add(c.verdict)
    assert c.verdict == INC, c.measured
    # one model: the single-model rule
    one = f07(lin=up30)
    first07(one)["lenses"]["random-feature recovery"]["values"] = noisy(np.arange(30), 0.5)
    c = c7.claim_linear_vs_recovery(one, S)
    assert c.verdict == R and "over 30 layers;" in c.measured


def test_ch07_the_recovery_relation_weighs_the_lens_noise_and_the_read_out_control():
    """The recovery lens's noise comes from its stored interval against the linear surrogate
    (se(d) · (1 + c) / c); a lens whose noise swamps its spread across layers, or a read-out
    that over-fits (the random-feature claim's control), decides nothing, however clear ρ."""
    S = {**settings(c7), "n_perm": 500}
    rng = np.random.default_rng(3)
    up30, up18 = list(0.01 + 0.002 * np.arange(30)), list(0.05 + 0.01 * np.arange(18))

    def same(rf_iv=(-0.0015, -0.001)):
        F = f07(lin=up30, rf_iv=rf_iv,
                more=[dict(lin=up18, L=18, rf_iv=rf_iv,
                           recovery=list(0.02 * np.arange(18) + rng.normal(0, 0.01, 18)))])
        first07(F)["lenses"]["random-feature recovery"]["values"] = list(
            0.01 * np.arange(30) + rng.normal(0, 0.005, 30))
        for M in F["atlas"].values():
            M["measured"]["family_level"] = 0.95
        return F

    F = same()
    se = c7.recovery_se(first07(F))
    z = sps.norm.ppf(0.975)
    assert se[0] == pytest.approx(0.0005 / (2 * z) * 1.01 / 0.01)
    assert c7.recovery_se({"measured": {"per_layer": []}}) is None  # no level: no se
    c = c7.claim_linear_vs_recovery(F, S)
    assert c.verdict == R and c.positive_control["passed"] is True, c.reason
    assert "recovery: no interval recorded" not in c.positive_control["measured"]
    assert "se" not in first07(F)["lenses"]["random-feature recovery"]  # the figures untouched
    # the same ranks, measured through an interval 40× wider: noise swamps the spread, which
    # can only pull ρ towards 0 — the relation found stands, its failed control named
    c = c7.claim_linear_vs_recovery(same(rf_iv=(-0.02, 0.0)), S)
    assert c.verdict == R and c.positive_control["passed"] is False, c.reason
    assert "not noise" in c.positive_control["what"] and "stands although" in c.note
    # the same relation, one model's read-out over-fitting: over-fitting that varies by layer
    # can make a relation as well as hide one, so here it blocks both directions
    F = same()
    F["atlas"]["model-0"]["measured"]["per_layer"][5]["r2_rf_held_out"] = 0.5
    c = c7.claim_linear_vs_recovery(F, S)
    assert c.verdict == INC and c.positive_control["passed"] is False
    assert "over-fit" in c.positive_control["measured"]


SAMPLES = {"01": lambda: (f01(), settings(c1)),
           "02": lambda: (f02(**WORSE, **ACC_WORSE, **GATES), settings(c2)),
           "03": lambda: (f03([0.01] * 30), settings(c3)),
           "04": lambda: (f04(), settings(c4)),
           "05": lambda: (f05(hop=HOP_OK), settings(c5)),
           "06": lambda: (f06(), settings(c6)),
           "07": lambda: (f07(asym=list(range(30)), gate=list(range(30))), settings(c7))}


#: Rows whose rule cannot return some verdict, and why (each a deliberate exception).
UNREACHABLE = {
    "claim_lower_bound": {R, NR, INC},  # not run: the book has no proof check of Theorem 4.1
    # not run: no simultaneous linearization in the book, none among the author's files
    "claim_simultaneous": {R, NR, INC},
    "claim_gpt2_large_max_cost": set(),
    # its width part is `not run` until the paper's O(HLd) construction is built: at best partly
    "claim_sparse_construction": {R},
    # likewise its construction part (the book builds no looped construction): at best partly
    "claim_looped": {R},
    # its sparse part is the book's own sparse UT, not the paper's (not run): at best partly
    "claim_khop_residual_ln": {R},
    # its degradation part reads no paired interval from the author's files (none exists):
    # at best partly, and a failed share leaves it undecided, not refuted
    "claim_forty_percent": {R, NR},
    # both parts read the author's points, which always decide
    "claim_lambada_degradation": {INC},
}


#: Rows judged by stated parts: they must also reach `partly`.
WITH_PARTS = {"claim_context_not_token", "claim_delta_skew",
              "claim_sparse_construction", "claim_khop_residual_ln",
              "claim_u_shape", "claim_comprehension", "claim_looped",
              "claim_skip_combines", "claim_forty_percent",
              "claim_lambada_degradation"}


def test_every_claim_function_reaches_every_verdict(monkeypatch):
    """Run every test of this file with the verdicts recorded, then check that each claim
    function was seen returning reproduced, not reproduced and inconclusive (and partly where
    it has parts) — no verdict is reachable only in theory."""
    import functools
    import itertools

    SEEN.clear()
    for ch in (c1, c2, c3, c4, c5, c6, c7):  # record calls made directly, not through verdict()
        for fn in ch.CLAIMS:
            def recorded(F, S, fn=fn):
                c = fn(F, S)  # the headline and each piece of evidence, in the rule's words
                SEEN.setdefault(fn.__name__, set()).update(
                    {TR: R, PTR: P, DNT: NR}.get(v, v)
                    for v in (c.verdict, *(e["verdict"] for e in c.evidence.values()),
                              *([c.construction["verdict"]] if c.construction else [])))
                return c
            monkeypatch.setattr(ch, fn.__name__, functools.wraps(fn)(recorded))
    for name, fn in list(globals().items()):
        if not name.startswith("test_") or name == "test_every_claim_function_reaches_every_verdict":
            continue
        grids = []  # each parametrize mark: a list of {argument: value}
        for mark in getattr(fn, "pytestmark", []):
            if mark.name == "parametrize":
                names = [a.strip() for a in mark.args[0].split(",")]
                grids.append([dict(zip(names, v if len(names) > 1 else (v,)))
                              for v in mark.args[1]])
        for combo in itertools.product(*grids):
            fn(**{k: v for d in combo for k, v in d.items()})
    missing = {}
    for ch in (c1, c2, c3, c4, c5, c6, c7):
        for fn in ch.CLAIMS:
            want = ({R, NR, INC} | ({P} if fn.__name__ in WITH_PARTS else set())) \
                - UNREACHABLE.get(fn.__name__, set())
            if not want <= SEEN.get(fn.__name__, set()):
                missing[fn.__name__] = sorted(want - SEEN.get(fn.__name__, set()))
    assert not missing, missing


def test_ch06_skip_combines_in_two_parts():
    S = settings(c6)
    fn = c6.claim_skip_combines

    def F(ppl_ci, acc_ci, seeds=(0, 1, 2), plateau=True, per_seed=True):
        F = f06(seeds=seeds)
        st = F["studies"]["smollm2-135m"]
        st["skip"] = variant(36.0, 0.55)
        st["skip"]["vs_base"].update(ppl_change=sum(ppl_ci) / 2, ppl_ci=ppl_ci,
                                     acc_change=sum(acc_ci) / 2, acc_ci=acc_ci)
        for i, r in enumerate(F["by_seed"]["smollm2-135m"]):  # each seed's change vs the base
            if per_seed:
                r.update(skip_ppl_vs_base=sum(ppl_ci) / 2 + 0.001 * i,
                         skip_acc_vs_base=sum(acc_ci) / 2 + 0.001 * i)
        if not plateau:
            st["skip"]["train_loss"] = list(range(20, 0, -1))
        return F

    assert verdict(fn, F((-0.08, -0.05), (0.02, 0.1)), S) == R
    assert verdict(fn, F((-0.08, -0.05), (-0.05, 0.05)), S) == P
    assert verdict(fn, F((-0.08, -0.05), (-0.1, -0.02)), S) == P  # lowers PPL, hurts accuracy
    # trained to its plateau, a skip that helps neither does not combine both
    assert verdict(fn, F((0.01, 0.05), (-0.1, -0.02)), S) == NR
    assert verdict(fn, F((-0.02, 0.01), (-0.05, 0.05)), S) == INC
    assert verdict(fn, F((-0.08, -0.05), (0.02, 0.1), seeds=(0,)), S) == INC  # one seed
    # three seeds trained, but the change against the base recorded for the first alone (as
    # chapter 06's results do today): one seed's interval never decides
    c = fn(F((-0.08, -0.05), (0.02, 0.1), per_seed=False), S)
    assert c.verdict == INC and "1 seed(s)" in c.reason and "by_seed" in c.needs
    # an under-trained skip can only understate: what it shows stands, "no help" does not
    assert verdict(fn, F((-0.08, -0.05), (0.02, 0.1), plateau=False), S) == R
    assert verdict(fn, F((-0.08, -0.05), (-0.1, -0.02), plateau=False), S) == P
    assert verdict(fn, F((0.01, 0.05), (-0.1, -0.02), plateau=False), S) == INC


def _frames(monkeypatch, module, **frames):
    """Chapter `module`'s reference reader returning constructed tables for `frames`."""
    import pandas as pd
    real = module.reference
    monkeypatch.setattr(module, "reference",
                        lambda name: pd.DataFrame(frames[name]) if name in frames else real(name))


def test_ch04_forty_percent_reads_the_share_and_cannot_read_degradation():
    m4 = importlib.import_module("nlbudget.chapters.ch04_adaptive_gating.authors")
    S = settings(c4)
    rows = lambda routed: {"model": ["gpt2-medium"] * 23, "layer": range(1, 24),  # noqa: E731
                           "routed_pct": [routed] * 23, "gate_pct": [0.5] * 23,
                           "gate_params": [1025, 3079, 6151] * 7 + [1025, 3079]}  # best of 4
    with pytest.MonkeyPatch.context() as mp:
        _frames(mp, m4, gpt2_medium_12k=rows(44.0))  # the paper's 12,000-token evaluation
        c = c4.claim_forty_percent(f04(), S)
        assert c.verdict == P and c.parts == {"share": R, "no measurable degradation": INC}
    with pytest.MonkeyPatch.context() as mp:
        _frames(mp, m4, gpt2_medium_12k=rows(30.0))
        assert verdict(c4.claim_forty_percent, f04(), S) == INC  # share fails, rest undecided
    # the real files: one gate architecture at every layer (not the best of four the text's
    # sentence counts): neither part can be read from them (not run); degradation is also
    # unreadable from unpaired spreads
    c = c4.claim_forty_percent(f04(), S)
    assert c.verdict == NRUN and c.parts == {"share": NRUN, "no measurable degradation": NRUN}
    assert "one architecture" in c.reason and "no stored file" in c.reason


def test_ch04_large_gated_counts_the_author_points():
    m4 = importlib.import_module("nlbudget.chapters.ch04_adaptive_gating.authors")
    S = settings(c4)
    lg = lambda gates: {"layer": range(len(gates)), "gate_pct": gates,  # noqa: E731
                        "all_linear_pct": [1.0] * len(gates), "routed_pct": [40.0] * len(gates)}
    for gates, v in ((lg([-0.1] * 11 + [0.2] * 25), R), (lg([0.2] * 36), NR),
                     (lg([0.2] * 10), INC)):  # the last: too few layers to place the share
        with pytest.MonkeyPatch.context() as mp:
            _frames(mp, m4, large_gates=gates)
            assert verdict(c4.claim_large_gated, f04(), S) == v
    c = c4.claim_large_gated(f04(), S)  # the author's sweep: 11 of 36, as the text says
    assert c.verdict == R and "11 of 36" in c.measured and c.shows == "consistency check"


def test_ch03_lambada_degradation_on_the_author_runs():
    a3 = importlib.import_module("nlbudget.chapters.ch03_linear_surrogates.authors")
    S = settings(c3)
    real = a3.finetune_runs

    def shifted(lam=None, post=None):  # the runs' LAMBADA changes, and right after linearizing
        def runs(run, layers=None, small=False):
            t = real(run, layers, small)
            if run == "control":
                return t
            t = t.assign(lambada_delta_pct=lam) if lam is not None else t
            return t.assign(post_linearization_lambada_ppl=post * t.baseline_lambada_ppl) \
                if post is not None else t
        return runs

    # the author's files: after 2,000 fine-tuning steps the linearized run's LAMBADA is +22.4 %
    # beyond the control's (one run each) — the degradation the text calls "not a linearization
    # artifact" (tex line 486) is more than the fine-tuning shift; the +36.7 % right after
    # linearizing (tex line 473) is reported (cold read 7: before, it decided)
    c = c3.claim_lambada_degradation(f03([0.01] * 30), S)
    assert c.verdict == P and c.parts == {"degrades": R, "not a linearization artifact": NR}
    assert "+22.4% beyond the control" in c.reason and "+36.7%" in c.reason
    assert c.shows == "consistency check"
    for lam, v in ((12.6, R), (20.0, P), (-5.0, P)):  # 1 %: the book's, after P3's negligible
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(a3, "finetune_runs", shifted(lam, None))
            assert verdict(c3.claim_lambada_degradation, f03([0.01] * 30), S) == v
    # the gated runs improving LAMBADA, the linearized one still beyond the control: neither part
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(a3, "finetune_runs", lambda run, layers=None, small=False: (
            real(run, layers, small).assign(lambada_delta_pct=-5.0) if run == "two-phase gated"
            else real(run, layers, small)))
        assert verdict(c3.claim_lambada_degradation, f03([0.01] * 30), S) == NR


def test_ch04_nofly_retention_against_stable_tokens():
    from nlbudget.chapters.ch04_adaptive_gating import authors_nofly as authors
    d = authors.retention_decision
    assert d(10, 100, 0.6, "x").verdict == R      # far below what stable tokens keep
    assert d(75, 100, 0.6, "x").verdict == NR     # keep it as a fixed property would
    assert d(52, 100, 0.6, "x").verdict == INC    # within the margin's reach
    import pandas as pd
    row = dict(test_std=0.1, test_n=20, build_std=0.1, build_n=50)
    stable = pd.DataFrame([{**row, "build_mean": 0.8}] * 3)  # far above the cut, precise
    noisy = pd.DataFrame([{**row, "build_mean": 0.06, "build_std": 1.0, "build_n": 10}] * 3)
    assert authors.stable_retention(stable) > 0.99
    assert authors.stable_retention(noisy) < 0.5  # selected by noise: regresses below the cut
    # simulated stable lists (δ a fixed property of each token): the reference errs low, by
    # less than 0.15 — so `reproduced` (retention below it) is conservative
    rng = np.random.default_rng(1)
    for prior_sd in (0.05, 0.1, 0.2):
        mu = rng.normal(0.0, prior_sd, 20000)
        built = mu + rng.normal(0, 0.4 / np.sqrt(12), mu.size)
        keep = built > authors.NOFLY_DELTA
        tested = mu[keep] + rng.normal(0, 0.4 / np.sqrt(8), keep.sum())
        truth = float((tested > authors.NOFLY_DELTA).mean())
        rows = pd.DataFrame({"build_mean": built[keep][:300], "build_std": 0.4, "build_n": 12,
                             "test_std": 0.4, "test_n": 8})
        assert truth - 0.15 < authors.stable_retention(rows) < truth
    # the paper's row on the author's file, read on its points, each corpus a setting: 31.5 %
    # and 22 % still no-fly, fewer than half (the book's reading of "few"); SmolLM2's 2 tokens
    # found again cannot place its share (an interval over the book's own count)
    F = {"pretrained": {"m": {}}, "nofly": {"m": {"layer": 3, "by_target": {
        "c": {"found": 2, "still_nofly": 0, "flipped": 1}}}}}
    c = c4.claim_nofly_retention(F, {"corpus": "a", "cross_corpus": "c"})
    a = c.evidence["authors' data"]
    assert a["reads"] == "points" and "47 of 149" in a["reason"] and "22 of 100" in a["reason"]
    assert c.verdict == a["verdict"] == R and not c.parts
    assert c.evidence["transfer"]["verdict"] == INC
    assert authors.few_keep(60, 100, "x", True).verdict == NR  # the rule can say no
    many = {"pretrained": {"m": {}}, "nofly": {"m": {"layer": 3, "by_target": {
        "c": {"found": 100, "still_nofly": 80, "flipped": 1}}}}}  # 80 of 100 keep it
    assert c4.claim_nofly_retention(many, {"corpus": "a", "cross_corpus": "c"}).evidence[
        "transfer"]["verdict"] == DNT
    # the book's question on the author's file: each corpus (a setting) against the share a
    # stable token would keep, on the kept share's interval (the statistic is the book's):
    # WikiText-train's 39–55 % holds the cut, LAMBADA's 28–47 % lies below it: undecided
    b = c4.claim_nofly_regression(F, {"corpus": "a", "cross_corpus": "c"})
    assert b.kind == "book" and b.verdict == INC
    assert "same domain (WikiText-103 train): inconclusive" in b.reason
    assert "cross-domain (LAMBADA): reproduced" in b.reason and "CI 39%–55%" in b.reason

    # constructed author's lists: precise tokens far above the cut, re-tested on a corpus where
    # they keep their δ (stable: not reproduced), lose it (reproduced), or are too few to tell
    def lists(**tests):
        return pd.concat([pd.DataFrame({
            "test_corpus": corpus, "test_mean": mean, "build_mean": 0.8, "build_std": 0.1,
            "build_n": 50, "test_std": 0.1, "test_n": 20, "still_nofly": mean > 0.05,
            "n_nofly": 221}, index=range(n)) for corpus, (mean, n) in tests.items()])

    real = authors.reference
    try:
        for tests, want in ((dict(a=(0.8, 100), b=(0.8, 100)), NR),
                            (dict(a=(-0.1, 100), b=(-0.1, 100)), R),
                            (dict(a=(-0.1, 3), b=(-0.1, 3)), R),  # 0 of 3: below 95 %
                            (dict(a=(-0.1, 100), b=(0.8, 100)), NR)):  # settings: all of
            authors.reference = lambda name, t=tests: lists(**t)
            assert c4.claim_nofly_regression(F, {"corpus": "a", "cross_corpus": "c"}).verdict \
                == want
    finally:
        authors.reference = real
