"""What a chapter's run depends on, each as a digest: its notebook (code cells and prose apart),
the library in three parts — what its measurements run (`study`), what its verdicts read
(`claims`), what its page reads (`page`) — the data it reads, its settings, the package
versions and the results of the chapters it reads. `plan` decides freshness from these."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import tokenize
from pathlib import Path

from nlbudget import paths
from nlbudget.assets import code_key
from nlbudget.assets.code_key import (_FROM, _IMPORT, closure, code,  # noqa: F401
                                      import_statements, package_imports)
from nlbudget.assets.downloads import sha256
from nlbudget.book import exercises, launch, profiles
from nlbudget.verdicts import results

#: Modules no chapter imports (the build, the command line, the exercises' checks), and the
#: list of chapters (`chapters/__init__.py`: adding a chapter changes no other chapter's run):
#: editing them reruns no chapter.
NOT_CHAPTER_INPUTS = ("book/build.py", "book/exercises.py", "book/launch.py", "book/plan.py",
                      "book/runner.py", "chapters/__init__.py", "cli.py")
#: Modules every chapter imports whose whole effect on a result is another input: the
#: profiles (`book/profiles.py`) resolve a run's settings and find its notebook, and both are
#: inputs of their own (`settings`: the resolved settings, compared value by value; `notebook`):
#: a new check of a bad value, or a clearer message, reruns no chapter.
CAPTURED_ELSEWHERE = ("book/profiles.py",)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str | None:
    """The SHA-256 of a file, or None where there is none."""
    return sha256(path) if path.is_file() else None


#: What a chapter's *page* reads besides its own `page.py`: tables, figures, the rules' source.
#: Its measured figures never depend on them (a reworded table reruns the page, and leaves a
#: committed result fresh).
PAGE_MODULES = ("book/pages.py", "plots.py")
#: What a chapter's *verdicts* read besides its own `claims.py`: the vocabulary and the rules'
#: building blocks. A change here re-judges the stored figures (`judge`) and reruns nothing.
CLAIMS_MODULES = ("verdicts/claims.py",)


def _package() -> Path:
    return Path(__file__).resolve().parent.parent


def chapter_folder(key: str) -> Path:
    """Chapter `key`'s package: `study.py`, `page.py` and `claims.py`."""
    return _package() / profiles.chapter(key).module.split(".", 1)[1].replace(".", "/")


def _closure(roots: list[Path], stop: set[Path]) -> set[Path]:
    """`code_key.closure` of `roots`, without the modules that are no chapter's input."""
    pkg = _package()
    return {f for f in closure(roots, stop) if f.relative_to(pkg).as_posix() not in
            (*NOT_CHAPTER_INPUTS, *CAPTURED_ELSEWHERE)
            and not f.relative_to(pkg).as_posix().startswith("teaching/")}


def _notebook_imports(notebook: Path) -> list[Path]:
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    out: list[Path] = []
    for cell in (c for c in nb["cells"] if c["cell_type"] == "code"):
        code_ = "\n".join(ln for ln in "".join(cell["source"]).splitlines()
                          if not ln.lstrip().startswith(("%", "!")))
        out.extend(package_imports(code_, _package()))
    return out


#: The three parts of a chapter's library (`library_files`): what its measurements run, what
#: its verdicts read, what its page reads.
PARTS = ("study", "claims", "page")


def library_files(key: str, notebook: Path | None = None, part: str = "study") -> list[Path]:
    """The modules of one part (`PARTS`) of chapter `key`: `study` — what its measurements
    run: its notebook's imports and its `study.py`, and what those import in turn, never
    entering its `claims.py`, its `page.py` or `CLAIMS_MODULES` and `PAGE_MODULES`; `claims`
    — its `claims.py`, `CLAIMS_MODULES` and what they import that `study` does not hold;
    `page` — likewise from its `page.py` and `PAGE_MODULES`. (`claims` leaves out what the
    chapter's study imports, not what its notebook imports: it needs no notebook.)"""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; valid: {', '.join(PARTS)}")
    pkg, own = _package(), chapter_folder(key)
    claims_roots = [own / "claims.py", *(pkg / m for m in CLAIMS_MODULES)]
    page_roots = [own / "page.py", *(pkg / m for m in PAGE_MODULES)]
    # no chapter's claims or page enters a study (chapter 07's study imports chapter 03's)
    others = {chapter_folder(k) / f for k in profiles.CHAPTERS for f in ("claims.py", "page.py")}
    stop = set(claims_roots) | set(page_roots) | others
    core = _closure([own / "__init__.py", own / "study.py"], stop)
    claims = _closure(claims_roots, set(page_roots) | others) - core  # needs no notebook
    if part == "claims":
        return sorted(claims)
    imports = _notebook_imports(notebook or profiles.notebook_path(key))
    study = core | _closure([f for f in imports if f not in stop], stop)
    chosen = {"study": study,
              "page": _closure(page_roots, set(claims_roots) | others) - study - claims}[part]
    return sorted(chosen)


def library_digest(key: str, notebook: Path | None = None, part: str = "study") -> str:
    """The package's code (`code`) of one part of chapter `key` (`library_files`): editing a
    module no chapter step imports, a comment, or another profile's settings reruns nothing."""
    return code_key.files_digest(library_files(key, notebook, part))


def library_file_digests(key: str, part: str = "study") -> dict[str, str]:
    """{module's path in the package: the SHA-256 of its `code`} of one part of chapter `key`
    (`library_files`): a record keeps them, so that "changed: library" can name the files."""
    pkg = _package()
    return {f.relative_to(pkg).as_posix(): _sha(code(code_key.source(f)).encode())
            for f in library_files(key, part=part)}


def changed_files(before: dict | None, now: dict) -> str:
    """Which modules differ between two `library_file_digests`, as text."""
    if before is None:
        return "which files: the record predates per-file digests"
    names = sorted(f for f in before.keys() | now.keys() if before.get(f) != now.get(f))
    return ", ".join(n + ("" if n in now else " (gone)") + ("" if n in before else " (new)")
                     for n in names) or "which files: none differs"


def claims_rows(key: str) -> bytes:
    """The lines of `data/claims.csv` chapter `key` writes (its header and the rows whose
    `chapter` is `key`): adding another chapter's claims reruns no chapter."""
    lines = (paths.shipped() / "data" / "claims.csv").read_bytes().splitlines(keepends=True)
    col = lines[0].decode().rstrip("\r\n").split(",").index("chapter")
    return b"".join(lines[:1] + [ln for ln in lines[1:]
                                 if ln.decode().split(",")[col:col + 1] == [key]])


#: Files no data folder means to hold, wherever they appear: Python's bytecode, editors'
#: backups and swap files, the desktop's and notebooks' own litter.
LITTER = ("__pycache__", ".ipynb_checkpoints", ".DS_Store", "Thumbs.db", "desktop.ini")
_LITTER_SUFFIXES = (".pyc", ".pyo", ".swp", ".swo", "~", ".orig", ".rej")


def is_litter(rel: Path) -> bool:
    """Whether a file under a data folder is litter (`LITTER`), not data."""
    return (any(p in LITTER or p.startswith("._") for p in rel.parts)
            or rel.name.endswith(_LITTER_SUFFIXES) or rel.name.startswith(".#"))


def _tracked(root: Path, folder: str) -> list[Path] | None:
    """The files git tracks under `root/data/folder`, or None where `root` is no git checkout
    (a wheel's copy) or git is missing."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", f"data/{folder}"],
                             capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [root / f for f in out.decode().split("\0") if f]


def data_files(*folders: str) -> list[Path]:
    """The data files under `data/<folder>/` of the checkout (those git tracks; in a wheel's
    copy, every file), never litter (`is_litter`): running the tests, opening a file in an
    editor or browsing the folder reruns no chapter."""
    root = paths.shipped()
    files = []
    for folder in folders:
        tracked = _tracked(root, folder) if (root / ".git").exists() else None
        found = tracked if tracked is not None else (root / "data" / folder).rglob("*")
        files += sorted(f for f in found if f.is_file()
                        and not is_litter(f.relative_to(root / "data" / folder)))
    return files


def _files_digest(*folders: str) -> str:
    """The data files under `data/<folder>/` (`data_files`), each by its path and bytes."""
    root = paths.shipped() / "data"
    h = hashlib.sha256()
    for f in data_files(*folders):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def data_digest(key: str) -> str:
    """The data chapter `key`'s measurements read: the shipped corpora (`data/corpora/`). The
    author's transcribed result files (`data/reference/`) are read by verdicts and pages only
    (`reference_digest`: re-judged, never rerun), and its rows of `data/claims.csv` by its
    verdicts (`claims_digest`)."""
    return _files_digest("corpora")


def reference_digest() -> str:
    """The P3 author's result files as transcribed in `data/reference/`: the authors' evidence
    of the verdicts, and the pages' figures of it."""
    return _files_digest("reference")


def reads_reference(key: str) -> bool:
    """Whether chapter `key`'s claims or page read the author's transcribed files (their
    modules reach `assets/reference.py`): only those chapters' pages show them. No chapter's
    measurements read them."""
    ref = _package() / "assets" / "reference.py"
    return any(ref in library_files(key, part=p) for p in ("claims", "page"))


def versions() -> dict:
    return {"python": platform.python_version(), **results.package_versions()}


def reads(key: str) -> tuple[str, ...]:
    """Keys of the chapters whose results chapter `key` reads."""
    return tuple(getattr(profiles.chapter(key).load(), "READS", ()))


def _cells(path: Path, kind: str) -> list[str]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return ["".join(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == kind]


def notebook_code(path: Path) -> str | None:
    """What of a chapter's notebook its results depend on: its code cells, each as `code`
    reads a module (tokens, without comments or blank lines), but the install cell
    (`launch.MARK`: setting the repository's URL and syncing the cells stales no result);
    None where there is no notebook."""
    if not path.is_file():
        return None
    h = hashlib.sha256()
    for src in _cells(path, "code"):
        if src.startswith(launch.MARK):  # the install cell (`launch.sync`): where the package
            continue  # comes from, not what the chapter computes
        try:
            src = code(src.rstrip() + "\n")  # a cell's last line reads alike with or without "\n"
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass  # not plain Python (a magic): its text as it is
        h.update(src.encode() + b"\0")
    return h.hexdigest()


def notebook_prose(path: Path) -> str | None:
    """The notebook's markdown cells: the page reads them, the results do not."""
    if not path.is_file():
        return None
    return _sha("\0".join(_cells(path, "markdown")).encode())


#: Inputs a page depends on but a result does not: a committed result stays fresh when only
#: these changed (`build.staleness`).
PAGE_ONLY = ("prose", "page", "versions", "reference")


def inputs(key: str, profile: str, seed: int, results_dir=None) -> dict:
    """Everything a chapter's run depends on, each as a digest (or a small value): the
    notebook as its code cells and its prose apart, and the library's study and page apart
    (rewording a page reruns it, but leaves a committed result fresh). Its claims are not
    among them: they are judged apart (`claims_digest`, `judge`)."""
    return {
        "notebook": notebook_code(profiles.notebook_path(key)),
        "prose": notebook_prose(profiles.notebook_path(key)),
        "page": library_digest(key, part="page"),
        "library": library_digest(key),
        "data": data_digest(key),
        # the author's files: page-only (`PAGE_ONLY`), and only where the page shows them —
        # re-transcribing them re-judges every chapter (`claims_digest`) and reruns no
        # measurement
        "reference": reference_digest() if reads_reference(key) else None,
        # the device is no input: `auto` would resolve to `cuda` on a machine with a GPU and
        # make every committed result read stale there. "cpu" stands for any device (the
        # value the records made before this rule hold); the results file names the device
        # the run used
        "settings": profiles.validate(key, profile=profile, seed=seed, device="cpu"),
        "versions": versions(),
        "reads": {profiles.chapter(d).stem: file_sha(results.results_path(
            profiles.chapter(d).stem, profile, results_dir)) for d in reads(key)},
    }


def claims_digest(key: str) -> str:
    """What chapter `key`'s verdicts depend on besides its figures: its claims code
    (`library_files(part="claims")`), its rows of `data/claims.csv` (`claims_rows`) and the
    author's transcribed result files (`reference_digest`)."""
    return _sha((library_digest(key, part="claims") + "\0" + reference_digest() + "\0").encode()
                + claims_rows(key))


def digest(inp: dict) -> str:
    return _sha(json.dumps(inp, sort_keys=True).encode())


def exercise_inputs(key: str, profile: str, results_dir=None) -> dict:
    """What an executed exercise notebook depends on: the notebook, the library and the checks
    it calls, the package versions and the chapter's results file (its predictions read it)."""
    checks = hashlib.sha256()
    for f in sorted((_package() / "teaching").glob("*.py")):
        checks.update(f.name.encode() + b"\0" + f.read_bytes())
    nb = exercises.notebook(key)
    return {"notebook": file_sha(nb), "library": library_digest(key, nb),
            "checks": checks.hexdigest(), "versions": versions(), "profile": profile,
            "results": file_sha(results.results_path(profiles.chapter(key).stem, profile,
                                                     results_dir))}
