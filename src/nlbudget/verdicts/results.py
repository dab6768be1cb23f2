"""Results files and the claims ledger.

Each chapter writes, once, at its end, atomically, two files under `<results_dir>/<profile>/`:
`<stem>.json`, what it measured (its parameters, seed, package versions, git commit, its
`figures`), and apart from it `<stem>.verdicts.json`, what its claims module judged of those
figures (`claims`). A changed rule rewrites only the second (`judge`): the measured figures
stay byte-identical, and nothing that reads them (another chapter, a page) goes stale. The
book's tables, plots and the ledger read only these files; `read` gives both as one document.
"""

from __future__ import annotations

import csv
import json
import math
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from nlbudget import paths, timing
from nlbudget.assets import devices, machine
from nlbudget.paths import atomic_write_text
from nlbudget.verdicts.claims import KINDS, VERDICTS, Claim  # noqa: F401  (the ledger's vocabulary)

PACKAGES = ("nlbudget", "torch", "transformers", "numpy", "scipy", "sympy", "pandas",
            "papermill", "matplotlib", "gguf", "datasets", "peft")


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


def package_versions() -> dict:
    """The installed version of each of PACKAGES (None where absent)."""
    versions = {}
    for p in PACKAGES:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    return versions


def environment() -> dict:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpu": machine.cpu(), "packages": package_versions(), "git": git_commit(),
            "models_on": devices.placements()}


def results_path(stem: str, profile: str, results_dir: str | Path | None = None) -> Path:
    return Path(results_dir or paths.results_dir()) / profile / f"{stem}.json"


def verdicts_path(stem: str, profile: str, results_dir: str | Path | None = None) -> Path:
    """Where chapter `stem`'s verdicts at `profile` live, beside its figures."""
    return results_path(stem, profile, results_dir).with_suffix(".verdicts.json")


def is_figures_file(path: Path) -> bool:
    """A chapter's figures file (`<stem>.json`), not its verdicts or its record beside it."""
    return path.suffix == ".json" and not path.name.endswith((".fresh.json", ".verdicts.json"))


def write_chapter(settings: dict, figures: dict, claims: list[Claim],
                  results_dir: str | Path | None = None) -> Path:
    """Write a chapter's figures file, then its verdicts file (each atomic). `settings`
    comes from `profiles.validate`. Returns the figures file's path."""
    stem, profile = settings["chapter"], settings["profile"]
    doc = {
        "chapter": stem,
        "profile": profile,
        "seed": settings["seed"],
        "parameters": settings,
        "figures": round_floats(figures),
        "environment": environment(),
        "timings": timing.timings(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    text = json.dumps(doc, indent=2, sort_keys=False, allow_nan=False) + "\n"
    path = atomic_write_text(results_path(stem, profile, results_dir), text)
    write_verdicts(stem, profile, claims, results_dir)
    return path


def write_verdicts(stem: str, profile: str, claims: list[Claim],
                   results_dir: str | Path | None = None) -> Path:
    """Write a chapter's verdicts file (atomic): its claims as judged now, with when and at
    which commit."""
    doc = {"chapter": stem, "profile": profile, "claims": [c.as_dict() for c in claims],
           "judged": {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "git": git_commit()}}
    text = json.dumps(doc, indent=2, sort_keys=False, allow_nan=False) + "\n"
    return atomic_write_text(verdicts_path(stem, profile, results_dir), text)


def as_stored(figures: dict) -> dict:
    """The figures as the results file will hold them (rounded, JSON types), so that claims
    computed from them are the claims any reader recomputes from the file."""
    return json.loads(json.dumps(round_floats(figures), allow_nan=False))


def finish(module, settings: dict, figures: dict, results_dir: str | Path | None = None) -> dict:
    """A chapter's last step: its claims from its (stored) figures by its chapter module's
    `claims(F, S)`, then its figures and verdicts files, written atomically. Returns the
    written document (`read`)."""
    F = as_stored(figures)
    claims = module.claims(F, settings)
    write_chapter(settings, F, claims, results_dir)
    return read(settings["chapter"], settings["profile"], results_dir)


def judge(module, stem: str, profile: str, results_dir: str | Path | None = None) -> dict:
    """Re-judge a chapter from its stored figures: `module.claims(F, S)` on the figures and
    settings of its figures file, written to its verdicts file; the figures file is not
    touched, and a verdicts file whose rows come out the same is left as it is. Returns
    {"changed": {claim id: (old verdict, new verdict)}, "claims": n}."""
    doc = _read_json(results_path(stem, profile, results_dir), stem, profile)
    claims = module.claims(doc["figures"], doc["parameters"])
    stored = _read_verdicts(stem, profile, results_dir)
    old = {c["id"]: c for c in stored}
    if not verdicts_path(stem, profile, results_dir).is_file() \
            or stored != [c.as_dict() for c in claims]:  # unchanged verdicts keep their file
        write_verdicts(stem, profile, claims, results_dir)
    changed = {c.id: (old.get(c.id, {}).get("verdict"), c.verdict) for c in claims
               if old.get(c.id) != c.as_dict()}
    return {"changed": changed, "claims": len(claims)}


def _read_json(path: Path, stem: str, profile: str) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"no results for {stem} at profile {profile!r} ({path}); "
                                f"run `nlbudget run {stem[:2]} --profile {profile}` first")
    return json.loads(path.read_text(encoding="utf-8"))


def _read_verdicts(stem: str, profile: str, results_dir=None) -> list[dict]:
    p = verdicts_path(stem, profile, results_dir)
    return json.loads(p.read_text(encoding="utf-8"))["claims"] if p.is_file() else []


def read(stem: str, profile: str, results_dir: str | Path | None = None) -> dict:
    """A chapter's results at `profile`: its figures file, with `claims` from its verdicts
    file (a results file written before verdicts were kept apart holds its own `claims`;
    none: empty)."""
    doc = _read_json(results_path(stem, profile, results_dir), stem, profile)
    if verdicts_path(stem, profile, results_dir).is_file():
        return {**doc, "claims": _read_verdicts(stem, profile, results_dir)}
    return {**doc, "claims": doc.get("claims", [])}


def read_dir(folder: Path) -> list[dict]:
    """Every chapter's results (`read`) in one profile's folder, in file order."""
    return [read(f.stem, folder.name, folder.parent) for f in sorted(folder.glob("*.json"))
            if is_figures_file(f)] if folder.is_dir() else []


# ---------------------------------------------------------------- claims ledger

def claims_registry(path: Path | None = None) -> list[dict]:
    """Every claim of the four papers (data/claims.csv): id, part, chapter, claim, paper."""
    path = path or paths.shipped() / "data" / "claims.csv"
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    ids = [r["id"] for r in rows]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate claim ids in {path}: {sorted(dup)}")
    return rows


LEDGER_FIELDS = ("measured", "verdict", "control", "reason", "needs", "parts", "author_data",
                 "scale", "obtained", "note")


def ledger(profile: str, results_dir: str | Path | None = None,
           registry: Path | None = None) -> list[dict]:
    """One row per registered claim: the paper's text and scale (data/claims.csv), the book's
    measurement at `profile` (and at `paper`, where committed) with its verdict, control and
    scale; `not run` where no results file has the claim."""
    rows = claims_registry(registry)
    known = {r["id"] for r in rows}
    measured: dict[str, dict[str, dict]] = {}
    for prof in dict.fromkeys([profile, "paper"]):
        for doc in read_dir(Path(results_dir or paths.results_dir()) / prof):
            for c in doc["claims"]:
                if c["id"] not in known:
                    raise ValueError(f"{doc['chapter']}.verdicts.json: claim id {c['id']!r} "
                                     "is not in data/claims.csv")
                measured.setdefault(prof, {})[c["id"]] = {**c, "source": doc["chapter"]}
    out = []
    for r in rows:
        here = measured.get(profile, {}).get(r["id"])
        paper = measured.get("paper", {}).get(r["id"]) if profile != "paper" else None
        row = {k: r[k] for k in ("id", "part", "chapter", "kind", "section", "claim", "paper",
                                 "paper_scale")}
        row.update({k: (here or {}).get(k, "") for k in LEDGER_FIELDS})
        if not here:
            row.update(verdict="not run", needs=f"chapter {r['chapter']} has not run at "
                       f"profile {profile!r}", parts={})
        row["measured_paper_profile"] = paper["measured"] if paper else ""
        row["verdict_paper_profile"] = paper["verdict"] if paper else ""
        out.append(row)
    return out


def counts(rows: list[dict]) -> dict[str, dict[str, int]]:
    """Ledger rows counted by kind and verdict: {kind: {verdict: n}}, kinds and verdicts in
    the vocabulary's order, plus an `all` row."""
    out = {k: {v: 0 for v in VERDICTS} for k in (*KINDS, "all")}
    for r in rows:
        out[r["kind"]][r["verdict"]] += 1
        out["all"][r["verdict"]] += 1
    return out


# ---------------------------------------------------------------- comparing two builds

def _leaves(obj, prefix=""):
    """Every number and string of a figures tree, by its path (`a.b.3.c`)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, f"{prefix}.{i}")
    else:
        yield prefix, obj


#: Figures that are measured seconds (a forward pass's, a decoded token's): timings, which
#: `compare` leaves out with the results files' own `timings`.
TIMED = ("wallclock", "decode")


def compare(a: str | Path, b: str | Path, profile: str, rtol: float = 0.0) -> dict:
    """Two results folders' `profile` results, chapter by chapter: the claims whose verdict
    differs, and the figures that differ by more than `rtol` (relative; 0: any difference),
    leaving out timings (`TIMED`) and the environment. {stem: {"verdicts": {id: (a, b)},
    "figures": {path: (a, b)}, "missing": side}}."""
    out = {}
    stems = sorted({p.stem for d in (a, b) for p in (Path(d) / profile).glob("*.json")
                    if is_figures_file(p)})
    for stem in stems:
        docs = [read(stem, profile, d) if results_path(stem, profile, d).is_file() else None
                for d in (a, b)]
        if None in docs:
            out[stem] = {"missing": "first" if docs[0] is None else "second"}
            continue
        va = {c["id"]: c["verdict"] for c in docs[0]["claims"]}
        vb = {c["id"]: c["verdict"] for c in docs[1]["claims"]}
        verdicts = {i: (va.get(i), vb.get(i)) for i in sorted(set(va) | set(vb))
                    if va.get(i) != vb.get(i)}
        fa, fb = ({k: v for k, v in _leaves(d["figures"]) if not set(k.split(".")) & set(TIMED)}
                  for d in docs)
        figures = {}
        for k in sorted(set(fa) | set(fb)):
            x, y = fa.get(k), fb.get(k)
            if isinstance(x, (int, float)) and isinstance(y, (int, float)) \
                    and not isinstance(x, bool) and not isinstance(y, bool):
                if abs(x - y) > rtol * max(abs(x), abs(y)) and x != y:
                    figures[k] = (x, y)
            elif x != y:
                figures[k] = (x, y)
        out[stem] = {"verdicts": verdicts, "figures": figures}
    return out
