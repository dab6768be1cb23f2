"""The house a newcomer walks: modules by role, no import cycle, no hidden imports, short
functions, settings written once, and chapter pages that show the experiment rather than the
formatting."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from nlbudget import paths
from nlbudget.book import profiles

PKG = Path(__file__).resolve().parents[1] / "src" / "nlbudget"
NOTEBOOKS = sorted((paths.repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(f): f for f in PKG.rglob("*.py")}


def _imports(path: Path):
    """(line, imported nlbudget module, at module level?) for every import of the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nlbudget"):
            assert node.level == 0, f"{path}: relative import"
            for a in node.names:
                full = f"{node.module}.{a.name}"
                yield node.lineno, full if full in MODULES else node.module, id(node) in top
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("nlbudget"):
                    yield node.lineno, a.name, id(node) in top


def import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, at the top or inside a function."""
    return {m: {t for _, t, _ in _imports(f) if t in MODULES and t != m}
            for m, f in MODULES.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `graph` (its nodes in order, the first again at the end), or None."""
    state: dict[str, int] = {}

    def visit(m, path):
        if state.get(m) == 2:
            return None
        if state.get(m) == 1:
            return path[path.index(m):] + [m]
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if (found := visit(t, path + [m])) is not None:
                return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if (found := visit(m, [])) is not None:
            return found
    return None


#: The package's floors, lowest first: a module imports only from its own floor or below.
#: (errors, paths, timing, reproducibility, formatting, plots: the style) → assets → verdicts → the mechanisms
#: (the papers' ideas, evaluation, training) → chapters → book → teaching → the command line.
FLOORS = ("base", "assets", "verdicts", "mechanism", "chapters", "tools", "book", "teaching",
          "cli")
BASE = {"nlbudget", "nlbudget.errors", "nlbudget.paths", "nlbudget.timing",
        "nlbudget.reproducibility", "nlbudget.formatting", "nlbudget.plots"}


def floor(module: str) -> str:
    """The floor (`FLOORS`) a module of the package stands on."""
    parts = module.split(".")
    if module in BASE:
        return "base"
    if module == "nlbudget.cli":
        return "cli"
    return parts[1] if parts[1] in FLOORS else "mechanism"


def arrows_up(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor than the importer's."""
    rank = {f: i for i, f in enumerate(FLOORS)}
    return [f"{m} ({floor(m)}) imports {t} ({floor(t)})" for m, ts in sorted(graph.items())
            for t in sorted(ts) if rank[floor(t)] > rank[floor(m)]]


def folders_importing_each_other(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of folders (by floor) each of which imports the other."""
    edges = {(floor(m), floor(t)) for m, ts in graph.items() for t in ts if floor(m) != floor(t)}
    return sorted((a, b) for a, b in edges if (b, a) in edges and a < b)


def test_the_package_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 30  # the walk saw the package
    assert find_cycle(graph) is None, " → ".join(find_cycle(graph))


def test_no_import_goes_up_a_floor_and_no_two_folders_import_each_other():
    graph = import_graph()
    assert {floor(m) for m in graph} == set(FLOORS)  # every floor is there, nothing unplaced
    assert not arrows_up(graph), arrows_up(graph)
    assert not folders_importing_each_other(graph)


def test_the_checkers_find_what_they_look_for():
    # the same functions as above, on graphs with a cycle, an arrow up and a mutual pair
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    up = {"nlbudget.assets.models": {"nlbudget.book.profiles"}, "nlbudget.book.profiles": set()}
    assert arrows_up(up) == ["nlbudget.assets.models (assets) imports nlbudget.book.profiles "
                             "(book)"]
    mutual = {"nlbudget.verdicts.results": {"nlbudget.assets.machine"},
              "nlbudget.assets.corpora": {"nlbudget.verdicts.results"}}
    assert folders_importing_each_other(mutual) == [("assets", "verdicts")]


def test_package_imports_sit_at_the_top_unless_a_comment_says_why():
    hidden = []
    for m, f in MODULES.items():
        lines = f.read_text(encoding="utf-8").splitlines()
        for line, target, top in _imports(f):
            said = "#" in lines[line - 1] or lines[line - 2].strip().startswith("#")
            if not top and not said:
                hidden.append(f"{m}:{line} imports {target}")
    assert not hidden, hidden


def test_errors_import_nothing_and_profiles_load_no_chapter():
    assert not list(_imports(PKG / "errors.py"))
    code = ("import sys; from nlbudget.book import profiles; "
            "print([m for m in sys.modules if m.startswith('nlbudget.chapters.ch')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _functions(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.end_lineno - node.lineno + 1


def test_functions_are_short():
    """None over 100 lines anywhere; none over 60 outside a chapter's study module."""
    long = []
    for m, f in MODULES.items():
        limit = 100 if re.match(r"nlbudget\.chapters\.ch\d\d_\w+\.study$", m) else 60
        long += [f"{m}.{name}: {n} lines" for name, n in _functions(f) if n > limit]
    assert not long, long


def test_no_module_is_over_500_lines():
    long = {m: n for m, f in MODULES.items()
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, long


def test_every_chapter_is_a_package_of_study_page_and_claims():
    """The same three files in every chapter, and where its claims re-analyse the authors'
    result files, a fourth, `authors.py` (with `authors_<idea>.py` beside it where one reading
    is an idea of its own), that its claims read; its claims read stored figures only (no
    torch, nothing of its page), its study nothing of its claims, authors or page."""
    for key, ch in profiles.CHAPTERS.items():
        folder = PKG / "chapters" / ch.module.rsplit(".", 1)[1]
        files = {p.name for p in folder.glob("*.py")}
        authors = {f for f in files if f == "authors.py" or f.startswith("authors_")}
        assert files - authors == {"__init__.py", "study.py", "page.py", "claims.py"}, key
        assert not authors or "authors.py" in authors, key
        own = {f"{ch.module}.{part}" for part in ("study", "page", "claims")} | {
            f"{ch.module}.{f[:-3]}" for f in authors}
        graph = import_graph()
        assert not graph[f"{ch.module}.study"] & (own - {f"{ch.module}.study"}), key
        assert f"{ch.module}.page" not in graph[f"{ch.module}.claims"], key
        for part in ("claims.py", *authors):
            assert "import torch" not in (folder / part).read_text(encoding="utf-8"), key
        for f in authors:
            assert f"{ch.module}.{f[:-3]}" in graph[f"{ch.module}.claims"], key
            assert f"{ch.module}.page" not in graph[f"{ch.module}.{f[:-3]}"], key
        assert callable(ch.load().claims) and ch.load().CLAIMS, key


def test_modules_live_in_folders_by_role():
    roles = {"verdicts": {"claims", "decisions", "controls", "readings", "stats", "results"},
             "assets": {"downloads", "corpora", "models", "gguf_header", "memo", "code_key",
                        "devices", "machine", "reference"},
             "book": {"profiles", "plan", "runner", "build", "exercises", "launch", "pages",
                      "standins", "ledger", "ledger_export", "inputs", "preflight"},
             "teaching": {"checks", "machinery", "slides", "grading",
                          *(f"ch{i:02d}" for i in range(1, 8))}}
    for folder, names in roles.items():
        assert {p.stem for p in (PKG / folder).glob("*.py")} - {"__init__"} == names, folder
    top = {p.stem for p in PKG.glob("*.py")}
    assert {"bilinear", "symbolic", "symmetry", "universal", "tasks", "surrogates", "gating",
            "preprojection", "capture", "evaluation", "training"} <= top


# ---------------------------------------------------------------- settings written once


def test_chapter_notebooks_hold_no_setting():
    for nb_path in NOTEBOOKS:
        nb = nbformat.read(nb_path, as_version=4)
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        names = [s.targets[0].id for s in ast.parse(params[0].source).body]
        assert names == list(profiles.RUN_PARAMETERS), nb_path.name
        settings = set(profiles.chapter(nb_path.stem).settings["ci"])
        code = ast.parse("\n".join(c.source for c in nb.cells if c.cell_type == "code"))
        modules = {(a.asname or a.name).split(".")[0] for n in ast.walk(code)
                   if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        # a setting is read through S, and no variable takes its name (a module may: the
        # settings check never takes a module for a parameter)
        used = _global_names(code) - modules
        assert not used & settings, (nb_path.name, used & settings)


def _global_names(tree) -> set[str]:
    """The names a notebook's code uses in its global scope (not in functions or
    comprehensions, whose names are their own)."""
    local = (ast.FunctionDef, ast.Lambda, ast.ListComp, ast.DictComp, ast.SetComp,
             ast.GeneratorExp)
    out, stack = set(), [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            out.add(node.id)
        if isinstance(node, ast.FunctionDef):
            out.add(node.name)
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, local))
    return out


def _probe_notebook(tmp_path) -> Path:
    """A notebook laid out as a chapter's: the parameters cell, then `from_notebook`."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('profile = "smoke"\nseed = 0\nresults_dir = "r"\n'
                                       'device = "cpu"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        'from nlbudget.book import profiles\n\nS = profiles.from_notebook("01", globals())\n'
        'print("rank", S["rank"], "seed", S["seed"])')]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    return path


def _stdout(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


def test_papermill_overrides_a_setting_and_rejects_an_unknown_name(tmp_path):
    """One papermill probe for both paths (an override taken, an unknown name refused);
    the defaults and a wrong type are `from_notebook`'s, checked without a kernel."""
    src = _probe_notebook(tmp_path)
    pm.execute_notebook(str(src), str(tmp_path / "a.ipynb"), parameters={"rank": 3, "seed": 2},
                        kernel_name="python3", progress_bar=False)
    assert "rank 3 seed 2" in _stdout(tmp_path / "a.ipynb")
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(src), str(tmp_path / "c.ipynb"), parameters={"bogus": 1},
                            kernel_name="python3", progress_bar=False)
    assert "unknown parameter(s) bogus" in e.value.evalue and "valid: profile, seed" in \
        e.value.evalue and "rank" in e.value.evalue
    ns = {"profile": "smoke", "seed": 0, "results_dir": "r", "device": "cpu"}
    smoke_rank = profiles.chapter("01").settings["smoke"]["rank"]
    assert profiles.from_notebook("01", dict(ns))["rank"] == smoke_rank
    with pytest.raises(profiles.ParameterError, match="must be of type int"):
        profiles.from_notebook("01", {**ns, "rank": "two"})


def test_a_rerun_in_the_same_kernel_ignores_the_notebooks_own_variables():
    ns = {"profile": "smoke", "seed": 0, "results_dir": "r", "device": "cpu"}
    assert profiles.from_notebook("01", ns)["rank"] == profiles.chapter("01").settings["smoke"]["rank"]
    ns.update(figures={}, name="a model", layer=3, rank=5)  # the notebook ran; a reader set rank
    assert profiles.from_notebook("01", ns)["rank"] == 5
    with pytest.raises(profiles.ParameterError, match="unknown parameter"):
        profiles.from_notebook("01", {"profile": "smoke", "layer": 3})


# ---------------------------------------------------------------- the experiment on the page

#: A code line that formats rather than experiments: pandas tables and their styles,
#: matplotlib calls, displayed text, printed or glued f-strings.
FORMATTING = re.compile(r"\bpd\.|DataFrame|\.style\b|\.format\(|\bplt\.|\bax\.|\bfig\.\w+\(|"
                        r"display\(|Markdown\(|\bprint\(|\bf\"|\bf'|glue_all\(\{|\.set_\w+\(")


def chapter_code_lines() -> dict[str, tuple[int, int]]:
    """{notebook: (code lines, formatting lines)} over every chapter notebook's code cells."""
    out = {}
    for nb_path in NOTEBOOKS:
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        lines = [ln for c in nb["cells"] if c["cell_type"] == "code"
                 for ln in "".join(c["source"]).splitlines() if ln.strip()]
        out[nb_path.stem] = (len(lines), sum(bool(FORMATTING.search(ln)) for ln in lines))
    return out


def test_chapter_code_is_short_and_mostly_experiment():
    counts = chapter_code_lines()
    total, formatting = (sum(v[i] for v in counts.values()) for i in (0, 1))
    assert total <= 600, counts
    assert formatting <= 0.10 * total, (formatting, total, counts)


def test_formatting_counter_counts():
    assert FORMATTING.search('pd.DataFrame(rows).style.format("{:.2f}")')
    assert FORMATTING.search('print(f"layer {l}: {cost:+.2%}")')
    assert not FORMATTING.search("sweep = surrogates.linearization_sweep(model, w, variants)")


def test_no_claim_function_counts_seeds_by_a_literal():
    """`needs_seeds(decision, n)`: n comes from the figures (how many seeds were run), never a
    number typed into the rule, so a profile with more seeds can decide the row."""
    literal, calls = [], 0
    for f in sorted((PKG / "chapters").glob("ch*/*.py")):  # each chapter is a folder
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "needs_seeds":
                calls += 1
                if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    literal.append(f"{f.parent.name}/{f.name}:{node.lineno}")
    assert calls >= 5, "no needs_seeds call found: the glob reads no chapter"  # can say no
    assert not literal, literal


def test_no_page_cites_a_file_outside_the_repository():
    """A reader has the repository, not the workspace it was written in: chapters, exercises,
    book pages and the bibliography cite papers and the repository's own files only."""
    root = paths.repo_root()
    pages = [*NOTEBOOKS, *sorted((root / "notebooks" / "exercises").glob("*.ipynb")),
             *sorted((root / "book").glob("*.md")), root / "book" / "references.bib"]
    bad = [f"{p.relative_to(root)}: {m.group(0)!r}" for p in pages
           for m in re.finditer(r"shared/\S*|PAPERS\.md|\.\./shared", p.read_text(encoding="utf-8"))]
    assert pages and not bad, bad
