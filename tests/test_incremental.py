"""Rebuild only what changed (nlbudget.book.plan): run order, freshness, and what reruns
after an edit, a failure or --force. The chapters' execution is replaced by a stub that
writes what a run writes (executed notebook, results file), so the logic is tested in
milliseconds; test_notebooks.py checks the same on real smoke runs."""

import contextlib
import itertools
import json
import shutil
from pathlib import Path

import pytest

from nlbudget import paths
from nlbudget.book import build, launch, ledger, plan, profiles, runner
from nlbudget.verdicts import results

KEYS = profiles.available_chapters()


def test_run_order_puts_what_is_read_first():
    order = plan.run_order()
    assert sorted(order) == sorted(KEYS)
    for k in KEYS:
        for d in plan.reads(k):
            assert order.index(d) < order.index(k)
    assert "03" in plan.reads("02")  # chapter 02 overlays chapter 03's costs
    assert plan.dependants("03") == ["02", "07"]  # and chapter 07 reads every lens
    assert plan.dependants("05") == []


def test_a_cycle_is_refused(monkeypatch):
    monkeypatch.setattr(plan, "reads", lambda k: {"01": ("02",), "02": ("01",)}.get(k, ()))
    with pytest.raises(ValueError, match="cycle"):
        plan.run_order(["01", "02"])


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A checkout whose notebooks can be edited: a copy of notebooks/, the rest linked."""
    root = tmp_path / "repo"
    root.mkdir()
    real = paths.repo_root()
    for name in ("pyproject.toml", "data", "book", "src"):
        (root / name).symlink_to(real / name)
    shutil.copytree(real / "notebooks", root / "notebooks")
    monkeypatch.setenv("NLBUDGET_ROOT", str(root))
    return root


@pytest.fixture
def stub_runs(monkeypatch, tmp_path):
    """Replace executing a chapter by writing what a run writes; record the order."""
    ran = []
    runs = itertools.count()  # every run writes new files, as a real run does (timestamps)

    def fake_run(key, profile, seed, results_dir, build_dir, **kw):
        if getattr(fake_run, "fail", None) == key:
            raise RuntimeError("killed")
        stem = profiles.chapter(key).stem
        out = build_dir / profile / "chapters" / f"{stem}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        n = next(runs)
        out.write_text(json.dumps({"run": n}))
        paths.atomic_write_text(results.results_path(stem, profile, results_dir),
                                  json.dumps({"run": n, "timings": {"total_s": 1.0}}))
        ran.append(key)
        return out

    monkeypatch.setattr(runner, "run", fake_run)
    return ran, fake_run, tmp_path / "results", tmp_path / "build"


def _run(stub, **kw):
    ran, _, res, bld = stub
    ran.clear()
    lines = []
    # one core: every chapter runs in this process, through the stub
    out = runner.run_chapters(plan.make("smoke", 0, res, bld, **kw), log=lines.append, cores=1)
    return list(ran), out, lines


def test_second_build_runs_nothing(checkout, stub_runs):
    ran, out, _ = _run(stub_runs)
    assert ran == plan.schedule() and set(out.values()) == {"ran"}
    ran, out, lines = _run(stub_runs)
    assert ran == [] and set(out.values()) == {"fresh"}
    assert all("fresh, skipped" in ln for ln in lines)


def test_a_changed_library_names_its_files(checkout, stub_runs, monkeypatch):
    """"changed: library" says which module's code changed (#66: it never did)."""
    from nlbudget.assets import code_key

    _run(stub_runs)
    real = code_key.source
    monkeypatch.setattr(code_key, "source", lambda p: real(p) + (
        "\nEDITED = 1\n" if p.name == "surrogates.py" else "# a comment\n"))
    assert plan.status("03", "smoke", 0, stub_runs[2], stub_runs[3]) == \
        "changed: library (surrogates.py)"
    assert plan.status("05", "smoke", 0, stub_runs[2], stub_runs[3]) == "fresh"
    rec = plan.record("03", "smoke", stub_runs[2], stub_runs[3])
    del rec["library_files"]  # a record written before per-file digests
    assert "predates per-file digests" in plan.named(
        plan.chapter_step("03", "smoke", stub_runs[2], stub_runs[3]), ["library"], rec)[0]


def test_editing_a_notebook_reruns_it_and_its_dependants_only(checkout, stub_runs):
    _run(stub_runs)
    nb = checkout / "notebooks" / f"{profiles.chapter('03').stem}.ipynb"
    doc = json.loads(nb.read_text())
    cell = next(c for c in doc["cells"] if c["cell_type"] == "code"
                and not "".join(c["source"]).startswith(launch.MARK))  # not the install cell
    cell["source"] = cell["source"] + ["\nedited = True"]
    nb.write_text(json.dumps(doc))
    assert plan.status("03", "smoke", 0, stub_runs[2], stub_runs[3]) == "changed: notebook"
    ran, _, _ = _run(stub_runs)
    assert ran == ["03", "02", "07"]  # chapters 02 and 07 read chapter 03's results
    nb = checkout / "notebooks" / f"{profiles.chapter('05').stem}.ipynb"
    nb.write_text(nb.read_text().replace("Dyck", "Dyck "))
    assert _run(stub_runs)[0] == ["05"]


def test_changed_settings_or_seed_rerun(checkout, stub_runs):
    _run(stub_runs)
    ran, _, res, bld = stub_runs
    assert plan.status("01", "smoke", 1, res, bld) == "changed: settings"


def _edit(path, kind: str) -> None:
    """Add a line to the notebook's last cell of `kind` (code: a statement; markdown: prose)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = [c for c in nb["cells"] if c["cell_type"] == kind][-1]
    cell["source"] = "".join(cell["source"]) + ("\nedited = True" if kind == "code" else
                                                "\n\nA reader's note.")
    path.write_text(json.dumps(nb), encoding="utf-8")


def test_a_failed_run_never_leaves_a_chapter_fresh(checkout, stub_runs):
    _run(stub_runs)
    _, fake, res, bld = stub_runs
    _edit(checkout / "notebooks" / f"{profiles.chapter('04').stem}.ipynb", "markdown")
    fake.fail = "04"
    with pytest.raises(RuntimeError, match="killed"):
        _run(stub_runs)
    assert plan.status("04", "smoke", 0, res, bld) == "its last run did not finish"
    fake.fail = None
    assert _run(stub_runs)[0] == ["04", "07"]  # chapter 07 reads chapter 04's results


def test_a_deleted_or_edited_output_is_not_fresh(checkout, stub_runs):
    _run(stub_runs)
    _, _, res, bld = stub_runs
    results.results_path(profiles.chapter("06").stem, "smoke", res).unlink()
    assert plan.status("06", "smoke", 0, res, bld) == "its results file is missing or changed"
    (bld / "smoke" / "chapters" / f"{profiles.chapter('01').stem}.ipynb").write_text("{}")
    assert sorted(_run(stub_runs)[0]) == ["01", "06", "07"]  # 07 reads the new 06 results


def test_force_reruns_everything(checkout, stub_runs):
    _run(stub_runs)
    ran, out, _ = _run(stub_runs, force=True)
    assert ran == plan.schedule()


def test_progress_names_start_end_and_time_left(checkout, stub_runs):
    _run(stub_runs)  # records a time for every chapter
    _edit(checkout / "notebooks" / f"{profiles.chapter('01').stem}.ipynb", "code")
    _, _, lines = _run(stub_runs)
    start = next(ln for ln in lines if "01_gated_mlp_symmetry: running" in ln)
    assert "changed: notebook" in start and "left in the build" in start
    assert any("01_gated_mlp_symmetry: done in" in ln for ln in lines)


def test_the_library_but_not_other_chapters_modules_is_an_input():
    a = plan.library_digest("01")
    assert a == plan.library_digest("01")
    assert a != plan.library_digest("02")  # each sees its own chapter module


def test_a_chapter_depends_only_on_the_modules_it_imports():
    names = {k: {f.relative_to(f.parents[1]).as_posix() if f.parent.name != "nlbudget"
                 else f.name for f in plan.library_files(k)} for k in ("03", "05")}
    assert "universal.py" in names["05"] and "universal.py" not in names["03"]
    assert "surrogates.py" in names["03"] and "surrogates.py" not in names["05"]
    # through an import inside a module, and the packages' __init__ on the way
    assert {"verdicts/stats.py", "verdicts/__init__.py", "__init__.py"} <= names["03"]
    assert not any(n.startswith("chapters/ch05") for n in names["03"])
    assert "book/runner.py" not in names["03"]  # the build is no chapter's input
    # nor the list of chapters: adding chapter 07 leaves chapters 01-06 fresh
    assert "chapters/__init__.py" not in names["03"] | names["05"]


def test_the_library_digest_reads_code_not_comments_or_the_settings_table():
    src = (plan.chapter_folder("06") / "study.py").read_text(encoding="utf-8")
    base = plan.code(src)
    assert "1:SETTINGS" in plan.code(src + "\nX = SETTINGS\n").splitlines()
    assert "1:SETTINGS" not in base.splitlines()  # the table (NAME token 1) is left out
    # another profile's budget, a comment, a blank line: the same code
    resized = src.replace("lastword_items=48", "lastword_items=24", 1)
    commented = src.replace("\ndef ", "\n# a reader's note\n\ndef ", 1)
    assert resized != src and commented != src
    assert plan.code(resized) == base and plan.code(commented) == base
    # a change to what runs: not the same (a constant, a call, a string)
    for old, new in (("MIN_CORRECT = 20", "MIN_CORRECT = 21"), ("def seeds(", "def seedz(")):
        changed = src.replace(old, new, 1)
        assert changed != src and plan.code(changed) != base
    # a name that only starts like the table, or the table below the top level, still counts
    assert plan.code("SETTINGS_X = 1\n") != plan.code("SETTINGS_X = 2\n")
    assert plan.code("def f():\n    SETTINGS = 1\n") != plan.code("def f():\n    SETTINGS = 2\n")


def test_a_notebooks_results_read_its_code_and_its_page_the_prose(tmp_path, monkeypatch):
    nb = json.loads(profiles.notebook_path("01").read_text(encoding="utf-8"))
    path = tmp_path / "nb.ipynb"

    def digests(cells):
        path.write_text(json.dumps({**nb, "cells": cells}), encoding="utf-8")
        return plan.notebook_code(path), plan.notebook_prose(path)

    base = digests(nb["cells"])
    md = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown")
    code = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                and not "".join(c["source"]).startswith(launch.MARK))

    def edited(i, text):
        cells = [dict(c) for c in nb["cells"]]
        cells[i]["source"] = "".join(cells[i]["source"]) + text
        return digests(cells)

    reworded = edited(md, "\nA reader's note.")
    assert reworded[0] == base[0] and reworded[1] != base[1]  # the page changes, not the result
    assert edited(code, "\n# a comment")[0] == base[0]
    assert edited(code, "\nx = 1")[0] != base[0]  # what runs: a result made before is stale
    assert plan.notebook_code(tmp_path / "none.ipynb") is None
    # a committed result is stale for its code, never for its prose alone
    now = plan.inputs("01", "full", 0, tmp_path / "results")
    monkeypatch.setattr(plan, "inputs", lambda *a, **k: {**now, "prose": "reworded"})
    monkeypatch.setattr(ledger, "committed_dir", lambda profile: tmp_path / profile)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / f"{profiles.chapter('01').stem}.fresh.json").write_text(
        json.dumps({"inputs": now}))
    assert build.staleness("01", "full") == ""
    monkeypatch.setattr(plan, "inputs", lambda *a, **k: {**now, "notebook": "changed"})
    assert build.staleness("01", "full") == "notebook"


def test_a_chapter_reads_only_its_own_rows_of_the_claims_file(tmp_path, monkeypatch):
    """Its rows are its verdicts' input (re-judged), never its measurements' (rerun)."""
    (tmp_path / "data").mkdir()
    csv = tmp_path / "data" / "claims.csv"
    monkeypatch.setattr(paths, "shipped", lambda: tmp_path)
    head = "id,part,chapter,kind,claim\n"
    csv.write_text(head + "P1.a,I,01,paper,x\nP2.b,III,05,paper,y\n")
    one, five, data = plan.claims_digest("01"), plan.claims_digest("05"), plan.data_digest("01")
    assert plan.claims_rows("01").decode() == head + "P1.a,I,01,paper,x\n"
    csv.write_text(head + "P1.a,I,01,paper,x\nP2.b,III,05,paper,y\nB.c,V,07,book,z\n")
    assert (plan.claims_digest("01"), plan.claims_digest("05")) == (one, five)  # another's row
    csv.write_text(head + "P1.a,I,01,paper,x (reworded)\nP2.b,III,05,paper,y\n")
    assert plan.claims_digest("01") != one and plan.claims_digest("05") == five
    assert plan.data_digest("01") == data  # the measurements do not read it


def test_bytecode_beside_the_corpora_is_no_input(tmp_path, monkeypatch):
    """`tox -e tests` leaves `data/corpora/__pycache__/`: the next build must not rerun."""
    for sub in ("reference", "corpora"):
        (tmp_path / "data" / sub).mkdir(parents=True)
    (tmp_path / "data" / "corpora" / "make_x.py").write_text("x = 1\n")
    monkeypatch.setattr(paths, "shipped", lambda: tmp_path)
    before = plan.data_digest("01")
    (tmp_path / "data" / "corpora" / "__pycache__").mkdir()
    (tmp_path / "data" / "corpora" / "__pycache__" / "make_x.cpython-311.pyc").write_bytes(b"\0")
    assert plan.data_digest("01") == before
    (tmp_path / "data" / "corpora" / "make_x.py").write_text("x = 2\n")
    assert plan.data_digest("01") != before


LITTER = ("__pycache__/make_x.cpython-311.pyc", ".DS_Store", "Thumbs.db", "notes.txt~",
          ".make_x.py.swp", ".#make_x.py", "._make_x.py", ".ipynb_checkpoints/x-checkpoint.json",
          "sub/.DS_Store")


def test_editor_and_os_litter_is_no_input(tmp_path, monkeypatch):
    """Opening the folder in an editor or a file browser (backups, swap and lock files, the
    desktop's metadata) reruns no chapter; a real data file does (outside git: every file)."""
    (tmp_path / "data" / "corpora").mkdir(parents=True)
    (tmp_path / "data" / "corpora" / "make_x.py").write_text("x = 1\n")
    monkeypatch.setattr(paths, "shipped", lambda: tmp_path)
    before = plan.data_digest("01")
    for f in LITTER:
        (tmp_path / "data" / "corpora" / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / "corpora" / f).write_bytes(b"litter")
    assert plan.data_digest("01") == before
    (tmp_path / "data" / "corpora" / "new.json").write_text("{}")
    assert plan.data_digest("01") != before


def test_in_a_checkout_only_tracked_data_files_count():
    """In the git checkout the data digest reads the files git tracks: litter the tests, an
    editor or the OS leave in data/ — written here into the real folders — leaves every
    committed result fresh."""
    root = paths.shipped()
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    made = []
    try:
        import py_compile

        # the tests' own side effect: importing data/corpora/make_pydocs.py writes bytecode
        made.append(Path(py_compile.compile(str(root / "data" / "corpora" / "make_pydocs.py"))))
        for f in [*LITTER, "untracked-scratch.txt"]:
            p = root / "data" / "corpora" / f
            if not p.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(b"litter")
                made.append(p)
        assert {k: ledger.staleness(k, "full") for k in profiles.CHAPTERS} == {
            k: "" for k in profiles.CHAPTERS}
    finally:
        for p in made:
            p.unlink(missing_ok=True)
        for d in ("__pycache__", ".ipynb_checkpoints", "sub"):
            with contextlib.suppress(OSError):
                (root / "data" / "corpora" / d).rmdir()


def test_the_authors_files_are_judged_not_rerun(tmp_path, monkeypatch):
    """`data/reference/` (the P3 author's transcribed results) is read by verdicts and pages
    only: editing it re-judges every chapter and leaves every measurement fresh."""
    for sub in ("reference", "corpora"):
        (tmp_path / "data" / sub).mkdir(parents=True)
    (tmp_path / "data" / "claims.csv").write_text("id,part,chapter,kind,claim\n")
    (tmp_path / "data" / "reference" / "p3_x.csv").write_text("a\n1\n")
    monkeypatch.setattr(paths, "shipped", lambda: tmp_path)
    data, ref, claims = plan.data_digest("03"), plan.reference_digest(), plan.claims_digest("03")
    (tmp_path / "data" / "reference" / "p3_x.csv").write_text("a\n2\n")
    assert plan.data_digest("03") == data
    assert plan.reference_digest() != ref and plan.claims_digest("03") != claims
    assert "reference" in plan.PAGE_ONLY  # a committed result stays fresh, its page reruns


def test_one_thread_chapters_run_side_by_side_after_what_they_read():
    order = plan.schedule()
    light = [k for k in order if plan.threads(k) == 1]
    assert {"01", "02", "05"} <= set(light)
    assert all(plan.threads(k) is None for k in ("03", "04", "06"))
    # the chapters the one-thread ones read come first, then the one-thread chapters together
    assert order.index("03") < order.index("02")
    assert order[order.index(light[0]):order.index(light[0]) + len(light)] == light
    pos = {k: i for i, k in enumerate(order)}
    assert all(pos[d] < pos[k] for k in order for d in plan.reads(k))


def _ast_imports(source: str, pkg):
    """The same reading as `plan.package_imports`, with `ast` (the reference)."""
    import ast

    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            names += [(a.name, None) for a in node.names]
    src = "\n".join(f"from {m} import {n}" if n else f"import {m}" for m, n in names)
    return plan.package_imports(src, pkg)


def test_the_import_reader_agrees_with_ast_on_every_module_and_notebook():
    import nbformat

    from nlbudget import paths

    pkg = Path(plan.__file__).resolve().parents[1]
    sources = [f.read_text(encoding="utf-8") for f in pkg.rglob("*.py")]
    for nb in sorted((paths.repo_root() / "notebooks").rglob("*.ipynb")):
        cells = nbformat.read(nb, as_version=4).cells
        sources += ["\n".join(ln for ln in c.source.splitlines()
                              if not ln.lstrip().startswith(("%", "!")))
                    for c in cells if c.cell_type == "code"]
    assert len(sources) > 60
    for src in sources:
        try:
            want = _ast_imports(src, pkg)
        except SyntaxError:  # an exercise's blank to fill in
            continue
        assert plan.package_imports(src, pkg) == want, src[:200]
    # multi-line, aliased and commented imports
    src = "from nlbudget.verdicts import (claims,  # the rules\n    stats as st)\nimport nlbudget.paths"
    assert {f.name for f in plan.package_imports(src, pkg)} == {"claims.py", "stats.py", "paths.py"}


def test_the_profiles_module_is_no_input_but_the_settings_it_resolves_are(monkeypatch):
    """book/profiles.py resolves a run's settings and finds its notebook, both inputs of their
    own: editing it (a new check, a clearer message) leaves results fresh; a change in the
    settings it resolves does not."""
    from nlbudget.book import inputs

    pkg = Path(inputs.__file__).resolve().parent.parent
    for key in profiles.CHAPTERS:
        assert pkg / "book" / "profiles.py" not in inputs.library_files(key), key
    now = plan.inputs("07", "full", 0)
    real = profiles.validate
    monkeypatch.setattr(profiles, "validate", lambda *a, **k: {**real(*a, **k), "rf_width": 7})
    assert plan.inputs("07", "full", 0)["settings"] != now["settings"]
