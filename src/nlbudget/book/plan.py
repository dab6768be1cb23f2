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

import importlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from nlbudget import paths
from nlbudget.book import exercises, profiles
from nlbudget.book.inputs import (_FROM, _IMPORT,  # noqa: F401  -- the plan's inputs, as plan.X
                                  CLAIMS_MODULES,
                                  NOT_CHAPTER_INPUTS,
                                  PAGE_MODULES,
                                  PAGE_ONLY, PARTS,
                                  _cells, _closure,
                                  _notebook_imports,
                                  _package, _sha,
                                  chapter_folder,
                                  changed_files,
                                  claims_digest,
                                  claims_rows,
                                  code,
                                  data_digest,
                                  reference_digest,
                                  digest,
                                  exercise_inputs,
                                  file_sha,
                                  import_statements,
                                  inputs,
                                  library_digest,
                                  library_file_digests,
                                  library_files,
                                  notebook_code,
                                  notebook_prose,
                                  package_imports,
                                  reads, versions)
from nlbudget.verdicts import results

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


# ------------------------------------------------------------------ steps and their freshness


@dataclass
class Step:
    """One notebook the build executes: a chapter, or a chapter's exercise notebook."""

    kind: str  # "chapter" | "exercises"
    key: str
    record: Path  # <build>/<profile>/<kind folder>/<stem>.fresh.json
    outputs: dict[str, Path]  # what a run leaves, by name: checked for freshness
    why: str = ""  # "fresh", or why it must run
    rejudge: str = ""  # a chapter that need not run: why its verdicts must be re-judged, or ""

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


def read_record(step: Step, path: Path | None = None) -> dict | None:
    """A step's record (or the record at `path`: a committed result's), None where none."""
    try:
        return json.loads((path or step.record).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def committed_record(step: Step) -> Path:
    """The record a committed result keeps beside its figures (`<stem>.fresh.json`)."""
    return step.outputs["results file"].with_suffix(".fresh.json")


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
    return "changed: " + ", ".join(named(step, changed, rec) or ["inputs"])


def named(step: Step, changed: list[str], rec: dict) -> list[str]:
    """The changed inputs, "library" with the modules whose code changed (a chapter's record
    keeps each module's digest)."""
    if "library" not in changed or step.kind != "chapter":
        return changed
    files = changed_files(rec.get("library_files"), library_file_digests(step.key))
    return [f"library ({files})" if k == "library" else k for k in changed]


def void(step: Step) -> None:
    """Before a step runs: its record says it did not finish (keeping its last time), so a
    failed or killed run leaves it stale."""
    old = read_record(step) or {}
    step.record.parent.mkdir(parents=True, exist_ok=True)
    paths.atomic_write_text(step.record, json.dumps({"digest": None,
                                                       "elapsed_s": old.get("elapsed_s")}))


#: Scales whose results are committed: a run also leaves its record beside its results file
#: (`<results>/<profile>/<stem>.fresh.json`), so the ledger can tell when they go stale.
COMMITTED = ("full",)


def done(step: Step, inputs_: dict, elapsed: float) -> None:
    """After a step ran: record the inputs it ran with and the files it left (and, for a
    committed scale, the same record beside the results file). A chapter's record also says
    what its verdicts were judged with (`verdicts`)."""
    rec = {"digest": digest(inputs_), "inputs": inputs_,
           "outputs": {n: file_sha(p) for n, p in step.outputs.items()},
           "elapsed_s": round(elapsed, 1),
           "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if step.kind == "chapter":
        rec["verdicts"] = verdicts_record(step)
        rec["library_files"] = library_file_digests(step.key)
    _write_record(step, rec)


def _write_record(step: Step, rec: dict, path: Path | None = None) -> None:
    """Write a step's record (to `path` alone where given), and for a committed scale the
    same record beside its results file."""
    text = json.dumps(rec, indent=1)
    paths.atomic_write_text(path or step.record, text)
    res = step.outputs.get("results file")
    if path is None and res is not None and res.parent.name in COMMITTED:
        paths.atomic_write_text(committed_record(step), text)


def verdicts_file(step: Step) -> Path:
    return step.outputs["results file"].with_suffix(".verdicts.json")


def verdicts_record(step: Step) -> dict:
    """What a chapter's verdicts file was judged with: the claims code (`claims_digest`) and
    the file it left."""
    return {"claims": claims_digest(step.key), "file": file_sha(verdicts_file(step))}


def verdicts_freshness(rec: dict | None, step: Step) -> str:
    """'fresh' when a chapter's verdicts were judged by its claims code as it is now and its
    verdicts file is the one that judging left; else why it must be re-judged."""
    got = (rec or {}).get("verdicts") or {}
    if not verdicts_file(step).is_file() or got.get("file") != file_sha(verdicts_file(step)):
        return "its verdicts file is missing or changed"
    return "fresh" if got.get("claims") == claims_digest(step.key) else "changed: claims"


def judge(step: Step, record_path: Path | None = None) -> dict:
    """Re-judge chapter `step`'s stored figures with its claims code as it is now
    (`results.judge`), and record it: its figures file and everything that reads it stay as
    they are. `record_path`: the record to update (default: the step's own). Returns what
    `results.judge` returns."""
    res = step.outputs["results file"]
    mod = importlib.import_module(profiles.chapter(step.key).module + ".claims")
    out = results.judge(mod, res.stem, res.parent.name, res.parent.parent)
    rec = read_record(step, record_path)
    if rec is not None:
        rec["verdicts"] = verdicts_record(step)
        _write_record(step, rec, record_path)
    return out


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

    def to_judge(self) -> list[Step]:
        """The chapters that need not run but whose verdicts must be re-judged."""
        return [s for s in self.chapters if s.why == "fresh" and s.rejudge]

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
        if st.why == "fresh":
            v = verdicts_freshness(read_record(st), st)
            st.rejudge = "" if v == "fresh" else v
    steps = []
    for k in exercises.available():
        if keys is not None and k not in keys:
            continue
        st = exercise_step(k, profile, build_dir)
        st.why = ("forced" if force else "its chapter runs" if k in runs else
                  freshness(st, exercise_inputs(k, profile, results_dir)))
        steps.append(st)
    return Plan(profile, seed, results_dir, build_dir, chapters, steps, force)
