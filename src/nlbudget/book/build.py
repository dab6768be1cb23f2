"""Stage and build the Jupyter Book (1.x) from executed chapters and results files.

The staging folder `<build>/<profile>/site/` mirrors the repository: the pages of `book/`,
the executed notebooks under `notebooks/` (so launch buttons point at the real sources),
and `ledger.md`, generated from the results files.
"""

from __future__ import annotations

import importlib
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from nlbudget import paths
from nlbudget.assets import machine
from nlbudget.book import exercises, launch, pages, plan, profiles, runner
from nlbudget.book.ledger import (  # noqa: F401
    COMMITTED,
    chapter_parts,
    committed_dir,
    committed_rows,
    judge_committed,
    ledger_markdown,
    ledger_text,
    part_titles,
    staleness,
    verdicts_staleness,
    with_committed,
)
from nlbudget.book.ledger_export import ledger_export  # noqa: F401
from nlbudget.book.plan import Plan
from nlbudget.verdicts import results


def timings_markdown(profile: str, results_dir: Path | None = None,
                     build_dir: Path | None = None, top: int = 4) -> str:
    """The "how long it takes" table of the rerun page, from the results files' recorded
    timings (each chapter's total, and its longest top-level phases)."""
    lines = [f"| chapter | minutes at `{profile}` | where the time goes (longest phases, s) |",
             "|---|---:|---|"]
    total, cpus_seen = 0.0, []
    for key in plan.run_order():
        stem = profiles.chapter(key).stem
        try:
            doc = results.read(stem, profile, results_dir)
            t = doc["timings"]
            if doc.get("environment", {}).get("cpu"):
                cpus_seen.append(doc["environment"]["cpu"])
        except (FileNotFoundError, KeyError):
            lines.append(f"| {stem} | — | not run |")
            continue
        total += t["total_s"]
        phases = sorted(((v, k) for k, v in t["phases"].items() if "/" not in k), reverse=True)
        lines.append(f"| {stem} | {t['total_s'] / 60:.1f} | "
                     + ", ".join(f"`{k}` {v:.0f}" for v, k in phases[:top]) + " |")
    light = ", ".join(k for k in plan.run_order() if plan.threads(k))
    lines.append(f"| **all chapters** | **{total / 60:.1f}** | the sum; the build runs the "
                 f"one-thread chapters ({light}) side by side, so it takes less |")
    cpus = sorted({machine.describe(c) for c in cpus_seen})
    if cpus:
        lines += ["", f"Built on: {'; '.join(cpus)} (float32 on the CPU)."]
    return "\n".join(lines) + "\n"


#: The course page's seven meetings, in reading order: (chapter key, what the meeting is about).
MEETINGS = (("01", "what a gated MLP computes, and the symmetries its gate breaks"),
            ("02", "whether breaking the symmetry matters, at one parameter budget"),
            ("03", "how much of each MLP is linear: ridge surrogates and their cost"),
            ("04", "which tokens can skip the MLP: gates, labels, routing, savings"),
            ("05", "programming a frozen transformer through its embedding"),
            ("06", "a nonlinearity before Q/K/V, against LoRA at the same budget; the ledger"),
            ("07", "one model under four lenses, and what a perplexity budget buys"))


def course_plan_markdown(profile: str, results_dir: Path | None = None) -> str:
    """The course page's plan: per meeting, the chapter, its exercises with minutes, and what
    to run before class with the time this build took (from the results files)."""
    lines = ["| meeting | topic | exercises (minutes) | before class | time here |",
             "|---|---|---|---|---|"]
    times = {}
    for i, (key, topic) in enumerate(MEETINGS, start=1):
        ch = profiles.chapter(key)
        ex = exercises.catalogue(key) if key in exercises.available() else []
        listed = "; ".join(f"{{ref}}`{e['number']} <{e['label']}>` "
                           f"({e['minutes']})" for e in ex)
        try:
            t = times[key] = results.read(ch.stem, profile, results_dir)["timings"]["total_s"]
            took = f"{t / 60:.1f} min" if t >= 60 else f"{t:.0f} s"
        except (FileNotFoundError, KeyError):
            took = "not run"
        lines.append(f"| {i} | {{doc}}`notebooks/{ch.stem}`: {topic} | {len(ex)}: {listed}; "
                     f"{sum(e['minutes'] for e in ex)} in all | `nlbudget run {key} --profile "
                     f"{profile}` | {took} |")
    if times:
        key = max(times, key=times.get)
        lines += ["", f"The heaviest chapter of this build is {key} "
                  f"({times[key] / 60:.1f} minutes at `{profile}`): run it before class."]
    return "\n".join(lines) + "\n"


def _sync(files: dict[str, bytes], site: Path) -> list[str]:
    """Make `site` hold exactly `files` (relative path -> content), leaving its `_build`
    alone and every unchanged file untouched (so Sphinx sees it as unchanged). Returns the
    paths written or removed."""
    changed = []
    for rel, data in files.items():
        p = site / rel
        if p.is_file() and p.read_bytes() == data:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        changed.append(rel)
    for p in sorted(site.rglob("*"), reverse=True):
        rel = p.relative_to(site).as_posix()
        if rel == "_build" or rel.startswith("_build/"):
            continue
        if p.is_file() and rel not in files:
            p.unlink()
            changed.append(rel)
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    return changed


#: The book's editions: with the exercises' solutions (folded) and executed checks, or for
#: students — every exercise page as the student edition of its notebook: no solution, no
#: output, so no prediction's measured answer before the student has made one.
EDITIONS = ("solutions", "student")


def _check_edition(edition: str) -> None:
    if edition not in EDITIONS:
        raise ValueError(f"unknown edition {edition!r}; valid: {', '.join(EDITIONS)}")


def _exercise_page(step, edition: str) -> bytes:
    if edition == "student":  # the committed copy (a test keeps it equal to the exercises)
        return (exercises.student_folder() / exercises.notebook(step.key).name).read_bytes()
    if not step.executed.is_file():
        raise FileNotFoundError(f"the exercises of chapter {step.stem} have not been executed "
                                f"({step.executed}); run `nlbudget book`")
    return step.executed.read_bytes()


def _student_pages(files: dict[str, bytes], p: Plan) -> None:
    """The student book (`stage`): each chapter's predictions on a page before it (the
    committed predict-first copies, `exercises.predict_first`), so no page a student has
    read yet answers one; and the instructors' page left out, with the links to it."""
    toc = files["_toc.yml"].decode()
    for step in p.exercises:
        name = exercises.predict_name(step.key)
        files[f"notebooks/student/{name}"] = (exercises.student_folder() / name).read_bytes()
        toc = toc.replace(f"      - file: notebooks/{step.stem}\n",
                          f"      - file: notebooks/student/{name[:-6]}\n"
                          f"      - file: notebooks/{step.stem}\n")
    files.pop("instructors.md", None)
    files["_toc.yml"] = toc.replace("      - file: instructors\n", "").encode()
    for rel in [r for r in files if r.endswith(".md")]:
        files[rel] = files[rel].replace(b"{doc}`instructors`",
                                        "the solutions edition's page for instructors".encode())


#: The cells of a chapter page that show its verdicts: the build renders their outputs from the
#: verdicts file as it is now, so a page shows a re-judged verdict without rerunning its study.
VERDICT_CELLS = {"pages.claims_table(doc)": lambda doc, key: pages.claims_table(doc),
                 "pages.rules(ch)": lambda doc, key: pages.rules(profiles.chapter(key).load())}


#: A Jupyter widget's output (a live progress bar): nothing a static page can show.
WIDGET = "application/vnd.jupyter.widget-view+json"


def with_verdicts(executed: bytes, key: str, doc: dict) -> bytes:
    """An executed chapter notebook with its verdict cells (`VERDICT_CELLS`) and the verdict
    words its prose glues (its page's `verdict_glue(doc)`, where it has one) rendered from
    `doc`, the chapter's results as `results.read` gives them now."""
    from IPython.core.formatters import DisplayFormatter

    nb = json.loads(executed)
    page = importlib.import_module(profiles.chapter(key).module + ".page")
    glued = page.verdict_glue(doc) if hasattr(page, "verdict_glue") else {}
    fmt = DisplayFormatter()
    nb.get("metadata", {}).pop("widgets", None)  # the widgets' saved state, embedded otherwise
    for cell in (c for c in nb["cells"] if c["cell_type"] == "code"):
        src = "".join(cell["source"])
        # a progress bar drawn as a widget (tqdm.auto where ipywidgets is installed) has no
        # static rendering but its text, "…it/s]": off the page, as stderr's bars are
        cell["outputs"] = [o for o in cell.get("outputs", [])
                           if WIDGET not in o.get("data", {})]
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name in glued:
                o["data"] = {k: glued[name] if k.endswith("text/markdown") else v
                             for k, v in o["data"].items()}
            elif o["output_type"] == "execute_result":
                for pattern, show in VERDICT_CELLS.items():
                    if src.rstrip().endswith(pattern):
                        o["data"] = fmt.format(show(doc, key))[0]
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()


def stage(p: Plan, edition: str = "solutions") -> tuple[Path, list[str]]:
    """Stage the book's sources in `<build>/<profile>/site/` (the student edition in
    `site-student/`): the pages of `book/`, the executed chapters under `notebooks/` and their
    exercises under `notebooks/exercises/` (the student edition's under `notebooks/student/`),
    the generated ledger page and its figure, the timings and the course plan. Returns the folder and the staged files that changed since
    the last staging."""
    _check_edition(edition)
    profile, build_dir, results_dir = p.profile, p.build_dir, p.results_dir
    build = Path(build_dir or paths.build_dir()) / profile
    site = build / ("site" if edition == "solutions" else f"site-{edition}")
    files: dict[str, bytes] = {}
    src = paths.repo_root() / "book"
    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src).as_posix()
        if f.is_file() and not rel.startswith(("_build/", ".ipynb_checkpoints")):
            files[rel] = f.read_bytes()
    # the repository and launch buttons, only where the repository's URL is set
    files["_config.yml"] = launch.config_text(files["_config.yml"].decode(),
                                              launch.repository_url()).encode()
    import matplotlib

    matplotlib.use("Agg")  # before pyplot loads (through `plots`): the ledger figure is a file
    from nlbudget import plots  # cost: matplotlib's pyplot, for the ledger figure

    plots.use_style()  # the verdict tables as the chapters' kernels render them
    for step in p.chapters:
        if not step.executed.is_file():
            raise FileNotFoundError(f"chapter {step.stem} has not been executed at profile "
                                    f"{profile!r} ({step.executed}); run `nlbudget book`")
        files[f"notebooks/{step.executed.name}"] = with_verdicts(
            step.executed.read_bytes(), step.key,
            results.read(step.stem, profile, results_dir))
    # the student book serves each exercise page from the committed student copy's path, so
    # that its launch buttons (made from the page's path) open the notebook without solutions
    folder = "exercises" if edition == "solutions" else exercises.student_folder().name
    for step in p.exercises:
        files[f"notebooks/{folder}/{step.executed.name}"] = _exercise_page(step, edition)
    files["_toc.yml"] = files["_toc.yml"].replace(b"notebooks/exercises/",
                                                  f"notebooks/{folder}/".encode())
    if edition == "student":
        _student_pages(files, p)
    rows = results.ledger(profile, results_dir)
    fig = plots.ledger_overview(rows, part_titles())
    buf = io.BytesIO()
    # no timestamp in the PNG, so an unchanged ledger stages an unchanged file
    fig.savefig(buf, format="png", metadata={"Software": None})
    files["ledger_overview.png"] = buf.getvalue()
    files["ledger.md"] = ledger_markdown(profile, results_dir, "ledger_overview.png").encode()
    for fmt in ("csv", "json"):  # the ledger's rows, for a referee's own tools
        files[f"ledger.{fmt}"] = ledger_export(profile, fmt, results_dir).encode()
    files["timings.md"] = timings_markdown(profile, results_dir, build_dir).encode()
    files["course_plan.md"] = course_plan_markdown(profile, results_dir).encode()
    site.mkdir(parents=True, exist_ok=True)
    return site, _sync(files, site)


def build(profile: str = "ci", run: bool = True, build_dir: Path | None = None,
          results_dir: Path | None = None, seed: int = 0, force: bool = False,
          log=plan.say, edition: str = "solutions") -> Path:
    """The book, in one direction: plan (what is stale, in what order) → run it (none with
    `run=False`, every chapter with `force`) → stage the sources → render the HTML with warnings
    as errors, incrementally (Sphinx rereads only the pages whose staged source changed, and
    nothing at all when no page changed). `edition`: see EDITIONS. Returns the path of
    `index.html`."""
    _check_edition(edition)  # before any chapter runs
    p = plan.make(profile, seed, results_dir, build_dir, force)
    for prof in COMMITTED:  # named, never rewritten: the committed folder is `nlbudget judge`'s
        old = [k for k in profiles.CHAPTERS if verdicts_staleness(k, prof) not in (None, "fresh")]
        if old:
            log(f"[nlbudget] the committed {prof} verdicts of chapter(s) {', '.join(old)} were "
                f"judged by other claims code than today's: the ledger marks them stale; "
                f"`nlbudget judge --profile {prof}` re-judges them")
    took = runner.run_plan(p, log) if run else {}
    site, changed = stage(p, edition)
    return render(p, site, changed, took, log, record=edition == "solutions")


def render(p: Plan, site: Path, changed: list[str], took: dict, log=plan.say,
           record: bool = True) -> Path:
    """`jupyter-book build` of the staged `site` (kept as it is when no page changed); with
    `record`, the build's times go to `build-times.json`."""
    index = site / "_build" / "html" / "index.html"
    took = {k: v for k, v in took.items() if k.endswith("_s")} | {
        f"{kind}_ran": sorted(k for k, v in took.get(kind, {}).items() if v == "ran")
        for kind in ("chapters", "exercises") if kind in took}
    if not changed and index.is_file() and not p.force:
        log("[nlbudget] book: no page changed, HTML kept")
        if record:
            _record_build(p.profile, p.build_dir, took)
        return index
    t = time.perf_counter()
    log(f"[nlbudget] book: building HTML ({len(changed) if changed else 'all'} "
        f"changed source file(s))")
    if p.force:
        shutil.rmtree(site / "_build", ignore_errors=True)
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(site), "--builder", "html",
           "-W", "-n", "--keep-going", "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        shutil.rmtree(site / "_build", ignore_errors=True)  # the next build starts clean
        raise RuntimeError(f"jupyter-book build failed (exit {r.returncode}):\n"
                           f"{r.stdout[-6000:]}\n{r.stderr[-6000:]}")
    took["html_s"] = time.perf_counter() - t
    log(f"[nlbudget] book: HTML built in {took['html_s']:.0f} s")
    if record:
        _record_build(p.profile, p.build_dir, took)
    return index


def _record_build(profile: str, build_dir, took: dict) -> None:
    """`<build>/<profile>/build-times.json`: how long this build's phases took (chapters,
    exercises, HTML), what ran, and on which CPU; `benchmarks/cpu.py` scales it to another CPU."""
    doc = {**{k: round(v, 1) if isinstance(v, float) else v for k, v in took.items()},
           "cpu": machine.cpu(), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    path = Path(build_dir or paths.build_dir()) / profile / "build-times.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    paths.atomic_write_text(path, json.dumps(doc, indent=1))
