"""Launching a chapter elsewhere: one repository URL, launch buttons only when it is set, and an
install cell at the top of every notebook."""

import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from nlbudget.book import build as book, launch
from nlbudget import paths


def test_every_notebook_starts_with_the_hidden_install_cell():
    source = launch.install_cell_source(launch.repository_url())
    nbs = launch.notebooks()
    assert len(nbs) >= 12  # six chapters, six exercise notebooks
    for p in nbs:
        first = nbformat.read(p, as_version=4).cells[0]
        assert first.cell_type == "code" and first.source == source, p
        assert first.metadata["tags"] == ["remove-cell"], p


def test_sync_is_idempotent_and_writes_the_url(tmp_path, monkeypatch):
    for sub in ("notebooks", "notebooks/exercises"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter")])
    nbformat.write(nb, tmp_path / "notebooks" / "01_x.ipynb")
    monkeypatch.setattr(paths, "shipped", lambda: tmp_path)
    url = "https://example.org/owner/book"
    assert len(launch.sync(url)) == 1 and launch.sync(url) == []
    cells = nbformat.read(tmp_path / "notebooks" / "01_x.ipynb", as_version=4).cells
    assert len(cells) == 2 and f'"{url}"' in cells[0].source and launch.ref() in cells[0].source
    assert len(launch.sync("https://example.org/other/book")) == 1  # replaced, not added
    assert sum(launch._is_install_cell(c) for c in
               nbformat.read(tmp_path / "notebooks" / "01_x.ipynb", as_version=4).cells) == 1


def test_without_a_url_the_cell_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nlbudget", None)  # `import nlbudget` fails
    with pytest.raises(ImportError, match="pip install -e ."):
        exec(launch.install_cell_source(None), {})


def test_launch_buttons_only_when_the_url_is_set():
    base = (paths.repo_root() / "book" / "_config.yml").read_text()
    plain = yaml.safe_load(launch.config_text(base, None))
    assert "launch_buttons" not in plain and "repository" not in plain
    url = "https://example.org/owner/book"
    cfg = yaml.safe_load(launch.config_text(base, url))
    assert cfg["repository"]["url"] == url and cfg["html"]["use_repository_button"]
    assert cfg["launch_buttons"]["colab_url"] and cfg["launch_buttons"]["binderhub_url"]
    assert cfg["repository"]["branch"] == launch.ref() == f"v{launch.version()}"
    assert {k: cfg[k] for k in plain} == plain  # nothing else changes


def test_the_url_lives_in_pyproject_only():
    """No file of the book, the notebooks or the library types a repository URL of its own."""
    import re

    pattern = re.compile(r"github\.com/(?!fjzzq2002|pbalogh|huggingface|EleutherAI)[\w-]+/[\w-]+")
    root = paths.repo_root()
    files = [*root.glob("book/*"), *launch.notebooks(), *root.glob("src/nlbudget/**/*.py")]
    hits = [f for f in files if f.is_file() and pattern.search(f.read_text(errors="ignore"))]
    assert not hits, hits
    assert book.launch is launch  # the book stages its config through launch.config_text


def test_syncing_the_install_cells_stales_no_committed_result(tmp_path, monkeypatch):
    """Setting the repository's URL and syncing rewrites every notebook's first cell; the
    cell says where the package comes from, not what a chapter computes, so every committed
    `full` result stays fresh."""
    from nlbudget.book import ledger, profiles

    copies = {}
    for key in profiles.CHAPTERS:
        p = profiles.notebook_path(key)
        copies[key] = tmp_path / p.name
        copies[key].write_bytes(p.read_bytes())
    assert launch.sync("https://example.org/owner/book", list(copies.values()))  # rewritten
    monkeypatch.setattr(profiles, "notebook_path", lambda key: copies[profiles.chapter(key).key])
    assert {k: ledger.staleness(k, "full") for k in profiles.CHAPTERS} == {
        k: "" for k in profiles.CHAPTERS}
    # and a change to any other cell is still seen
    nb = nbformat.read(copies["01"], as_version=4)
    next(c for c in nb.cells[1:] if c.cell_type == "code").source += "\nseed = 1"
    nbformat.write(nb, copies["01"])
    assert "notebook" in ledger.staleness("01", "full")


def _run_cell(source: str, tmp_path, monkeypatch, tag_published: bool) -> list:
    """Execute the install cell as IPython would, where nlbudget is not installed, with git
    and %pip stood in: returns the commands it ran."""
    import os
    import subprocess
    import types

    from IPython.core.inputtransformer2 import TransformerManager

    calls = []

    def run(cmd, check=False, **kw):
        calls.append(cmd)
        if "--branch" in cmd and not tag_published:
            return types.SimpleNamespace(returncode=128)
        (tmp_path / launch.CLONE / "notebooks").mkdir(parents=True, exist_ok=True)
        return types.SimpleNamespace(returncode=0)

    ip = types.SimpleNamespace(run_line_magic=lambda name, line: calls.append(["%" + name, line]))
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setitem(sys.modules, "nlbudget", None)  # `import nlbudget` fails
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(TransformerManager().transform_cell(source), {"get_ipython": lambda: ip})
    assert Path(os.getcwd()) == tmp_path / launch.CLONE / "notebooks"
    assert sys.path[0] == str(tmp_path / launch.CLONE / "src")
    return calls


def test_the_colab_cell_clones_the_books_tag_and_runs_inside_it(tmp_path, monkeypatch):
    url = "https://example.org/owner/book"
    calls = _run_cell(launch.install_cell_source(url, "v9.9"), tmp_path, monkeypatch, True)
    assert calls[0][-4:] == ["--branch", "v9.9", url, launch.CLONE]
    assert calls[1] == ["%pip", f"install --quiet -e {launch.CLONE}"] and len(calls) == 2
    # the chapters' results folder, ../data/results, is the clone's, not /data/results
    assert (Path.cwd() / ".." / "data" / "results").resolve() == (
        tmp_path / launch.CLONE / "data" / "results")


def test_the_colab_cell_falls_back_to_the_default_branch(tmp_path, monkeypatch, capsys):
    url = "https://example.org/owner/book"
    calls = _run_cell(launch.install_cell_source(url, "v9.9"), tmp_path, monkeypatch, False)
    assert "--branch" in calls[0] and calls[1] == ["git", "clone", "--quiet", "--depth", "1",
                                                   url, launch.CLONE]
    assert "tag v9.9 is not published" in capsys.readouterr().out


def test_binder_installs_the_book_with_the_cpu_torch_and_the_lock():
    root = paths.repo_root()
    assert (root / "binder" / "runtime.txt").read_text().strip() == "python-3.11"
    post = root / "binder" / "postBuild"
    text = post.read_text()
    assert post.stat().st_mode & 0o111  # executable: repo2docker runs it
    assert "PIP_INDEX_URL=https://download.pytorch.org/whl/cpu" in text
    assert '-c constraints/lock.txt -e ".[book]"' in text
    assert "set -euo pipefail" in text
