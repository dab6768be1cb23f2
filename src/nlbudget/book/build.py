"""Stage and build the Jupyter Book (1.x) from executed chapters and results files.

The staging folder `<build>/<profile>/site/` mirrors the repository: the pages of `book/`,
the executed notebooks under `notebooks/` (so launch buttons point at the real sources),
and `ledger.md`, generated from the results files.
"""

from __future__ import annotations

import inspect
import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from nlbudget import paths
from nlbudget.assets import machine
from nlbudget.book import exercises, launch, plan, profiles, runner
from nlbudget.book.plan import Plan
from nlbudget.verdicts import results

def _toc() -> str:
    return (paths.repo_root() / "book" / "_toc.yml").read_text(encoding="utf-8")


def part_titles() -> dict[str, str]:
    """{"I": "Part I — …", …}: the parts' captions in `book/_toc.yml`, the one place they are
    written (read line by line: `caption: Part N — …`)."""
    return {m.group(2): m.group(1).strip()
            for m in re.finditer(r"^\s*-?\s*caption:\s*(Part ([IVX]+) —.*)$", _toc(), re.M)}


def chapter_parts() -> dict[str, str]:
    """{chapter stem: its part ("I" … "IV")}, from where `book/_toc.yml` lists it."""
    out, part = {}, None
    for line in _toc().splitlines():
        if m := re.match(r"^\s*-?\s*caption:\s*(?:Part ([IVX]+) —)?", line):
            part = m.group(1)
        elif (m := re.match(r"^\s*-\s*file:\s*notebooks/(\d\d_\w+)\s*$", line)) and part:
            out[m.group(1)] = part
    return out


#: The scales whose results are committed (made once, on a CPU or a GPU, not by every build).
COMMITTED = plan.COMMITTED


def committed_dir(profile: str) -> Path:
    """Where a committed scale's results live: `data/results/<profile>/` of the checkout (or of
    the wheel's copy), whatever results folder this build writes to."""
    return paths.shipped() / "data" / "results" / profile


def staleness(key: str, profile: str) -> str:
    """'' when a committed result of chapter `key` was made from the inputs the chapter has now
    (its committed record, `<stem>.fresh.json`, against `plan.inputs`; what only the page
    reads is left out — the notebook's prose, and package versions: another machine's patch
    release does not make a result stale); else which inputs changed since."""
    stem = profiles.chapter(key).stem
    try:
        rec = json.loads((committed_dir(profile) / f"{stem}.fresh.json").read_text())
    except (OSError, ValueError):
        return "no record of its inputs"
    seed = rec.get("inputs", {}).get("settings", {}).get("seed", 0)
    now = plan.inputs(key, profile, seed, committed_dir(profile).parent)
    changed = [k for k in now if k not in plan.PAGE_ONLY and now[k] != rec.get("inputs", {}).get(k)]
    return ", ".join(changed)


def committed_rows(profile: str) -> dict[str, dict]:
    """{claim id: its row at a committed scale}: verdict and measurement, with the result's
    date and commit and whether it is stale."""
    out = {}
    for key in profiles.CHAPTERS:
        stem = profiles.chapter(key).stem
        f = committed_dir(profile) / f"{stem}.json"
        if not f.is_file():
            continue
        doc = json.loads(f.read_text(encoding="utf-8"))
        git = doc.get("environment", {}).get("git") or {}
        made = (f"{str(doc.get('created', ''))[:10]}, commit {str(git.get('commit', '?'))[:7]}"
                + (" with local changes" if git.get("dirty") else ""))
        stale = staleness(key, profile)
        for c in doc.get("claims", []):
            out[c["id"]] = {**c, "made": made, "stale": stale}
    return out


def with_committed(rows: list[dict]) -> list[dict]:
    """The ledger rows with each committed scale's verdict beside this build's."""
    scales = {prof: committed_rows(prof) for prof in COMMITTED}
    for r in rows:
        for prof, got in scales.items():
            c = got.get(r["id"])
            r[f"verdict_{prof}"] = c["verdict"] if c else ""
            r[f"{prof}_row"] = c
    return rows


def rules() -> dict[str, str]:
    """{claim id: its rule in prose}: the claim function's docstring (threshold, control,
    interval, multiplicity), the paper's quoted sentence dropped, for the decision table."""
    out = {}
    for key in profiles.CHAPTERS:
        for fn in profiles.chapter(key).load().CLAIMS:
            ids = re.findall(r'"((?:P\d|BOOK\.P\d)\.[\w-]+)"', inspect.getsource(fn))
            doc = " ".join((fn.__doc__ or "").split())
            doc = re.sub(r'^(P\d[^:]*|The book\'s question): "[^"]*"[.,;]?\s*(—\s*)?', "", doc)
            for i in ids[:1]:
                out[i] = doc
    return out


def decision_table(rows: list[dict], profile: str) -> list[str]:
    """The ledger's decision table: per row, the rule next to each scale's verdict."""
    rule = rules()
    head = f"| claim | the rule | `{profile}` | " + " | ".join(f"`{p}`" for p in COMMITTED) + " |"
    lines = [head, "|---|---|---|" + "---|" * len(COMMITTED)]
    for r in rows:
        at = " | ".join((r.get(f"verdict_{p}") or "—")
                        + (" (stale)" if r.get(f"{p}_row") and r[f"{p}_row"]["stale"] else "")
                        for p in COMMITTED)
        text = rule.get(r["id"], "")
        if len(text) < 40:  # a derivation's docstring is its statement: the rule is shared
            text = ("proved in sympy and checked numerically in float64; the negative controls "
                    "must fail" if r["kind"] == "derivation" else "")
        text = "; ".join(t for t in (text, f"control: {r['control']}" if r["control"] else "")
                         if t)
        lines.append(f"| {r['id']} | {_inline(text)} | {r['verdict']} | {at} |")
    return lines


KIND_TITLES = {"paper": "claims of the papers", "derivation": "derivations (steps of a "
               "paper's argument, checked by proof)", "book": "the book's own questions"}


def counts_markdown(rows: list[dict]) -> str:
    """Claims counted by kind (rows) and verdict (columns)."""
    c = results.counts(rows)
    head = "| kind | " + " | ".join(results.VERDICTS) + " | total |"
    lines = [head, "|---" * (len(results.VERDICTS) + 2) + "|"]
    for k, row in c.items():
        label = "**all**" if k == "all" else KIND_TITLES[k]
        lines.append(f"| {label} | " + " | ".join(str(row[v]) for v in results.VERDICTS)
                     + f" | {sum(row.values())} |")
    return "\n".join(lines)


def _inline(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _details(r: dict) -> list[str]:
    """The folded part of a ledger row: everything behind the verdict."""
    out = []
    for label, key in (("measured", "measured"), ("control", "control"), ("why", "reason"),
                       ("would decide it", "needs"), ("the author's own data", "author_data"),
                       ("note", "note")):
        if r.get(key):
            out.append(f"**{label}:** {_inline(r[key])}")
    if r.get("parts"):
        out.append("**parts:** " + "; ".join(f"{p}: {v}" for p, v in r["parts"].items()))
    if r.get("obtained"):
        out.append(f"**obtained:** {r['obtained']} "
                   + {"replicated": "(the book's own, independent code)",
                      "reproduced": "(the author's own code or data)",
                      "derived": "(a proof)"}.get(r["obtained"], ""))
    for prof in COMMITTED:
        c = r.get(f"{prof}_row")
        if c:
            stale = f"; **stale** (changed since: {c['stale']})" if c["stale"] else ""
            out.append(f"**at `{prof}`** ({c['made']}{stale}): {_inline(c['measured'])} — "
                       f"**{c['verdict']}**: {_inline(c['reason'])}"
                       + (f"; would decide it: {_inline(c['needs'])}" if c.get("needs") else ""))
    if r.get("measured_paper_profile"):
        out.append(f"**at the paper profile:** {_inline(r['measured_paper_profile'])} "
                   f"(**{r['verdict_paper_profile']}**)")
    return out


def counts_section(rows: list[dict], profile: str) -> list[str]:
    """The ledger page's counts: this build's, then each committed scale's (and which of its
    chapters are stale)."""
    lines = ["## Counts", "", f"This build (`{profile}`):", "", counts_markdown(rows), ""]
    for prof in COMMITTED:
        at = [{**r, "verdict": r[f"verdict_{prof}"] or "not run"} for r in rows]
        stale = sorted({r[f"{prof}_row"]["stale"] and r["chapter"] for r in rows
                        if r.get(f"{prof}_row")} - {"", False})
        lines += [f"At `{prof}` (committed results, made once on a CPU; "
                  + (f"stale for chapter(s) {', '.join(stale)}: their inputs changed since)"
                     if stale else "none stale)") + ":", "", counts_markdown(at), ""]
    return lines


def ledger_markdown(profile: str, results_dir: Path | None = None,
                    figure: str | None = None) -> str:
    """The claims ledger page: a picture, counts per kind and verdict, then one table per
    part; every row links to the section that measured it, states both scales, and folds
    the long text. Generated from the results files only."""
    rows = with_committed(results.ledger(profile, results_dir))
    lines = [
        "# Claims ledger", "",
        f"Every claim of the four papers, what this build measured (profile `{profile}`), and a "
        "verdict. This page is generated from the chapters' results files "
        f"(`data/results/{profile}/*.json`); a claim whose chapter has not run is `not run`. "
        "Every verdict comes from a claim function of the chapter's module "
        "(`nlbudget.chapters`), compares with the control the claim names, and rests on an "
        "interval over seeds or evaluation windows:", "",
        "* **reproduced** — the effect is there, in the claimed direction, beyond the "
        "uncertainty; **not reproduced** — the uncertainty excludes it, or it goes the other "
        "way; **inconclusive** — the uncertainty holds both (the row says what would decide "
        "it); **not run** — not measured at this profile (the row says why); **partly** — a "
        "claim of several stated parts, some of which hold.",
        "* *obtained*: **replicated** with the book's own code, **reproduced** with the "
        "author's code or data, or **derived** by proof.", "",
    ]
    if figure:
        lines += [f"```{{figure}} {figure}", ":name: ledger-overview", "",
                  "Claims by part and kind, coloured by verdict.", "```", ""]
    lines += counts_section(rows, profile)
    lines += ["## Decision table", "", "Each row's rule as its claim function states it (the "
              "threshold, the control, the interval and its multiplicity), beside the verdict "
              "at each scale; the function's source is folded under its chapter's claims.", "",
              *decision_table(rows, profile), ""]
    for part, title in part_titles().items():
        part_rows = [r for r in rows if r["part"] == part]
        if not part_rows:
            continue
        lines += [f"## {title}", "", ":::{list-table}", ":header-rows: 1",
                  ":widths: 22 10 28 24 16", "",
                  "* - claim", "  - kind", "  - the paper says (its scale)",
                  f"  - this build's scale (`{profile}`)", "  - verdict"]
        for r in part_rows:
            link = f"{{ref}}`{r['id']} <{r['section']}>`" if r.get("section") else r["id"]
            scale = _inline(r["scale"]) or "—"
            lines += [f"* - {link}: {_inline(r['claim'])}", f"  - {r['kind']}",
                      f"  - {_inline(r['paper'])} *({_inline(r['paper_scale'])})*",
                      f"  - {scale}",
                      f"  - `{profile}`: **{r['verdict']}**" + "".join(
                          f"; `{prof}`: **{r[f'verdict_{prof}']}**"
                          + (" (stale)" if r[f"{prof}_row"]["stale"] else "")
                          for prof in COMMITTED if r.get(f"verdict_{prof}")), "",
                      "    ```{dropdown} details", ""]
            for i, d in enumerate(_details(r)):
                lines += ([""] if i else []) + [f"    {d}"]
            lines += ["    ```", ""]
        lines += [":::", ""]
    return "\n".join(lines)


def ledger_text(profile: str, results_dir: Path | None = None) -> str:
    """`nlbudget ledger`: counts per kind and verdict at this profile and at each committed
    scale, then one line per claim with both verdicts."""
    rows = with_committed(results.ledger(profile, results_dir))
    width = max(len(v) for v in results.VERDICTS)
    out = [f"claims ledger, profile {profile!r}"]
    for prof in (profile, *[p for p in COMMITTED if p != profile]):
        at = rows if prof == profile else [
            {**r, "verdict": r[f"verdict_{prof}"] or "not run"} for r in rows]
        out += ["", f"at {prof}" + ("" if prof == profile else " (committed)"),
                f"{'kind':<12}" + "".join(f"{v:>{width + 2}}" for v in results.VERDICTS)
                + "   total"]
        for k, row in results.counts(at).items():
            out.append(f"{k:<12}" + "".join(f"{row[v]:>{width + 2}}" for v in results.VERDICTS)
                       + f"{sum(row.values()):>8}")
    extra = [p for p in COMMITTED if p != profile]
    out += ["", f"{'claim':<38} {'kind':<11} {profile:<16}" + "".join(f"{p:<16}" for p in extra)]
    def at(r, p):
        stale = " (stale)" if r.get(f"{p}_row") and r[f"{p}_row"]["stale"] else ""
        return f"{(r[f'verdict_{p}'] or '—') + stale:<16}"

    for r in rows:
        out.append(f"{r['id']:<38} {r['kind']:<11} {r['verdict']:<16}"
                   + "".join(at(r, p) for p in extra))
    return "\n".join(out)


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


#: The course page's six meetings, in reading order: (chapter key, what the meeting is about).
MEETINGS = (("01", "what a gated MLP computes, and the symmetries its gate breaks"),
            ("02", "whether breaking the symmetry matters, at one parameter budget"),
            ("03", "how much of each MLP is linear: ridge surrogates and their cost"),
            ("04", "which tokens can skip the MLP: gates, labels, routing, savings"),
            ("05", "programming a frozen transformer through its embedding"),
            ("06", "a nonlinearity before Q/K/V, against LoRA at the same budget; the ledger"))


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
    for step in p.chapters:
        if not step.executed.is_file():
            raise FileNotFoundError(f"chapter {step.stem} has not been executed at profile "
                                    f"{profile!r} ({step.executed}); run `nlbudget book`")
        files[f"notebooks/{step.executed.name}"] = step.executed.read_bytes()
    # the student book serves each exercise page from the committed student copy's path, so
    # that its launch buttons (made from the page's path) open the notebook without solutions
    folder = "exercises" if edition == "solutions" else exercises.student_folder().name
    for step in p.exercises:
        files[f"notebooks/{folder}/{step.executed.name}"] = _exercise_page(step, edition)
    files["_toc.yml"] = files["_toc.yml"].replace(b"notebooks/exercises/",
                                                  f"notebooks/{folder}/".encode())
    import matplotlib

    matplotlib.use("Agg")  # before pyplot loads (through `plots`): the ledger figure is a file
    from nlbudget.book import plots  # cost: matplotlib's pyplot, only for this figure

    plots.use_style()
    rows = results.ledger(profile, results_dir)
    fig = plots.ledger_overview(rows, part_titles())
    buf = io.BytesIO()
    # no timestamp in the PNG, so an unchanged ledger stages an unchanged file
    fig.savefig(buf, format="png", metadata={"Software": None})
    files["ledger_overview.png"] = buf.getvalue()
    files["ledger.md"] = ledger_markdown(profile, results_dir, "ledger_overview.png").encode()
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
    results.atomic_write_text(path, json.dumps(doc, indent=1))
