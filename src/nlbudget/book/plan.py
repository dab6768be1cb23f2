"""The build's first step: what is stale, in what order (`make` → a `Plan`, which the runner,
the stage and the render steps receive and never recompute).

A chapter's *inputs* are its notebook, the library (the code of the modules of `nlbudget` its
notebook and its chapter module import, and what those import in turn: `code`), the data it
reads (its rows of `data/claims.csv`, `data/reference/`, `data/corpora/`), its settings at the
profile (seed included), the Python
and package versions, and the results files of the chapters it reads (its module's `READS`).
An exercise notebook's are its notebook, the library and its checks, the versions and its
chapter's results file. After a successful run, a step's record (`<build>/<profile>/chapters/`
or `exercises/<stem>.fresh.json`) holds their digest, the digests of the files the run left
(executed notebook, results file) and how long it took. One rule (`freshness`) decides for
chapters and exercise notebooks alike: fresh when the record matches the inputs now and the
files are still the ones the run left. The record is voided before a step runs, so a failed or
killed run never leaves it marked fresh.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import re
import tokenize
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from nlbudget import paths
from nlbudget.assets.downloads import sha256
from nlbudget.book import exercises, profiles
from nlbudget.verdicts import results

#: Modules no chapter imports (the build, the command line, the exercises' checks), and the
#: list of chapters (`chapters/__init__.py`: adding a chapter changes no other chapter's run):
#: editing them reruns no chapter.
NOT_CHAPTER_INPUTS = ("book/build.py", "book/exercises.py", "book/launch.py", "book/plan.py",
                      "book/runner.py", "chapters/__init__.py", "cli.py", "teaching/checks.py")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str | None:
    """The SHA-256 of a file, or None where there is none."""
    return sha256(path) if path.is_file() else None


def package_imports(source: str, pkg: Path) -> set[Path]:
    """The package's module files that `source` imports (at the top or inside a function)."""
    out: set[Path] = set()

    def add(name: str) -> bool:
        first, _, rest = name.partition(".")
        if first != "nlbudget":
            return False
        rel = Path(*rest.split(".")) if rest else None
        for f in ((pkg / rel.with_suffix(".py"), pkg / rel / "__init__.py") if rel
                  else (pkg / "__init__.py",)):
            if f.is_file():
                out.add(f)
                return True
        return False

    for module, names in import_statements(source):
        if names is None:
            add(module)
        for name in names or ():
            add(f"{module}.{name}") or add(module)
    return out


_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n]*)", re.M)


def import_statements(source: str) -> list[tuple[str, list[str] | None]]:
    """(module, imported names) of every `from m import a, b` — names None for `import m` — read
    from the lines of `source` (not with `ast`: CPython 3.11's parser can raise SystemError on a
    long-running interpreter's deep stack; a test holds the two readings equal on every module
    and notebook)."""
    out: list[tuple[str, list[str] | None]] = []
    for m in _FROM.finditer(source):
        body = re.sub(r"#[^\n]*", "", m.group(2)).strip("()\\ \t\n")
        out.append((m.group(1), [n.split()[0] for n in body.replace("\\\n", " ").split(",")
                                 if n.strip()]))
    for m in _IMPORT.finditer(source):
        for name in re.sub(r"#.*", "", m.group(1)).split(","):
            if name.strip():
                out.append((name.split()[0], None))
    return out


def library_files(key: str, notebook: Path | None = None) -> list[Path]:
    """The modules chapter `key` runs: its module, what its notebook imports, and everything
    those import in turn, with the packages' `__init__` files on the way."""
    pkg = Path(__file__).resolve().parent.parent
    nb = json.loads(Path(notebook or profiles.notebook_path(key)).read_text(encoding="utf-8"))
    own = pkg / (profiles.chapter(key).module.split(".", 1)[1].replace(".", "/") + ".py")
    todo, seen = [own], {pkg / "__init__.py"}
    for cell in (c for c in nb["cells"] if c["cell_type"] == "code"):
        code = "\n".join(ln for ln in "".join(cell["source"]).splitlines()
                         if not ln.lstrip().startswith(("%", "!")))
        todo.extend(package_imports(code, pkg))
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(package_imports(f.read_text(encoding="utf-8"), pkg))
        todo.extend(p / "__init__.py" for p in f.parents if pkg in p.parents)
    return sorted(f for f in seen if f.relative_to(pkg).as_posix() not in NOT_CHAPTER_INPUTS)


def code(source: str) -> str:
    """What of a module's source a chapter's run depends on: its tokens, without comments,
    blank lines and the `SETTINGS` table at the top level (a chapter's settings enter its
    inputs per profile, `inputs()["settings"]`, so resizing the `ci` budget leaves committed
    `full` results fresh, and rewording a comment reruns nothing)."""
    out: list[str] = []
    depth, skipping = 0, False
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for i, t in enumerate(toks):
        if t.type in (tokenize.COMMENT, tokenize.NL):
            continue
        if (t.type == tokenize.NAME and t.string == "SETTINGS" and t.start[1] == 0
                and i + 1 < len(toks) and toks[i + 1].string == "="):
            skipping = True
        if skipping:
            if t.type == tokenize.OP and t.string in "([{":
                depth += 1
            elif t.type == tokenize.OP and t.string in ")]}":
                depth -= 1
            elif t.type == tokenize.NEWLINE and depth == 0:
                skipping = False
            continue
        out.append(f"{t.type}:{t.string}")
    return "\n".join(out)


def library_digest(key: str, notebook: Path | None = None) -> str:
    """The package's code (`code`) as chapter `key` runs it (`library_files`): editing a module
    no chapter step imports, a comment, or another profile's settings reruns nothing."""
    pkg = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in library_files(key, notebook):
        h.update(f.relative_to(pkg).as_posix().encode() + b"\0"
                 + code(f.read_text(encoding="utf-8")).encode() + b"\0")
    return h.hexdigest()


def claims_rows(key: str) -> bytes:
    """The lines of `data/claims.csv` chapter `key` writes (its header and the rows whose
    `chapter` is `key`): adding another chapter's claims reruns no chapter."""
    lines = (paths.shipped() / "data" / "claims.csv").read_bytes().splitlines(keepends=True)
    col = lines[0].decode().rstrip("\r\n").split(",").index("chapter")
    return b"".join(lines[:1] + [ln for ln in lines[1:]
                                 if ln.decode().split(",")[col:col + 1] == [key]])


def data_digest(key: str) -> str:
    """The data chapter `key` reads: its rows of `data/claims.csv` (`claims_rows`), the
    author's reference files (`data/reference/`) and the shipped corpora (`data/corpora/`)."""
    root = paths.shipped() / "data"
    h = hashlib.sha256(b"claims.csv\0" + claims_rows(key))
    for f in [*sorted((root / "reference").rglob("*")), *sorted((root / "corpora").rglob("*"))]:
        if f.is_file():
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def versions() -> dict:
    return {"python": platform.python_version(), **results.package_versions()}


def reads(key: str) -> tuple[str, ...]:
    """Keys of the chapters whose results chapter `key` reads."""
    return tuple(getattr(profiles.chapter(key).load(), "READS", ()))


def run_order(keys: list[str] | None = None) -> list[str]:
    """Reading order, except that a chapter runs after the chapters it reads."""
    keys = list(keys or profiles.available_chapters())
    done: list[str] = []

    def visit(k, stack=()):
        if k in done:
            return
        if k in stack:
            raise ValueError(f"chapters read each other's results in a cycle: {stack + (k,)}")
        for d in reads(k):
            if d in keys:
                visit(d, stack + (k,))
        done.append(k)

    for k in keys:
        visit(k)
    return done


def dependants(key: str, keys: list[str] | None = None) -> list[str]:
    """The chapters that read `key`'s results, directly or through others."""
    keys = list(keys or profiles.available_chapters())
    out: list[str] = []
    frontier = [key]
    while frontier:
        k = frontier.pop()
        for c in keys:
            if k in reads(c) and c not in out:
                out.append(c)
                frontier.append(c)
    return out


def _cells(path: Path, kind: str) -> list[str]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return ["".join(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == kind]


def notebook_code(path: Path) -> str | None:
    """What of a chapter's notebook its results depend on: its code cells, each as `code`
    reads a module (tokens, without comments or blank lines); None where there is no
    notebook."""
    if not path.is_file():
        return None
    h = hashlib.sha256()
    for src in _cells(path, "code"):
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
PAGE_ONLY = ("prose", "versions")


def inputs(key: str, profile: str, seed: int, results_dir=None) -> dict:
    """Everything a chapter's run depends on, each as a digest (or a small value): the
    notebook as its code cells and its prose apart (rewording a page reruns it, but leaves
    a committed result fresh)."""
    return {
        "notebook": notebook_code(profiles.notebook_path(key)),
        "prose": notebook_prose(profiles.notebook_path(key)),
        "library": library_digest(key),
        "data": data_digest(key),
        "settings": profiles.validate(key, profile=profile, seed=seed),
        "versions": versions(),
        "reads": {profiles.chapter(d).stem: file_sha(results.results_path(
            profiles.chapter(d).stem, profile, results_dir)) for d in reads(key)},
    }


def digest(inp: dict) -> str:
    return _sha(json.dumps(inp, sort_keys=True).encode())


def exercise_inputs(key: str, profile: str, results_dir=None) -> dict:
    """What an executed exercise notebook depends on: the notebook, the library and the checks
    it calls, the package versions and the chapter's results file (its predictions read it)."""
    checks = Path(__file__).resolve().parent.parent / "teaching" / "checks.py"
    nb = exercises.notebook(key)
    return {"notebook": file_sha(nb), "library": library_digest(key, nb), "checks": file_sha(checks),
            "versions": versions(), "profile": profile,
            "results": file_sha(results.results_path(profiles.chapter(key).stem, profile,
                                                     results_dir))}


# ------------------------------------------------------------------ steps and their freshness


@dataclass
class Step:
    """One notebook the build executes: a chapter, or a chapter's exercise notebook."""

    kind: str  # "chapter" | "exercises"
    key: str
    record: Path  # <build>/<profile>/<kind folder>/<stem>.fresh.json
    outputs: dict[str, Path]  # what a run leaves, by name: checked for freshness
    why: str = ""  # "fresh", or why it must run

    @property
    def stem(self) -> str:
        return profiles.chapter(self.key).stem

    @property
    def executed(self) -> Path:
        return self.outputs["executed notebook"]


def chapter_step(key: str, profile: str, results_dir=None, build_dir=None) -> Step:
    stem = profiles.chapter(key).stem
    d = Path(build_dir or paths.build_dir()) / profile / "chapters"
    return Step("chapter", key, d / f"{stem}.fresh.json",
                {"executed notebook": d / f"{stem}.ipynb",
                 "results file": results.results_path(stem, profile, results_dir)})


def exercise_step(key: str, profile: str, build_dir=None) -> Step:
    stem = profiles.chapter(key).stem
    d = Path(build_dir or paths.build_dir()) / profile / "exercises"
    return Step("exercises", key, d / f"{stem}.fresh.json",
                {"executed notebook": d / f"{stem}.ipynb"})


def read_record(step: Step) -> dict | None:
    try:
        return json.loads(step.record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def freshness(step: Step, now: dict) -> str:
    """'fresh' when the step's record matches its inputs `now` and the files its last run
    left are still the ones it left; else why it must run. The one freshness rule, for
    chapters and exercise notebooks alike."""
    rec = read_record(step)
    if not rec or not rec.get("digest"):
        return "never run" if not rec else "its last run did not finish"
    for name, path in step.outputs.items():
        if file_sha(path) != rec.get("outputs", {}).get(name):
            return f"its {name} is missing or changed"
    if digest(now) == rec["digest"]:
        return "fresh"
    changed = [k for k in now if now[k] != rec.get("inputs", {}).get(k)]
    return "changed: " + ", ".join(changed or ["inputs"])


def void(step: Step) -> None:
    """Before a step runs: its record says it did not finish (keeping its last time), so a
    failed or killed run leaves it stale."""
    old = read_record(step) or {}
    step.record.parent.mkdir(parents=True, exist_ok=True)
    results.atomic_write_text(step.record, json.dumps({"digest": None,
                                                       "elapsed_s": old.get("elapsed_s")}))


#: Scales whose results are committed: a run also leaves its record beside its results file
#: (`<results>/<profile>/<stem>.fresh.json`), so the ledger can tell when they go stale.
COMMITTED = ("full",)


def done(step: Step, inputs_: dict, elapsed: float) -> None:
    """After a step ran: record the inputs it ran with and the files it left (and, for a
    committed scale, the same record beside the results file)."""
    text = json.dumps({
        "digest": digest(inputs_), "inputs": inputs_,
        "outputs": {n: file_sha(p) for n, p in step.outputs.items()},
        "elapsed_s": round(elapsed, 1),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1)
    results.atomic_write_text(step.record, text)
    res = step.outputs.get("results file")
    if res is not None and res.parent.name in COMMITTED:
        results.atomic_write_text(res.with_suffix(".fresh.json"), text)


def status(key: str, profile: str, seed: int = 0, results_dir=None, build_dir=None) -> str:
    """'fresh', or why chapter `key` must run."""
    return freshness(chapter_step(key, profile, results_dir, build_dir),
                     inputs(key, profile, seed, results_dir))


def record(key, profile, results_dir=None, build_dir=None) -> dict | None:
    """Chapter `key`'s record of its last run (inputs, outputs, time), or None."""
    return read_record(chapter_step(key, profile, results_dir, build_dir))


def estimate(key: str, profile: str, results_dir=None, build_dir=None) -> float | None:
    """Seconds the chapter took last time (its record, else its results file), or None."""
    rec = record(key, profile, results_dir, build_dir)
    if rec and rec.get("elapsed_s"):
        return float(rec["elapsed_s"])
    try:
        return float(results.read(profiles.chapter(key).stem, profile, results_dir)
                     ["timings"]["total_s"])
    except (FileNotFoundError, KeyError, TypeError, ValueError):
        return None


def minutes(s: float | None) -> str:
    return "?" if s is None else f"{s / 60:.1f} min"


def say(line: str) -> None:
    print(line, flush=True)  # at once, also where stdout is a pipe (tox, CI logs)


def threads(key: str) -> int | None:
    """The CPU threads chapter `key` runs with (its module's `THREADS`; None: all cores).
    Chapters that train only tiny models gain nothing from a second thread, so they set one
    thread — always, not only in the build, so a rerun gives the same numbers — and the build
    runs two of them at once."""
    return getattr(profiles.chapter(key).load(), "THREADS", None)


def schedule(keys: list[str] | None = None, when: tuple = ()) -> list[str]:
    """The build's order: the chapters a one-thread chapter reads, then the one-thread
    chapters (run side by side, longest first; `when` = (profile, results_dir, build_dir)
    says where their last times are), then the rest; `run_order` where that would break a
    dependency."""
    order = run_order(keys)
    light = [k for k in order if threads(k)]
    first: list[str] = []
    for k in light:
        stack = list(reads(k))
        while stack:
            d = stack.pop()
            if d in order and not threads(d) and d not in first:
                first.append(d)
                stack.extend(reads(d))
    first = [k for k in order if k in first]
    # longest first (by the last recorded time; never timed: reverse reading order, chapter 01
    # is the shortest), so the shortest fills the gap at the end
    est = {k: estimate(k, *when) if when else None for k in light}
    light = sorted(light, key=lambda k: (-(est[k] or 0), -order.index(k)))
    out = first + light + [k for k in order if k not in first and k not in light]
    pos = {k: i for i, k in enumerate(out)}
    ok = all(pos[d] < pos[k] for k in out for d in reads(k) if d in pos)
    return out if ok else order


# ------------------------------------------------------------------ the plan


@dataclass
class Plan:
    """What a build runs, in what order, and why; made once (`make`) and passed down to
    running (`runner.run_plan`), staging and rendering (`build`)."""

    profile: str
    seed: int
    results_dir: Path | None
    build_dir: Path | None
    chapters: list[Step]  # in the build's order (`schedule`)
    exercises: list[Step]  # in book order
    force: bool = False

    def stale(self, kind: str = "chapters") -> list[Step]:
        return [s for s in getattr(self, kind) if s.why != "fresh"]

    @property
    def when(self) -> tuple:
        return self.profile, self.results_dir, self.build_dir


def make(profile: str, seed: int = 0, results_dir=None, build_dir=None, force: bool = False,
         keys: list[str] | None = None) -> Plan:
    """Plan a build: every chapter in the build's order with why it must run (or 'fresh');
    a chapter that reads a chapter that runs runs after it; a chapter's exercise notebook
    runs when its chapter runs or its own inputs changed."""
    chapters = []
    for k in schedule(keys, (profile, results_dir, build_dir)):
        st = chapter_step(k, profile, results_dir, build_dir)
        st.why = "forced" if force else freshness(st, inputs(k, profile, seed, results_dir))
        chapters.append(st)
    runs = {s.key for s in chapters if s.why != "fresh"}
    for st in chapters:  # in schedule order: what a chapter reads comes before it
        read = [d for d in reads(st.key) if d in runs]
        if st.why == "fresh" and read:
            st.why = "it reads chapter " + ", ".join(read) + ", which runs"
            runs.add(st.key)
    steps = []
    for k in exercises.available():
        if keys is not None and k not in keys:
            continue
        st = exercise_step(k, profile, build_dir)
        st.why = ("forced" if force else "its chapter runs" if k in runs else
                  freshness(st, exercise_inputs(k, profile, results_dir)))
        steps.append(st)
    return Plan(profile, seed, results_dir, build_dir, chapters, steps, force)
