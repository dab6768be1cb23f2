"""Every chapter: stored clean, parameterised, executed at the smoke profile through
papermill, writing a valid results file; then the book builds with warnings as errors."""

import ast
import html
import json
import re
import subprocess
import sys
import time

import nbformat
import pytest
import yaml

from nlbudget.book import build as book, exercises, plan, profiles, runner
from nlbudget import paths
from nlbudget.verdicts import results

NOTEBOOKS = sorted((paths.repo_root() / "notebooks").glob("*.ipynb"))
KEYS = profiles.available_chapters()


def test_every_registered_chapter_is_found():
    assert NOTEBOOKS and len(KEYS) == len(NOTEBOOKS)


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_clean_and_parameterised(nb_path):
    nb = nbformat.read(nb_path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "strip outputs"
    params = [i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    tree = ast.parse(code[params[0]].source)
    names = []
    for stmt in tree.body:  # literals only, so papermill can override any of them
        assert isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant), \
            ast.unparse(stmt)
        names.append(stmt.targets[0].id)
    # settings are written once, in the chapter module: the parameters cell holds the run's
    # parameters only, and the next cell reads them (and papermill's overrides) through
    # `profiles.from_notebook`, before the notebook defines anything of its own
    assert names == list(profiles.RUN_PARAMETERS)
    ch = profiles.chapter(nb_path.stem)
    assert code[params[0] + 1].source.strip().endswith(
        f'S = profiles.from_notebook("{ch.key}", globals())')
    assert not any("profiles.validate(" in c.source for c in code)


VERDICT_WORDS = re.compile(r"reproduced|inconclusive|not run|partly", re.IGNORECASE)


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_code_decides_a_verdict(nb_path):
    # verdicts come only from the claim functions of nlbudget.chapters (tested in
    # test_chapter_claims.py); a notebook's code cells never name one
    nb = nbformat.read(nb_path, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            assert not VERDICT_WORDS.search(c.source), c.source[:200]
    assert any("results.finish(ch, S" in c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_bookkeeping_stays_off_the_page(nb_path):
    nb = nbformat.read(nb_path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for c in code[:3]:  # the install cell, the parameters cell and the settings check
        assert "remove-cell" in c.metadata.get("tags", [])
    labels = set(re.findall(r"^\((ch\d\d-[a-z0-9-]+)\)=", "\n".join(
        c.source for c in nb.cells if c.cell_type == "markdown"), re.M))
    ch = profiles.chapter(nb_path.stem)
    sections = {r["section"] for r in results.claims_registry() if r["chapter"] == ch.key}
    assert sections <= labels, sections - labels  # every ledger row links to a section here


def test_toc_lists_every_chapter():
    toc = yaml.safe_load((paths.repo_root() / "book" / "_toc.yml").read_text())
    files = {ch["file"] for part in toc["parts"] for ch in part["chapters"]}
    assert {f"notebooks/{p.stem}" for p in NOTEBOOKS} <= files
    order = [ch["file"] for part in toc["parts"] for ch in part["chapters"]
             if ch["file"].startswith("notebooks/")]
    assert order == sorted(order), "the book reads the chapters in file order"


# ---------------------------------------------------------------- execution (smoke)

@pytest.mark.notebooks
def test_rebuild_with_nothing_changed_runs_nothing(smoke):
    res, bld = smoke
    lines = []
    p = plan.make("smoke", 0, res, bld)
    assert {s.why for s in p.chapters + p.exercises} == {"fresh"}
    out = runner.run_plan(p, log=lines.append)
    assert set(out["chapters"].values()) == set(out["exercises"].values()) == {"fresh"}, lines
    for key in KEYS:  # each real run recorded its phases and its time
        t = results.read(profiles.chapter(key).stem, "smoke", res)["timings"]
        assert t["total_s"] > 0 and t["phases"], key
        assert plan.estimate(key, "smoke", res, bld) > 0


@pytest.mark.notebooks
@pytest.mark.parametrize("key", KEYS)
def test_chapter_writes_valid_results(smoke, key):
    res, bld = smoke
    stem = profiles.chapter(key).stem
    assert (bld / "smoke" / "chapters" / f"{stem}.ipynb").is_file()
    doc = results.read(stem, "smoke", res)
    assert doc["profile"] == "smoke" and doc["seed"] == 0 and doc["chapter"] == stem
    assert doc["parameters"] == profiles.validate(key, profile="smoke", seed=0)
    assert doc["environment"]["git"]["commit"] and doc["environment"]["packages"]["torch"]
    registry = {r["id"]: r for r in results.claims_registry()}
    assert doc["claims"], "every chapter feeds the ledger"
    for c in doc["claims"]:
        assert c["id"] in registry and registry[c["id"]]["chapter"] == key
        assert c["verdict"] in results.VERDICTS and c["measured"]
        assert c["kind"] == registry[c["id"]]["kind"], c["id"]
        if c["verdict"] in ("reproduced", "not reproduced") and c["kind"] != "derivation":
            assert c["control"], c["id"]
    # the claims in the file are what the chapter module computes from the file's figures
    ch = profiles.chapter(key).load()
    assert [x.as_dict() for x in ch.claims(doc["figures"], doc["parameters"])] == doc["claims"]


@pytest.mark.notebooks
def test_part1_verdicts_at_smoke(smoke):
    doc = results.read("01_gated_mlp_symmetry", "smoke", smoke[0])
    verdicts = {c["id"]: c["verdict"] for c in doc["claims"]}
    # every derivation reproduced, but the rank-r form, which the paper only outlines: the
    # book's own module is checked (its construction reproduced), the paper's claim not run
    rank_r = next(c for c in doc["claims"] if c["id"] == "P1.rank-r")
    assert rank_r["verdict"] == "not run" and rank_r["construction"]["verdict"] == "reproduced"
    assert set(v for k, v in verdicts.items() if k != "P1.rank-r") == {"reproduced"}, verdicts
    f = doc["figures"]
    assert f["exchange_error_gated"]["linear"] < 1e-12 < f["exchange_error_gated"]["silu"]


@pytest.mark.notebooks
def test_part2b_token_ranges_do_not_overlap(smoke):
    doc = results.read("04_adaptive_gating", "smoke", smoke[0])
    ranges = doc["figures"]["ranges"]
    assert {"smollm2-135m", "neox-seq", "neox-par"} <= set(ranges)
    mix = ranges["smollm2-135m"]["mixture"]  # pretrained: disjoint paragraphs of one mixture
    assert {"fit", "gate", "select", "nofly", "eval"} == set(mix)
    seen = [set(r["paragraphs"]) for r in mix.values()]
    assert all(seen) and sum(map(len, seen)) == len(set().union(*seen))
    for model in ("neox-seq", "neox-par"):  # the pair: consecutive runs of its train split
        train = ranges[model]["train"]
        spans = sorted(train.values())
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            assert a0 < a1 <= b0 < b1, (model, train)
        assert ranges[model]["validation"]["eval"][1] > 0  # evaluation: another split


@pytest.mark.notebooks
def test_part4_probe_records(smoke):
    doc = results.read("06_preprojection_probes", "smoke", smoke[0])
    studies = doc["figures"]["studies"]
    assert {"smollm2-135m", "pythia-style (neox-par)"} == set(studies)
    for model, st in studies.items():
        assert list(st) == ["base", "lora", "pre", "skip", "pre+skip"]
        for v, r in st.items():
            assert r["step0_identical"] and r["cache_identical"], (model, v)
            assert r["cache_bytes"] == r["base_cache_bytes"] > 0
            assert r["cache_check"]["bytes"] == st["base"]["cache_check"]["bytes"] > 0
            # cached greedy decoding gives the uncached forward's logits
            assert r["cache_check"]["max_abs"] <= 0.05 * r["cache_check"]["scale"], (model, v)
            assert (r["trainable"] == 0) == (v == "base")
            assert (r["train_tokens"] == 0) == (v == "base")
        counts = [st[v]["trainable"] for v in ("lora", "pre", "skip", "pre+skip")]
        assert max(counts) / min(counts) < 1.3, counts  # a matched budget
        assert len(st["pre+skip"]["skip_use"]) == doc["figures"]["setup"][model]["layers"]


@pytest.mark.notebooks
@pytest.mark.parametrize("key", ["05"])  # 05 trains embeddings: order-sensitive sums
def test_rerun_gives_identical_figures(smoke, tmp_path, key):
    res, _ = smoke
    runner.run(key, profile="smoke", seed=0, results_dir=tmp_path / "r", build_dir=tmp_path / "b")
    stem = profiles.chapter(key).stem
    a = results.read(stem, "smoke", res)
    b = results.read(stem, "smoke", tmp_path / "r")
    assert json.dumps(a["figures"], sort_keys=True) == json.dumps(b["figures"], sort_keys=True)
    assert a["claims"] == b["claims"]


@pytest.mark.notebooks
def test_book_builds_with_warnings_as_errors(smoke):
    res, bld = smoke
    index = book.build("smoke", run=False, build_dir=bld, results_dir=res)
    html = index.parent
    assert index.is_file()
    for p in NOTEBOOKS:
        page = (html / "notebooks" / f"{p.stem}.html").read_text()
        assert "cell_output" in page  # executed, with outputs
    part1 = (html / "notebooks" / "01_gated_mlp_symmetry.html").read_text()
    assert "Exchange symmetry holds iff" in part1
    for p in NOTEBOOKS:  # every chapter draws at least one figure, and the page shows it
        nb = json.loads((bld / "smoke" / "chapters" / f"{p.stem}.ipynb").read_text())
        assert any(k.startswith("image/") for c in nb["cells"] for o in c.get("outputs", [])
                   for k in o.get("data", {})), p.stem
        page = (html / "notebooks" / f"{p.stem}.html").read_text()
        assert re.search(r'<img[^>]+src="[^"]*_images/', page), p.stem
    ledger = (html / "ledger.html").read_text()
    assert "P1.exchange-iff-linear" in ledger and "not run" in ledger
    assert "ledger_overview.png" in ledger and "sd-dropdown" in ledger
    assert 'href="notebooks/01_gated_mlp_symmetry.html#ch01-kv-memory"' in ledger
    for p in NOTEBOOKS:  # parameters and progress bars stay off the pages
        page = (html / "notebooks" / f"{p.stem}.html").read_text()
        assert 'results_dir = "' not in page and "it/s]" not in page, p.stem
    assert "_static/mathjax" in part1  # math is served offline
    for key in exercises.available():  # each chapter's exercises, solutions folded
        stem = profiles.chapter(key).stem
        page = (html / "notebooks" / "exercises" / f"{stem}.html").read_text()
        n = sum(e["parts"] for e in exercises.catalogue(key))  # a solution per part
        assert page.count("Show the solution to exercise") == n, stem
        assert len(re.findall(r'<details class="[^"]*hide[^"]*above-input', page)) == n, stem
        # every exercise's check passed with its solution (a line "✓ name: …" each)
        assert "NotImplementedError" in page and len(re.findall(r"✓ [^<\n]+:", page)) >= n
        assert not re.search(r"✗ [^<\n]*(wrong for|raised|but the book measured)", page)
        chapter = (html / "notebooks" / f"{stem}.html").read_text()
        assert f"exercises/{stem}.html" in chapter  # listed under its chapter
    index_page = (html / "intro.html").read_text()
    assert 'href="course.html"' in index_page and 'href="notation.html"' in index_page
    course = (html / "course.html").read_text()
    assert "ex01-gated" in course and '<span class="pre">06</span> <span class="pre">--profile</span>' in course
    assert "The heaviest chapter of this build" in course
    assert "Where the book departs" in (html / "notation.html").read_text()
    rerun = (html / "rerun.html").read_text()
    assert "01_gated_mlp_symmetry" in rerun and "all chapters" in rerun  # the timing table
    lines = []  # nothing changed: the HTML is kept as it is
    mtime = index.stat().st_mtime
    assert book.build("smoke", run=False, build_dir=bld, results_dir=res, log=lines.append) == index
    assert index.stat().st_mtime == mtime and "no page changed" in lines[-1]


def _nothing_before_its_check(html_root):
    """The leak test of the student book: in reading order (the table of contents), each
    chapter's predictions (stub and check, on its predict-first page) come before the chapter's
    page, which shows what was measured; no page holds any prediction's reason (the checks
    show it once the prediction is right) or a measured answer; the instructors' page and every
    link to it are left out."""
    from nlbudget.teaching import checks

    site = html_root.parent.parent
    toc = [ln.split("file:")[1].strip() for ln in (site / "_toc.yml").read_text().splitlines()
           if "file:" in ln]
    assert "instructors" not in toc and not (html_root / "instructors.html").exists()
    whys = [getattr(m, n) for m in checks.CHAPTERS for n in vars(m) if n.startswith("WHY_")]
    assert len(whys) == sum(e["kind"] == exercises.PREDICT for k in exercises.available()
                            for e in exercises.catalogue(k))
    for key in exercises.available():
        stem = profiles.chapter(key).stem
        order = [toc.index(f"notebooks/student/{stem}-predict"), toc.index(f"notebooks/{stem}"),
                 toc.index(f"notebooks/student/{stem}")]
        assert order == sorted(order), (stem, order)
        page = (html_root / "notebooks" / "student" / f"{stem}-predict.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        assert "checks.predict_" in text and 'class="cell_output' not in page, stem
    for f in html_root.rglob("*.html"):
        text = html.unescape(re.sub(r"<[^>]+>", "", f.read_text()))
        assert "instructors.html" not in f.read_text(), f
        assert "the book measured" not in text.replace("not what the book measured", ""), f
        for why in whys:  # its first sentence, as the page would show it (math as typed)
            assert why.split(". ")[0][:60] not in text, (f, why[:60])


@pytest.mark.notebooks
def test_the_student_book_gives_nothing_away(smoke, monkeypatch):
    from nlbudget.book import launch

    res, bld = smoke
    url = "https://github.com/owner/book"  # with a repository, pages get launch buttons
    monkeypatch.setattr(launch, "repository_url", lambda: url)
    index = book.build("smoke", run=False, build_dir=bld, results_dir=res, edition="student")
    assert index.parent.parent.parent.name == "site-student"  # beside the solutions' book
    for key in exercises.available():
        stem = profiles.chapter(key).stem
        # its launch buttons open the committed student copy, not the solutions
        page = (index.parent / "notebooks" / "student" / f"{stem}.html").read_text()
        assert f"owner/book/blob/{launch.ref()}/notebooks/student/{stem}.ipynb" in page, stem
        assert "notebooks/exercises/" not in page, stem
        assert not (index.parent / "notebooks" / "exercises" / f"{stem}.html").exists()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        assert "Show the solution" not in page and 'class="cell_output' not in page, stem
        assert "NotImplementedError" in text and "the book measured" not in text, stem
        nb = nbformat.read(exercises.notebook(key), as_version=4)
        for c in nb.cells:  # no line of any solution that is not also in its stub
            if exercises.SOLUTION_TAG in c.metadata.get("tags", []):
                lines = [ln.strip() for ln in c.source.splitlines()
                         if len(ln.strip()) > 12 and not ln.strip().startswith("def ")]
                assert not [ln for ln in lines if ln in text], (stem, lines)
    _nothing_before_its_check(index.parent)
    # the solutions' book is untouched by it
    solutions = book.build("smoke", run=False, build_dir=bld, results_dir=res)
    assert "Show the solution" in (solutions.parent / "notebooks" / "exercises" /
                                   f"{profiles.chapter('01').stem}.html").read_text()
    with pytest.raises(ValueError, match="valid: solutions, student"):
        book.build("smoke", run=False, build_dir=bld, results_dir=res, edition="teacher")


# ---------------------------------------------------------------- bad parameters

@pytest.mark.parametrize("args,message", [
    (["--profile", "nonsense"], "valid profiles: smoke, ci, full, paper"),
    (["--seed", "abc"], "seed must be a non-negative integer"),
    (["--seed", "1.5"], "seed must be a non-negative integer"),
    (["-p", "bogus=1"], "valid: profile, seed, results_dir"),
    (["-p", "n_inputs='lots'"], "must be of type int"),
])
def test_bad_run_fails_at_once_and_writes_nothing(tmp_path, capsys, args, message):
    from nlbudget import cli

    t = time.perf_counter()
    rc = cli.main(["run", "01", "--results-dir", str(tmp_path / "r"),
                   "--build-dir", str(tmp_path / "b"), *args])
    assert rc == 2
    assert message in capsys.readouterr().err
    assert time.perf_counter() - t < 10  # no kernel was started
    assert not (tmp_path / "r").exists() and not (tmp_path / "b").exists()


def test_overrides_at_full_never_write_the_committed_results(tmp_path, capsys, monkeypatch):
    """`nlbudget run NN --profile full -p …` used to run through papermill into the committed
    folder, leaving the record of the run before beside a result it did not describe: the
    ledger showed the overridden run as a fresh committed `full` result. (The committed folder
    here is a copy, so that a regression spoils no checkout.)"""
    import shutil

    from nlbudget import cli

    stem = profiles.chapter("01").stem
    (tmp_path / "committed" / "full").mkdir(parents=True)
    committed = tmp_path / "committed" / "full" / f"{stem}.json"
    shutil.copy(paths.results_dir() / "full" / f"{stem}.json", committed)
    monkeypatch.setenv("NLBUDGET_RESULTS", str(tmp_path / "committed"))
    before = committed.read_bytes()
    rc = cli.main(["run", "01", "--profile", "full", "-p", "rank=3",
                   "--build-dir", str(tmp_path / "b")])
    assert rc == 2 and "would overwrite the committed results" in capsys.readouterr().err
    assert committed.read_bytes() == before and not (tmp_path / "b").exists()
    with pytest.raises(profiles.ParameterError, match="another folder"):  # the API alike
        runner.run("01", profile="full", parameters={"rank": 3}, build_dir=tmp_path / "b")
    # elsewhere, or without overrides (through the plan, which records its inputs), it may
    runner.refuse_overrides_in_the_committed_folder("full", {"rank": 3}, tmp_path / "r")
    runner.refuse_overrides_in_the_committed_folder("full", {}, None)
    runner.refuse_overrides_in_the_committed_folder("ci", {"rank": 3}, None)


def test_cli_entry_point(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nlbudget.cli", "run", "01", "--profile", "nope",
                        "--results-dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "valid profiles" in r.stderr
