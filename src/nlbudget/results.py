"""Results files and the claims ledger.

Each chapter writes `<results_dir>/<profile>/<stem>.json` once, at its end, atomically:
its parameters, seed, package versions, git commit, its `figures` and its `claims`.
The book's tables, plots and the ledger read only these files.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from . import paths

VERDICTS = ("reproduced", "partly", "not reproduced", "not run")
PACKAGES = ("nlbudget", "torch", "transformers", "numpy", "sympy", "pandas", "papermill",
            "matplotlib", "gguf", "datasets")


@dataclass(frozen=True)
class Claim:
    """One row of the claims ledger: what the paper says, what the book measured."""

    id: str  # matches a row of data/claims.csv
    paper: str  # the paper's figure or statement
    measured: str  # the book's figure, as text
    verdict: str  # one of VERDICTS
    note: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` so that readers see the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def round_floats(obj, sig: int = 6):
    """Round every float to `sig` significant digits, so reruns compare byte for byte."""
    if isinstance(obj, float):
        if not math.isfinite(obj) or obj == 0.0:
            return obj
        return float(f"{obj:.{sig}g}")
    if isinstance(obj, dict):
        return {k: round_floats(v, sig) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [round_floats(v, sig) for v in obj]
    return obj


def git_commit(root: Path | None = None) -> dict:
    root = root or paths.repo_root()
    def git(*args):
        r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit or "unknown", "dirty": bool(dirty)}


def environment() -> dict:
    versions = {}
    for p in PACKAGES:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    return {"python": platform.python_version(), "platform": platform.platform(),
            "packages": versions, "git": git_commit()}


def results_path(stem: str, profile: str, results_dir: str | Path | None = None) -> Path:
    return Path(results_dir or paths.results_dir()) / profile / f"{stem}.json"


def write_chapter(settings: dict, figures: dict, claims: list[Claim],
                  results_dir: str | Path | None = None) -> Path:
    """Write a chapter's results file (atomic). `settings` comes from `profiles.validate`."""
    stem, profile = settings["chapter"], settings["profile"]
    doc = {
        "chapter": stem,
        "profile": profile,
        "seed": settings["seed"],
        "parameters": settings,
        "figures": round_floats(figures),
        "claims": [asdict(c) for c in claims],
        "environment": environment(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    text = json.dumps(doc, indent=2, sort_keys=False, allow_nan=False) + "\n"
    return atomic_write_text(results_path(stem, profile, results_dir), text)


def read(stem: str, profile: str, results_dir: str | Path | None = None) -> dict:
    p = results_path(stem, profile, results_dir)
    if not p.is_file():
        raise FileNotFoundError(f"no results for {stem} at profile {profile!r} ({p}); "
                                f"run `nlbudget run {stem[:2]} --profile {profile}` first")
    return json.loads(p.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- claims ledger

def claims_registry(path: Path | None = None) -> list[dict]:
    """Every claim of the four papers (data/claims.csv): id, part, chapter, claim, paper."""
    path = path or paths.repo_root() / "data" / "claims.csv"
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    ids = [r["id"] for r in rows]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate claim ids in {path}: {sorted(dup)}")
    return rows


def ledger(profile: str, results_dir: str | Path | None = None,
           registry: Path | None = None) -> list[dict]:
    """One row per registered claim: the paper's figure, the book's at `profile` (and at
    `paper`, where committed), and a verdict; `not run` where no results file has it."""
    rows = claims_registry(registry)
    known = {r["id"] for r in rows}
    measured: dict[str, dict[str, dict]] = {}
    for prof in dict.fromkeys([profile, "paper"]):
        d = Path(results_dir or paths.results_dir()) / prof
        for f in sorted(d.glob("*.json")) if d.is_dir() else []:
            doc = json.loads(f.read_text(encoding="utf-8"))
            for c in doc.get("claims", []):
                if c["id"] not in known:
                    raise ValueError(f"{f}: claim id {c['id']!r} is not in data/claims.csv")
                measured.setdefault(prof, {})[c["id"]] = {**c, "source": f.name}
    out = []
    for r in rows:
        here = measured.get(profile, {}).get(r["id"])
        paper = measured.get("paper", {}).get(r["id"]) if profile != "paper" else None
        out.append({
            "id": r["id"], "part": r["part"], "chapter": r["chapter"], "claim": r["claim"],
            "paper": here["paper"] if here else r["paper"],
            "measured": here["measured"] if here else "",
            "verdict": here["verdict"] if here else "not run",
            "note": here.get("note", "") if here else "",
            "measured_paper_profile": paper["measured"] if paper else "",
            "verdict_paper_profile": paper["verdict"] if paper else "",
        })
    return out
