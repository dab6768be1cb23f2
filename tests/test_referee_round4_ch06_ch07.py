"""A ledger a referee signs, round four, chapters 06 and 07: every margin a row prints says whose
it is (the book's, stated before the data, or the paper's with its source); a relation shows the
interval its rule decides on beside the measured one; a model that is not the paper's — SmolLM2,
or the Pythia-style proxy the book trains — is a transfer in every P4 row, P4.no-kv-overhead
included. Each test fails on the rows as they were before this round."""

import copy
import importlib
import math
import re
from pathlib import Path

import numpy as np
import pytest

import test_chapter_claims as _t
from nlbudget.book import build, profiles
from nlbudget.verdicts import claims as V
from nlbudget.verdicts import results, stats

c6 = importlib.import_module("nlbudget.chapters.ch06_preprojection_probes.claims")
c7 = importlib.import_module("nlbudget.chapters.ch07_budget_atlas.claims")
R, NR, INC, NRUN = V.REPRODUCED, V.NOT_REPRODUCED, V.INCONCLUSIVE, V.NOT_RUN
PAIR = "pythia-style (neox-par)"


def _full(key: str):
    """A chapter's committed full figures and parameters, and its rows re-judged on them with
    today's rules (nothing written)."""
    stem = profiles.chapter(key).stem
    doc = results.read(stem, "full", build.committed_dir("full").parent)
    return doc["figures"], doc["parameters"]


def _rows(key: str) -> dict:
    mod = c6 if key == "06" else c7
    F, S = _full(key)
    return {c.id: c for c in mod.claims(F, S)}


def _texts(c) -> str:
    return " ".join([c.reason, c.measured, c.control, c.needs]
                    + [e["reason"] for e in c.evidence.values()])


# ------------------------------------------------ 1. each margin says whose it is


#: a margin as a row prints it, and the words that must follow it (within the same clause)
MARGINS = [(r"beyond 0\.02 ", "the book's margin"), (r"±0\.02: ", "the book's margin"),
           (r"beyond 0\.3 ", "the book's margin"), (r"(?:above|below|holds) 0\.3 \(",
                                                   "the book's margin"),
           (r"beyond 25% of its cost ", "the book's margin")]


def _unsourced(text: str) -> list:
    """The margins printed in `text` not followed, within 200 characters, by whose they are."""
    bad = []
    for pat, says in MARGINS:
        for m in re.finditer(pat, text):
            if says not in text[m.end():m.end() + 200]:
                bad.append(text[max(0, m.start() - 40):m.end() + 60])
    return bad


@pytest.mark.parametrize("key", ["06", "07"])
def test_every_margin_a_row_prints_says_it_is_the_books(key):
    """MIN_ACC_GAIN, MIN_PPL_GAIN (0.02), MIN_RHO (0.3) and RECOVER (25 %) appear in the rows'
    reasons; each is followed by whose it is (before: the bare number)."""
    rows = _rows(key)
    seen = 0
    for c in rows.values():
        text = _texts(c)
        seen += sum(len(re.findall(p, text)) for p, _ in MARGINS)
        assert not _unsourced(text), (c.id, _unsourced(text))
    assert seen  # the committed rows do print their margins


def test_the_margins_on_constructed_rows_say_whose_they_are():
    S = _t.settings(_t.c6)
    F = _t.f06(seeds=(0, 1, 2))
    for fn in (c6.claim_ppl, c6.claim_lambada, c6.claim_skip_by_depth):
        c = fn(F, S)
        assert "the book's margin" in c.reason, fn.__name__
        assert not _unsourced(_texts(c)), fn.__name__
    assert "Cohen's medium correlation" in c6.claim_skip_by_depth(F, S).reason
    c = c6.claim_comprehension(_t.f06c((0.02, 0.1), (-0.05, 0.05)), S)
    assert "±0.02: the book's margin" in c.reason


def test_the_accuracy_margin_is_sourced_as_its_comment_sources_it():
    """The row says what the constant's comment says: the book's margin, about one binomial
    standard error on P4's 500 evaluation items (quoted from the book's summary of P4) — the
    number computed, not the comment's old unsourced "35 %"."""
    src = Path(c6.__file__).read_text(encoding="utf-8")
    assert "35 %" not in src and "500-sample evaluations" in src
    assert f"{0.5 / math.sqrt(c6.PAPER_ITEMS):.1%}" in c6.ACC_MARGIN
    assert f"{c6.PAPER_ITEMS} items of P4's evaluations" in c6.ACC_MARGIN
    assert "P4 states none" in c6.PPL_MARGIN


# ------------------------------------------------ 2. the interval the rule decides on, shown


def test_linear_vs_routing_shows_the_noise_corrected_interval_it_decides_on():
    """BOOK.V.linear-vs-routing printed ρ's measured interval [−0.48, +0.24], which excludes
    0.3, beside an `inconclusive` decided on the corrected one: the row now shows that one,
    its upper end ÷ √(reliability product), computed here independently."""
    F, S = _full("07")
    M = c7.models_of(F)[0]
    a, b = "linear cost", "gate vs random"
    x = np.array([np.nan if u is None else u for u in M["lenses"][a]["values"]], float)
    y = np.array([np.nan if u is None else u for u in M["lenses"][b]["values"]], float)
    ok = np.isfinite(x) & np.isfinite(y)
    _, lo, hi = stats.spearman_interval(x[ok], y[ok])
    rel = [c7.reliability(M["lenses"][k]["values"], M["lenses"][k].get("se")) for k in (a, b)]
    up = hi / math.sqrt(rel[0] * rel[1])
    c = _rows("07")["BOOK.V.linear-vs-routing"]
    shown = f"[{lo:+.2f}, {up:+.2f}]"
    assert c.verdict == INC and hi < c7.MIN_RHO < up  # the measured excludes it, the read holds
    assert shown in c.reason and shown in c.measured
    assert f"[{lo:+.2f}, {hi:+.2f}]" in c.measured  # the measured one beside it


def test_a_relation_reason_names_the_interval_it_decides_on():
    """`relation`'s three readings each print the interval they compared with the margin,
    which lies where the verdict says (before: only the measured interval, or none)."""
    for (lo, hi, p, att), want in [((0.4, 0.8, 0.01, 0.9), R), ((-0.5, 0.2, 0.5, 0.9), NR),
                                   ((-0.5, 0.25, 0.5, 0.7), INC)]:
        d = c7.relation(lo, hi, p, att, "t")
        assert d.verdict == want
        r_lo, r_hi = (float(v) for v in re.search(r"\[([-+.\d]+), ([-+.\d]+)\]",
                                                    d.reason).groups())
        assert (r_lo, r_hi) == (round(lo, 2), round(min(hi / att, 1.0), 2))
        assert {R: r_lo > c7.MIN_RHO, NR: r_hi < c7.MIN_RHO,
                INC: r_lo <= c7.MIN_RHO <= r_hi}[want]
    assert c7.read_interval(0.5, 0.95, 0.5)[1] == 1.0  # kept inside ρ's range


# ------------------------------------------------ 3–4. a model that is not the paper's: transfer


def test_no_kv_overhead_calls_smollm2_and_the_proxy_transfers():
    """P4.no-kv-overhead called SmolLM2 (and the book's Pythia-style proxy) a reproduction, while
    every other P4 row called SmolLM2 a transfer: now each model is evidence of the kind every
    P4 row gives it, and the row reads in a transfer's words (before: `reproduced`)."""
    c = _rows("06")["P4.no-kv-overhead"]
    assert set(c.evidence) == {V.TRANSFER} and c.verdict == V.TRANSFERS
    assert c.shows == "verified at the sizes checked"
    S = _t.settings(_t.c6)
    c = c6.claim_no_kv_overhead(_t.f06(), S)
    assert set(c.evidence) == {V.TRANSFER} and c.verdict == V.TRANSFERS
    assert c6.claim_no_kv_overhead(_t.f06(cache=(2000, 0.01, 1.0)), S).verdict == \
        V.DOES_NOT_TRANSFER


def _with_model(F: dict, name: str, src: str = "smollm2-135m") -> dict:
    """Figures `F` with a second model `name`, a copy of `src`'s."""
    F = copy.deepcopy(F)
    F["studies"][name] = copy.deepcopy(F["studies"][src])
    F["setup"][name] = {**F["setup"][src], "layers": 4, "d": 32}
    F["by_seed"][name] = copy.deepcopy(F["by_seed"][src])
    return F


def test_the_books_pythia_style_proxy_is_a_transfer_the_papers_pythia_a_reproduction():
    """The Pythia-style pair the book trains from scratch (4 layers, d = 32) was a
    "reproduction" of the paper's Pythia-160M/410M in every P4 row; it is a proxy, a transfer.
    Only the paper's own models (the `paper` profile's) give a reproduction."""
    assert c6._kind(PAIR) == V.TRANSFER and c6._kind("smollm2-135m") == V.TRANSFER
    assert all(c6._kind(m) == V.REPRODUCTION for m in c6.PAPER_MODELS)
    for c in _rows("06").values():
        assert V.REPRODUCTION not in c.evidence, c.id
        assert "trained here from scratch (the paper" not in str(c.evidence), c.id
    S = _t.settings(_t.c6)
    F = _with_model(_t.f06(seeds=(0, 1, 2)), PAIR)
    c = c6.claim_ppl(F, S)
    assert set(c.evidence) == {V.TRANSFER} and c.verdict == V.TRANSFERS
    assert "a proxy the book trained from scratch" in c.evidence[V.TRANSFER]["setting"]
    # the paper's own model, where a profile loads it, is the reproduction that sets the row
    F = _with_model(_t.f06(seeds=(0, 1, 2)), "EleutherAI/pythia-160m")
    c = c6.claim_ppl(F, S)
    assert set(c.evidence) == {V.TRANSFER, V.REPRODUCTION} and c.verdict == R


def test_several_transfer_models_are_one_claim_tested_on_each():
    """Two models of one kind make one piece of evidence: the claim must hold on each
    (`all_of`); a model that cannot be judged is named, and the other decides alone."""
    S = _t.settings(_t.c6)
    F = _with_model(_t.f06(seeds=(0, 1, 2)), PAIR)
    F["studies"][PAIR]["pre+skip"]["vs_lora"]["ppl_ci"] = (0.05, 0.2)  # worse than LoRA
    for r in F["by_seed"][PAIR]:
        r["ppl_vs_lora"] = 0.1
    c = c6.claim_ppl(F, S)
    assert c.verdict == V.DOES_NOT_TRANSFER and PAIR in c.reason
    F = _with_model(_t.f06(vs_lora_acc=(0.04, 0.1), seeds=(0, 1, 2)), PAIR)
    F["studies"][PAIR]["base"]["correct"] = 5  # its base too weak: not counted
    c = c6.claim_lambada(F, S)
    assert c.verdict == V.TRANSFERS and "alone" in c.reason and PAIR in c.reason
