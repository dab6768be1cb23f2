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


def test_the_package_import_graph_has_no_cycle():
    graph = {m: {t for _, t, _ in _imports(f) if t in MODULES and t != m}
             for m, f in MODULES.items()}
    state: dict[str, int] = {}

    def visit(m, path):
        if state.get(m) == 2:
            return
        assert state.get(m) != 1, "import cycle: " + " → ".join(path + [m])
        state[m] = 1
        for t in sorted(graph[m]):
            visit(t, path + [m])
        state[m] = 2

    for m in sorted(graph):
        visit(m, [])
    assert len(graph) > 30  # the walk saw the package


def test_a_cycle_would_be_found():
    # the checker itself: a module importing its importer is refused
    graph = {"a": {"b"}, "b": {"a"}}
    with pytest.raises(AssertionError, match="cycle"):
        state = {}

        def visit(m, path):
            assert state.get(m) != 1, "import cycle"
            if state.get(m) == 2:
                return
            state[m] = 1
            for t in graph[m]:
                visit(t, path + [m])
            state[m] = 2
        visit("a", [])


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
    """None over 100 lines anywhere; none over 60 outside a chapter's module (its study)."""
    long = []
    for m, f in MODULES.items():
        limit = 100 if m.startswith("nlbudget.chapters.") else 60
        long += [f"{m}.{name}: {n} lines" for name, n in _functions(f) if n > limit]
    assert not long, long


def test_modules_live_in_folders_by_role():
    roles = {"verdicts": {"claims", "stats", "results"},
             "assets": {"downloads", "corpora", "models", "standins", "memo", "devices", "machine"},
             "book": {"profiles", "plan", "runner", "build", "exercises", "launch", "pages",
                      "plots"},
             "teaching": {"checks"}}
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
    src = _probe_notebook(tmp_path)
    pm.execute_notebook(str(src), str(tmp_path / "a.ipynb"), parameters={"rank": 3, "seed": 2},
                        kernel_name="python3", progress_bar=False)
    assert "rank 3 seed 2" in _stdout(tmp_path / "a.ipynb")
    pm.execute_notebook(str(src), str(tmp_path / "b.ipynb"), kernel_name="python3",
                        progress_bar=False)
    smoke_rank = profiles.chapter("01").settings["smoke"]["rank"]
    assert f"rank {smoke_rank} seed 0" in _stdout(tmp_path / "b.ipynb")
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(src), str(tmp_path / "c.ipynb"), parameters={"bogus": 1},
                            kernel_name="python3", progress_bar=False)
    assert "unknown parameter(s) bogus" in e.value.evalue and "valid: profile, seed" in \
        e.value.evalue and "rank" in e.value.evalue
    with pytest.raises(pm.PapermillExecutionError, match="must be of type int"):
        pm.execute_notebook(str(src), str(tmp_path / "d.ipynb"), parameters={"rank": "two"},
                            kernel_name="python3", progress_bar=False)


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
    literal = []
    for f in (PKG / "chapters").glob("ch*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "needs_seeds"
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)):
                literal.append(f"{f.name}:{node.lineno}")
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
