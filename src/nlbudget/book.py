"""Stage and build the Jupyter Book (1.x) from executed chapters and results files.

The staging folder `<build>/<profile>/site/` mirrors the repository: the pages of `book/`,
the executed notebooks under `notebooks/` (so launch buttons point at the real sources),
and `ledger.md`, generated from the results files.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from . import paths, profiles, results, runner

PART_TITLES = {
    "I": "Part I — Gated MLPs as symmetry-broken bilinear attention",
    "II": "Part II — Linear surrogates and adaptive gating",
    "III": "Part III — Fixed universal transformers",
    "IV": "Part IV — Position-agnostic pre-projection",
}


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
    if r.get("measured_paper_profile"):
        out.append(f"**at the paper profile:** {_inline(r['measured_paper_profile'])} "
                   f"(**{r['verdict_paper_profile']}**)")
    return out


def ledger_markdown(profile: str, results_dir: Path | None = None,
                    figure: str | None = None) -> str:
    """The claims ledger page: a picture, counts per kind and verdict, then one table per
    part; every row links to the section that measured it, states both scales, and folds
    the long text. Generated from the results files only."""
    rows = results.ledger(profile, results_dir)
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
    lines += ["## Counts", "", counts_markdown(rows), ""]
    for part, title in PART_TITLES.items():
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
                      f"  - **{r['verdict']}**", "",
                      "    ```{dropdown} details", ""]
            for i, d in enumerate(_details(r)):
                lines += ([""] if i else []) + [f"    {d}"]
            lines += ["    ```", ""]
        lines += [":::", ""]
    return "\n".join(lines)


def ledger_text(profile: str, results_dir: Path | None = None) -> str:
    """`nlbudget ledger`: counts per kind and verdict, then one line per claim."""
    rows = results.ledger(profile, results_dir)
    c = results.counts(rows)
    width = max(len(v) for v in results.VERDICTS)
    out = [f"claims ledger, profile {profile!r}", "",
           f"{'kind':<12}" + "".join(f"{v:>{width + 2}}" for v in results.VERDICTS) + "   total"]
    for k, row in c.items():
        out.append(f"{k:<12}" + "".join(f"{row[v]:>{width + 2}}" for v in results.VERDICTS)
                   + f"{sum(row.values()):>8}")
    out += ["", f"{'claim':<38} {'kind':<11} verdict"]
    out += [f"{r['id']:<38} {r['kind']:<11} {r['verdict']}" for r in rows]
    return "\n".join(out)


def stage(profile: str, build_dir: Path | None = None, results_dir: Path | None = None) -> Path:
    build = Path(build_dir or paths.build_dir()) / profile
    site = build / "site"
    if site.exists():
        shutil.rmtree(site)
    shutil.copytree(paths.repo_root() / "book", site,
                    ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    (site / "notebooks").mkdir()
    for key in runner.available_chapters():
        stem = profiles.chapter(key).stem
        executed = build / "chapters" / f"{stem}.ipynb"
        if not executed.is_file():
            raise FileNotFoundError(f"chapter {stem} has not been executed at profile {profile!r} "
                                    f"({executed}); run `nlbudget run {key} --profile {profile}`")
        shutil.copy2(executed, site / "notebooks" / executed.name)
    import matplotlib

    matplotlib.use("Agg")
    from . import plots

    plots.use_style()
    fig = plots.ledger_overview(results.ledger(profile, results_dir), PART_TITLES)
    fig.savefig(site / "ledger_overview.png")
    (site / "ledger.md").write_text(ledger_markdown(profile, results_dir, "ledger_overview.png"),
                                    encoding="utf-8")
    return site


def build(profile: str = "ci", run: bool = True, build_dir: Path | None = None,
          results_dir: Path | None = None, seed: int = 0) -> Path:
    """Run every chapter (unless `run=False`), stage, and build the HTML book with warnings
    as errors. Returns the path of `index.html`."""
    if run:
        for key in runner.available_chapters():
            print(f"[nlbudget] running chapter {key} at profile {profile}", flush=True)
            runner.run(key, profile=profile, seed=seed, results_dir=results_dir,
                       build_dir=build_dir)
    site = stage(profile, build_dir, results_dir)
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(site), "--builder", "html",
           "-W", "-n", "--keep-going", "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"jupyter-book build failed (exit {r.returncode}):\n"
                           f"{r.stdout[-6000:]}\n{r.stderr[-6000:]}")
    return site / "_build" / "html" / "index.html"
