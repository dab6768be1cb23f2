"""`nlbudget slides NN`: a meeting's reveal.js deck, built from the chapter as this build
executed it — its own figures, tables and glued numbers, never retyped — with the meeting's
agenda and discussion questions from the instructors' page.

One slide per section of the chapter (its heading and its first paragraph: the claim or the
idea), a slide under it for every figure or table the section's code cells drew (their code
left out), then the meeting's questions. nbconvert's `SlidesExporter` writes the deck; the
reveal.js and MathJax scripts load from their CDN when the deck is opened (building needs no
network)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from nlbudget import paths
from nlbudget.book import build, plan, profiles
from nlbudget.errors import ParameterError
from nlbudget.verdicts import results

#: Outputs a slide shows: a figure, a table, a derivation or a displayed sentence (plain text,
#: streams, errors and glued values stay out).
SHOWN = ("image/png", "image/svg+xml", "text/html", "text/latex", "text/markdown")
#: Cells whose outputs stay off the slides: the scale box, the rules' long table.
SKIPPED = ("remove-output", "remove-input", "hide-output")
#: MyST roles and directives nbconvert cannot render: the role's text is kept.
_ROLE = re.compile(r"\{(?:doc|ref|numref|eq|cite:p|cite:t|cite|term|download)\}`([^`<]*?)"
                   r"(?:\s*<[^`]*>)?`")
_GLUE = re.compile(r"\{glue(?::(?:text|md))?\}`([^`:]+)(?::[^`]*)?`")
_LABEL = re.compile(r"^\([\w-]+\)=\s*$", re.M)


def meeting(key: str) -> tuple[int, str]:
    """The meeting (number, instructors' page section) that teaches chapter `key`."""
    text = (paths.repo_root() / "book" / "instructors.md").read_text(encoding="utf-8")
    parts = re.split(r"^## Meeting ", text, flags=re.M)[1:]
    for part in parts:
        if f"(chapter {key})" in part.splitlines()[0]:
            return int(part.split(" ", 1)[0]), "## Meeting " + part
    raise ParameterError(f"no meeting on the instructors' page teaches chapter {key}")


def _between(text: str, start: str, stops: tuple[str, ...]) -> str:
    i = text.find(start)
    if i < 0:
        return ""
    j = min([k for k in (text.find(s, i + len(start)) for s in stops) if k > 0] or [len(text)])
    return text[i:j].strip()


def _glued(nb) -> dict[str, str]:
    """The chapter's glued values by name, as its prose shows them."""
    out = {}
    for c in nb.cells:
        for o in c.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                data = o.get("data", {})
                md = next((v for k, v in data.items() if k.endswith("text/markdown")), None)
                out[name] = md if md is not None else str(data.get("text/plain", "")).strip("'\"")
    return out


def plain(markdown: str, glued: dict[str, str]) -> str:
    """Markdown nbconvert can render: glued numbers filled in, MyST roles reduced to their
    text, labels and admonition fences dropped."""
    text = _GLUE.sub(lambda m: glued.get(m.group(1), m.group(1)), markdown)
    text = _ROLE.sub(lambda m: m.group(1).strip(), text)
    text = _LABEL.sub("", text)
    return re.sub(r"^```\{[^}]+\}.*$|^:class:.*$|^```$", "", text, flags=re.M).strip()


def _slide(source: str, kind: str = "slide", outputs=None):
    if outputs is None:
        cell = nbformat.v4.new_markdown_cell(source)
    else:
        cell = nbformat.v4.new_code_cell("", outputs=outputs)
    cell.metadata["slideshow"] = {"slide_type": kind}
    return cell


def deck(executed, key: str, profile: str) -> nbformat.NotebookNode:
    """The meeting's slides as a notebook: title and agenda, the chapter section by section
    (first paragraph, then each figure or table on a slide below it), the questions."""
    number, section = meeting(key)
    glued = _glued(executed)
    title = next(m.group(0) for c in executed.cells if c.cell_type == "markdown"
                 for m in [re.search(r"^# .+$", c.source, re.M)] if m)
    cells = [_slide(f"{title}\n\n*The Nonlinearity Budget* — meeting "
                    f"{number} of {len(build.MEETINGS)} (chapter {key}, profile `{profile}`)"),
             _slide("## Agenda\n\n" + _between(section, "| minutes |", ("\n\n",)))]
    for c in executed.cells:
        if c.cell_type == "markdown" and re.search(r"^## ", c.source, re.M):
            paras = [p for p in plain(c.source, glued).split("\n\n") if p.strip()]
            cells.append(_slide("\n\n".join(paras[:2])))
        elif c.cell_type == "code" and not set(SKIPPED) & set(c.metadata.get("tags", [])):
            shown = [o for o in c.get("outputs", []) if o.get("output_type") in
                     ("display_data", "execute_result") and any(k in o.get("data", {})
                                                               for k in SHOWN)]
            if shown and len(cells) > 2:
                cells.append(_slide("", "subslide", shown))
    questions = [_between(section, f"*{part}.*", ("\n\n*", "\n```")) for part in
                 ("Discussion", "Stretch")]
    cells.append(_slide("## Questions\n\n" + "\n\n".join(q for q in questions if q)))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = executed.metadata.get("kernelspec", {})
    return nb


def write(key: str, profile: str = "ci", results_dir=None, build_dir=None) -> Path:
    """Build chapter `key`'s meeting deck from this build's executed chapter at `profile`
    (with its verdicts as they are now) into `<build>/<profile>/slides/<stem>.slides.html`."""
    key = profiles.chapter(key).key
    step = plan.chapter_step(key, profile, results_dir, build_dir)
    if not step.executed.is_file():
        raise ParameterError(f"chapter {key} has not been executed at profile {profile!r} "
                             f"({step.executed}); run `nlbudget run {key} --profile {profile}` "
                             "first")
    try:
        from nbconvert import SlidesExporter  # the teach extra, for instructors only
    except ImportError:
        raise ParameterError("nbconvert is not installed: `pip install -e .[teach]`") from None
    doc = results.read(step.stem, profile, results_dir)
    executed = nbformat.reads(build.with_verdicts(step.executed.read_bytes(), key, doc).decode(),
                              as_version=4)
    html, _ = SlidesExporter(exclude_input=True, exclude_input_prompt=True,
                             exclude_output_prompt=True).from_notebook_node(
        deck(executed, key, profile))
    out = step.executed.parent.parent / "slides" / f"{step.stem}.slides.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    return paths.atomic_write_text(out, html)


def summary(path: Path) -> dict:
    """How many slides a written deck has, and how many of them show a figure."""
    text = path.read_text(encoding="utf-8")
    return {"sections": text.count("<section"), "figures": text.count("<img"),
            "bytes": len(text.encode())}

