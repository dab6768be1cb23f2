"""Re-judging without rerunning: a chapter's figures and its verdicts are apart (its results
file and its verdicts file), and the plan keys them apart — the measurements on the study's
code, settings and data, the verdicts on the claims' code — so a changed rule re-judges the
stored figures in seconds and reruns nothing, and a changed study reruns the chapter."""

import importlib
import json
import shutil
import sys

import pytest

from nlbudget import cli
from nlbudget.book import build, ledger, plan, profiles, runner
from nlbudget.verdicts import results


def _step(p, key):
    return next(s for s in p.chapters if s.key == key)


class _Edited:
    """Edit a chapter module's source for the length of a `with`, and reload it."""

    def __init__(self, key: str, part: str, old: str, new: str):
        self.path = plan.chapter_folder(key) / f"{part}.py"
        self.module = f"{profiles.chapter(key).module}.{part}"
        self.old, self.new = old, new

    def __enter__(self):
        self.src = self.path.read_text(encoding="utf-8")
        assert self.old in self.src
        self.path.write_text(self.src.replace(self.old, self.new, 1), encoding="utf-8")
        importlib.reload(sys.modules[self.module])
        return self

    def __exit__(self, *exc):
        self.path.write_text(self.src, encoding="utf-8")
        importlib.reload(sys.modules[self.module])
        return False


@pytest.fixture
def copied(smoke, tmp_path):
    """The smoke build's results and records, copied so that they can be re-judged."""
    res, bld = tmp_path / "results", tmp_path / "build"
    shutil.copytree(smoke[0], res)
    shutil.copytree(smoke[1], bld)
    return res, bld


@pytest.mark.notebooks
def test_a_changed_rule_rejudges_and_reruns_nothing(copied, monkeypatch):
    res, bld = copied
    stem = profiles.chapter("01").stem
    figures = results.results_path(stem, "smoke", res)
    before_bytes, before = figures.read_bytes(), results.read(stem, "smoke", res)["claims"]
    p = plan.make("smoke", 0, res, bld)
    assert all(s.why == "fresh" and not s.rejudge for s in p.chapters)

    def no_run(*a, **kw):
        raise AssertionError("a changed rule must not rerun a chapter")

    monkeypatch.setattr(runner, "run", no_run)
    with _Edited("01", "claims", "REDUCTION_TOL = 1e-10", "REDUCTION_TOL = 0.0"):
        p = plan.make("smoke", 0, res, bld)
        st = _step(p, "01")
        assert st.why == "fresh" and st.rejudge == "changed: claims"
        assert [s.key for s in p.to_judge()] == ["01"]  # no other chapter reads its verdicts
        runner.judge_steps(p, log=lambda line: None)
        assert runner.run_chapters(p, log=lambda line: None, cores=1) == {
            s.key: "fresh" for s in p.chapters}
        after = results.read(stem, "smoke", res)["claims"]
        assert figures.read_bytes() == before_bytes  # the figures, byte for byte
        changed = {a["id"]: (a["verdict"], b["verdict"]) for a, b in zip(before, after)
                   if a["verdict"] != b["verdict"]}
        assert changed, "a zero tolerance must turn a derivation's verdict"
        # the plan now finds it judged; the page shows the new verdict from the verdicts file
        again = plan.make("smoke", 0, res, bld)
        assert not _step(again, "01").rejudge and _step(again, "01").why == "fresh"
        page = build.with_verdicts(st.executed.read_bytes(), "01",
                                   results.read(stem, "smoke", res)).decode()
        cid, (_, new) = next(iter(changed.items()))
        row = page[page.index(f"<th>{cid}</th>"):]
        assert new in row[:row.index("</tr>")]
    # the rule back as it was: judged again, the verdicts are the old ones
    p = plan.make("smoke", 0, res, bld)
    assert _step(p, "01").rejudge == "changed: claims"
    runner.judge_steps(p, log=lambda line: None)
    assert results.read(stem, "smoke", res)["claims"] == before


@pytest.mark.notebooks
def test_a_changed_study_reruns_the_chapter(copied):
    res, bld = copied
    with _Edited("01", "study", "THREADS = 1", "THREADS = 1\n_EDITED = True"):
        st = _step(plan.make("smoke", 0, res, bld), "01")
        assert st.why == "changed: library (chapters/ch01_gated_mlp_symmetry/study.py)"
    with _Edited("01", "page", "def glue(", "def _edited():\n    return 1\n\n\ndef glue("):
        st = _step(plan.make("smoke", 0, res, bld), "01")
        assert st.why == "changed: page"  # a page reruns at smoke; a committed result stays
    assert "page" in plan.PAGE_ONLY        # fresh (`ledger.staleness` leaves it out)


@pytest.mark.notebooks
def test_judge_on_the_command_line_changes_nothing_when_nothing_changed(copied, capsys):
    res, bld = copied
    shas = {f.name: f.read_bytes() for f in (res / "smoke").iterdir()}
    assert cli.main(["judge", "01", "05", "--profile", "smoke", "--results-dir", str(res),
                     "--build-dir", str(bld)]) == 0
    out = capsys.readouterr().out
    assert "01_gated_mlp_symmetry: 8 claims judged, 0 changed" in out
    assert {f.name: f.read_bytes() for f in (res / "smoke").iterdir()} == shas


def test_a_committed_result_is_rejudged_from_its_stored_figures(tmp_path, monkeypatch):
    """`judge_committed` on a copy of the committed `full` result of chapter 04 with one of its
    thresholds changed: its verdicts change, its figures file does not."""
    src = ledger.committed_dir("full")
    stem = profiles.chapter("04").stem
    d = tmp_path / "full"
    d.mkdir()
    for suffix in (".json", ".verdicts.json", ".fresh.json"):
        shutil.copy(src / f"{stem}{suffix}", d / f"{stem}{suffix}")
    monkeypatch.setattr(ledger, "committed_dir", lambda profile: tmp_path / profile)
    figures = (d / f"{stem}.json").read_bytes()
    assert ledger.judge_committed("full", ["04"], log=lambda line: None)[stem]["changed"] == {}
    assert (d / f"{stem}.verdicts.json").read_bytes() == (src / f"{stem}.verdicts.json") \
        .read_bytes()  # nothing changed: the file is kept as it is
    nofly = sys.modules[profiles.chapter("04").module + ".authors_nofly"]
    # "lost beyond regression" only 100 % below the stable-token share: no corpus can show it
    monkeypatch.setattr(nofly, "RETENTION_MARGIN", 1.0)
    out = ledger.judge_committed("full", ["04"], log=lambda line: None)[stem]
    assert out["changed"]["BOOK.P3.nofly-beyond-regression"] == ("inconclusive",
                                                                  "not reproduced")
    assert (d / f"{stem}.json").read_bytes() == figures
    rec = json.loads((d / f"{stem}.fresh.json").read_text())
    assert rec["verdicts"]["file"] == plan.file_sha(d / f"{stem}.verdicts.json")


def test_a_build_never_rewrites_the_committed_verdicts(tmp_path, monkeypatch):
    """A build (here at smoke, nothing run, nothing rendered) with chapter 01's claims code
    changed since its committed `full` verdicts were judged: it used to re-judge them, writing
    the tracked `data/results/full/` files; now it names them, the ledger marks their rows, and
    only `nlbudget judge` writes (#66). On a copy of the committed folder."""
    shutil.copytree(ledger.committed_dir("full"), tmp_path / "full")
    monkeypatch.setattr(ledger, "committed_dir", lambda profile: tmp_path / profile)
    before = {f.name: f.read_bytes() for f in (tmp_path / "full").iterdir()}
    monkeypatch.setattr(build, "stage", lambda p, edition: (tmp_path / "site", []))
    monkeypatch.setattr(build, "render", lambda *a, **kw: tmp_path / "index.html")
    lines, real = [], plan.claims_digest
    with monkeypatch.context() as m:  # its claims code changed (faked: no file is edited while
        # the smoke build runs beside the tests)
        m.setattr(plan, "claims_digest", lambda key: "edited" if key == "01" else real(key))
        assert ledger.verdicts_staleness("01", "full") == "changed: claims"
        build.build("smoke", run=False, build_dir=tmp_path / "b", results_dir=tmp_path / "r",
                    log=lines.append)
        assert {f.name: f.read_bytes() for f in (tmp_path / "full").iterdir()} == before
        said = [line for line in lines if "committed full verdicts" in line]
        assert len(said) == 1 and "chapter(s) 01 " in said[0], lines
        chapter = {r["id"]: r["chapter"] for r in results.claims_registry()}
        marked = {chapter[i] for i, r in ledger.committed_rows("full").items()
                  if "nlbudget judge --profile full" in r["stale"]}
        assert marked == {"01"}
    assert ledger.verdicts_staleness("01", "full") == "fresh"


def test_verdicts_freshness_names_what_changed(tmp_path):
    st = plan.chapter_step("01", "smoke", tmp_path / "r", tmp_path / "b")
    assert plan.verdicts_freshness({}, st) == "its verdicts file is missing or changed"
    plan.verdicts_file(st).parent.mkdir(parents=True)
    plan.verdicts_file(st).write_text("{}")
    rec = {"verdicts": plan.verdicts_record(st)}
    assert plan.verdicts_freshness(rec, st) == "fresh"
    assert plan.verdicts_freshness({"verdicts": {**rec["verdicts"], "claims": "x"}}, st) == \
        "changed: claims"
    plan.verdicts_file(st).write_text('{"edited": 1}')
    assert plan.verdicts_freshness(rec, st) == "its verdicts file is missing or changed"
