import csv
import json
import os

import pytest

from nlbudget import paths
from nlbudget.book import build, ledger, plan, profiles
from nlbudget.verdicts import results
from nlbudget.verdicts.results import Claim


def _settings(profile="smoke"):
    return profiles.validate("01", profile=profile, seed=0)


def test_write_and_read_round_trip(tmp_path):
    claims = [Claim("P1.kv-memory", "measured", "reproduced", control="c")]
    p = results.write_chapter(_settings(), {"x": 1.23456789, "y": [0.1, 2]}, claims, tmp_path)
    assert p == tmp_path / "smoke" / "01_gated_mlp_symmetry.json"
    doc = results.read("01_gated_mlp_symmetry", "smoke", tmp_path)
    assert doc["figures"] == {"x": 1.23457, "y": [0.1, 2]}
    assert doc["seed"] == 0 and doc["parameters"]["profile"] == "smoke"
    assert doc["environment"]["packages"]["torch"]
    assert "commit" in doc["environment"]["git"]
    assert doc["claims"][0]["verdict"] == "reproduced"


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    paths.atomic_write_text(target, "old")

    def boom(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)  # fails after the new text is half-way to disk
    with pytest.raises(OSError, match="disk full"):
        paths.atomic_write_text(target, "new" * 1000)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind


def test_failed_serialisation_writes_nothing(tmp_path):
    with pytest.raises(TypeError):
        results.write_chapter(_settings(), {"bad": object()}, [], tmp_path)
    assert not (tmp_path / "smoke").exists()


def test_nan_is_rejected(tmp_path):
    with pytest.raises(ValueError):
        results.write_chapter(_settings(), {"bad": float("nan")}, [], tmp_path)
    assert not (tmp_path / "smoke" / "01_gated_mlp_symmetry.json").exists()


def test_verdict_must_be_known():
    with pytest.raises(ValueError, match="not one of"):
        Claim("P1.kv-memory", "m", "sort of")


def test_round_floats_is_stable():
    assert results.round_floats({"a": [1 / 3, 2e-17, 0.0]}) == {"a": [0.333333, 2e-17, 0.0]}


def test_registry_has_unique_ids_and_known_parts():
    rows = results.claims_registry()
    assert len(rows) >= 30
    assert {r["part"] for r in rows} == {"I", "II", "III", "IV", "V"}
    assert {r["kind"] for r in rows} == set(results.KINDS)
    for r in rows:  # every row names its chapter (in reading order) and the section that measures it
        ch = profiles.chapter(r["chapter"])
        assert build.chapter_parts()[ch.stem] == r["part"], r["id"]  # the part _toc.yml gives
        assert r["section"].startswith(f"ch{ch.key}-"), r["id"]
        assert r["paper"] and r["paper_scale"], r["id"]


def test_counts_by_kind_and_verdict(tmp_path):
    results.write_chapter(_settings(), {}, [Claim("P1.rank1", "yes", "reproduced", control="c")],
                          tmp_path)
    c = results.counts(results.ledger("smoke", tmp_path))
    assert c["derivation"]["reproduced"] == 1
    assert sum(c["all"].values()) == len(results.claims_registry())
    assert c["all"]["not run"] == len(results.claims_registry()) - 1


def test_ledger_marks_missing_claims_not_run(tmp_path):
    results.write_chapter(_settings(), {}, [Claim("P1.rank1", "yes", "reproduced", control="c")], tmp_path)
    rows = {r["id"]: r for r in results.ledger("smoke", tmp_path)}
    assert rows["P1.rank1"]["verdict"] == "reproduced"
    assert rows["P1.rank1"]["measured"] == "yes"
    assert rows["P3.gate-routing"]["verdict"] == "not run"


def test_ledger_shows_paper_profile_beside(tmp_path):
    results.write_chapter(_settings("paper"), {}, [Claim("P1.rank1", "big", "not run", needs="a GPU")], tmp_path)
    rows = {r["id"]: r for r in results.ledger("smoke", tmp_path)}
    assert rows["P1.rank1"]["verdict"] == "not run" and "has not run" in rows["P1.rank1"]["needs"]
    assert rows["P1.rank1"]["measured_paper_profile"] == "big"


def test_ledger_rejects_unregistered_claim(tmp_path):
    results.write_chapter(_settings(), {}, [Claim("P9.made-up", "m", "not run", needs="x")], tmp_path)
    with pytest.raises(ValueError, match="not in data/claims.csv"):
        results.ledger("smoke", tmp_path)


def test_duplicate_registry_ids_rejected(tmp_path):
    p = tmp_path / "claims.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "part", "chapter", "kind", "section", "claim", "paper", "paper_scale"])
        w.writerow(["A", "I", "01", "paper", "s", "c", "p", "x"])
        w.writerow(["A", "I", "01", "paper", "s", "c", "p", "x"])
    with pytest.raises(ValueError, match="duplicate"):
        results.claims_registry(p)


def test_cli_ledger_prints_counts_per_kind_and_verdict(tmp_path, capsys):
    from nlbudget import cli

    results.write_chapter(_settings(), {}, [Claim("P1.rank1", "yes", "reproduced", control="c")],
                          tmp_path)
    assert cli.main(["ledger", "--profile", "smoke", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("kind"))
    assert all(v in head for v in results.VERDICTS)
    rows = {}  # the first table: this profile's counts (the committed scales' follow)
    for line in out.splitlines():
        if line.split() and line.split()[0] in ("paper", "derivation", "book", "all"):
            rows.setdefault(line.split()[0], line.split()[1:])
    assert rows["derivation"][0] == "1" and rows["all"][-1] == str(len(results.claims_registry()))
    assert cli.main(["ledger", "--profile", "nope"]) == 2


def test_compare_reports_changed_verdicts_and_figures(tmp_path):
    import json

    from nlbudget.verdicts import results as res

    def write(root, verdict, x, total):
        d = root / "ci"
        d.mkdir(parents=True)
        doc = {"figures": {"x": [1.0, x], "name": "m", "m": {"wallclock": {"full_s": total}},
                           "decode": {"1": {"base": total}}}, "timings": {"total_s": total},
               "environment": {"git": total}}
        (d / "01_a.json").write_text(json.dumps(doc))
        (d / "01_a.verdicts.json").write_text(json.dumps({"claims": [
            {"id": "A", "verdict": verdict}, {"id": "B", "verdict": "partly"}]}))

    write(tmp_path / "a", "reproduced", 2.0, 10)
    write(tmp_path / "b", "reproduced", 2.0, 99)
    assert res.compare(tmp_path / "a", tmp_path / "b", "ci") == {
        "01_a": {"verdicts": {}, "figures": {}}}  # timings (measured seconds included) and
    # the environment do not count
    write(tmp_path / "c", "inconclusive", 2.1, 10)
    d = res.compare(tmp_path / "a", tmp_path / "c", "ci")["01_a"]
    assert d["verdicts"] == {"A": ("reproduced", "inconclusive")}
    assert d["figures"] == {"x.1": (2.0, 2.1)}
    assert res.compare(tmp_path / "a", tmp_path / "c", "ci", rtol=0.1)["01_a"]["figures"] == {}


# ---------------------------------------------------------------- committed scales

def test_committed_full_verdicts_recompute_with_todays_rules():
    """Every committed `full` result: its verdicts, recomputed from its stored figures and
    parameters with today's claim functions, are the ones its verdicts file holds (a changed
    rule is re-judged and recommitted: `nlbudget judge --profile full`, seconds)."""
    files = sorted(f for f in build.committed_dir("full").glob("[0-9][0-9]_*.json")
                   if results.is_figures_file(f))
    assert len(files) == len(profiles.CHAPTERS), "a chapter without a committed full result"
    for f in files:
        doc = results.read(f.stem, "full", f.parent.parent)
        assert results.verdicts_path(f.stem, "full", f.parent.parent).is_file(), f.name
        assert "claims" not in json.loads(f.read_text(encoding="utf-8")), f.name  # apart
        ch = profiles.chapter(f.stem).load()
        now = [c.as_dict() for c in ch.claims(doc["figures"], doc["parameters"])]
        assert now == doc["claims"], f"{f.name}: run `nlbudget judge --profile full`"
        # and committed as fresh: its figures by today's study, its verdicts by today's rules
        key = profiles.chapter(f.stem).key
        rec = json.loads(f.with_suffix(".fresh.json").read_text(encoding="utf-8"))
        assert ledger.staleness(key, "full") == "", f.name
        assert plan.verdicts_freshness(rec, ledger.committed_step(key, "full")) == "fresh", \
            f"{f.name}: run `nlbudget judge --profile full` and commit its records"


def test_a_committed_result_goes_stale_when_its_inputs_change(tmp_path, monkeypatch):
    from nlbudget.book import plan

    monkeypatch.setattr(ledger, "committed_dir", lambda profile: tmp_path / profile)
    d = tmp_path / "full"
    d.mkdir()
    stem = profiles.chapter("01").stem
    claim = {"id": "P1.kv-memory", "verdict": "reproduced", "measured": "m", "reason": "r",
             "needs": ""}
    (d / f"{stem}.json").write_text(json.dumps({
        "created": "2026-12-01T00:00:00",
        "environment": {"git": {"commit": "abcdef0123", "dirty": False}}}))
    (d / f"{stem}.verdicts.json").write_text(json.dumps({"claims": [claim]}))
    inp = plan.inputs("01", "full", 0, tmp_path)
    (d / f"{stem}.fresh.json").write_text(json.dumps({"inputs": inp}))
    assert build.staleness("01", "full") == ""
    rows = build.with_committed(results.ledger("ci", tmp_path))
    row = next(r for r in rows if r["id"] == "P1.kv-memory")
    assert row["verdict_full"] == "reproduced" and "abcdef0" in row["full_row"]["made"]
    inp["settings"] = {**inp["settings"], "n_inputs": 1}
    (d / f"{stem}.fresh.json").write_text(json.dumps({"inputs": inp}))
    assert build.staleness("01", "full") == "settings"
    assert "(stale)" in build.ledger_text("ci", tmp_path)
