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


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def ledger_markdown(profile: str, results_dir: Path | None = None) -> str:
    """The claims ledger page: one table per part, from the results files only."""
    rows = results.ledger(profile, results_dir)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in results.VERDICTS}
    has_paper = any(r["measured_paper_profile"] for r in rows)
    lines = [
        "# Claims ledger", "",
        f"Every claim of the four papers, what this build measured (profile `{profile}`), and a "
        "verdict. This page is generated from the chapters' results files "
        f"(`data/results/{profile}/*.json`); a claim whose chapter has not run is `not run`.",
        "", "**Verdicts:** " + ", ".join(f"{v}: {n}" for v, n in counts.items()), "",
    ]
    head = ["claim", "paper says", f"measured ({profile})", "verdict"]
    if has_paper:
        head += ["measured (paper profile)", "verdict (paper)"]
    for part, title in PART_TITLES.items():
        part_rows = [r for r in rows if r["part"] == part]
        if not part_rows:
            continue
        lines += [f"## {title}", "", "| " + " | ".join(["id", *head]) + " |",
                  "|" + "---|" * (len(head) + 1)]
        for r in part_rows:
            measured = r["measured"] + (f" ({r['note']})" if r["note"] else "")
            cells = [r["id"], r["claim"], r["paper"], measured or "—", f"**{r['verdict']}**"]
            if has_paper:
                cells += [r["measured_paper_profile"] or "—", r["verdict_paper_profile"] or "—"]
            lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


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
    (site / "ledger.md").write_text(ledger_markdown(profile, results_dir), encoding="utf-8")
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
