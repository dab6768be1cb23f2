"""Launching a chapter elsewhere: one repository URL, launch buttons only when it is set, and an
install cell at the top of every notebook."""

import sys

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
    assert len(cells) == 2 and f'"nlbudget @ git+{url}"' in cells[0].source
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
