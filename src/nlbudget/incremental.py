"""Rerun only what changed: which chapters of a build are fresh, in what order to run the
rest, and progress with an estimate of the time left.

A chapter's *inputs* are its notebook, the library (every module of `nlbudget` that a chapter
can import, less the other chapters' modules), the data files it reads (`data/claims.csv`,
`data/reference/`, `data/corpora/`), its settings at the profile (seed included), the Python and package
versions, and the results files of the chapters it reads (its module's `READS`). After a
successful run, `<build>/<profile>/chapters/<stem>.fresh.json` records their digest, the
digest of the results file the run wrote, and how long it took. A chapter is fresh when that
record matches its inputs now, and its executed notebook and results file are still the ones
the run left. The record is voided before a chapter runs, so a failed or killed run never
leaves a chapter marked fresh.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from . import paths, profiles, results, runner
from .assets import sha256

#: Modules no chapter imports (the build and the command line): editing them reruns nothing.
NOT_CHAPTER_INPUTS = ("book.py", "checks.py", "cli.py", "exercises.py", "incremental.py")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str | None:
    """The SHA-256 of a file, or None where there is none."""
    return sha256(path) if path.is_file() else None


def library_digest(key: str) -> str:
    """The package's source as chapter `key` sees it: every module except the other chapters'."""
    pkg = Path(__file__).resolve().parent
    own = profiles.chapter(key).module.rsplit(".", 1)[-1] + ".py"
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*.py")):
        rel = f.relative_to(pkg).as_posix()
        if rel in NOT_CHAPTER_INPUTS or (rel.startswith("chapters/ch") and f.name != own):
            continue
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def data_digest() -> str:
    root = paths.shipped() / "data"
    files = [root / "claims.csv", *sorted((root / "reference").rglob("*")),
             *sorted((root / "corpora").rglob("*"))]
    h = hashlib.sha256()
    for f in files:
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
    keys = list(keys or runner.available_chapters())
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
    keys = list(keys or runner.available_chapters())
    out: list[str] = []
    frontier = [key]
    while frontier:
        k = frontier.pop()
        for c in keys:
            if k in reads(c) and c not in out:
                out.append(c)
                frontier.append(c)
    return out


def inputs(key: str, profile: str, seed: int, results_dir=None) -> dict:
    """Everything a chapter's run depends on, each as a digest (or a small value)."""
    return {
        "notebook": file_sha(runner.notebook_path(key)),
        "library": library_digest(key),
        "data": data_digest(),
        "settings": profiles.validate(key, profile=profile, seed=seed),
        "versions": versions(),
        "reads": {profiles.chapter(d).stem: file_sha(results.results_path(
            profiles.chapter(d).stem, profile, results_dir)) for d in reads(key)},
    }


def digest(inp: dict) -> str:
    return _sha(json.dumps(inp, sort_keys=True).encode())


def _paths(key, profile, results_dir, build_dir):
    stem = profiles.chapter(key).stem
    chapters = Path(build_dir or paths.build_dir()) / profile / "chapters"
    return (chapters / f"{stem}.fresh.json", chapters / f"{stem}.ipynb",
            results.results_path(stem, profile, results_dir))


def record(key, profile, results_dir=None, build_dir=None) -> dict | None:
    p = _paths(key, profile, results_dir, build_dir)[0]
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def status(key: str, profile: str, seed: int = 0, results_dir=None, build_dir=None) -> str:
    """'fresh', or why the chapter must run."""
    rec_path, executed, res = _paths(key, profile, results_dir, build_dir)
    rec = record(key, profile, results_dir, build_dir)
    if not rec or not rec.get("digest"):
        return "never run" if not rec else "its last run did not finish"
    if not executed.is_file() or file_sha(executed) != rec.get("executed"):
        return "its executed notebook is missing or changed"
    if file_sha(res) != rec.get("results"):
        return "its results file is missing or changed"
    now = inputs(key, profile, seed, results_dir)
    if digest(now) == rec["digest"]:
        return "fresh"
    changed = [k for k in now if now[k] != rec.get("inputs", {}).get(k)]
    return "changed: " + ", ".join(changed or ["inputs"])


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


def _minutes(s: float | None) -> str:
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


def run_chapters(profile: str, seed: int = 0, results_dir=None, build_dir=None,
                 force: bool = False, keys: list[str] | None = None, log=say,
                 cores: int | None = None) -> dict:
    """Run the chapters that are not fresh (all of them with `force`), in `schedule` order:
    a chapter that uses every core runs alone; one-thread chapters (`threads`) run side by
    side, as many as there are cores, each in its own process. Prints each chapter's start,
    end, elapsed time and the estimated time left. Returns {key: 'ran' | 'fresh'}."""
    import os
    import subprocess
    import sys

    cores = cores or os.cpu_count() or 1
    order = schedule(keys, (profile, results_dir, build_dir))
    outcome: dict[str, str] = {}
    first = {k: "forced" if force else status(k, profile, seed, results_dir, build_dir)
             for k in order}
    left = {k: estimate(k, profile, results_dir, build_dir) for k, s in first.items()
            if s != "fresh"}
    t_build = time.perf_counter()
    running: dict[str, tuple] = {}  # one-thread chapters: key -> (process, start, inputs, log)

    def remaining() -> str:
        known = {k: v for k, v in left.items() if v is not None}
        if not known:
            return ""
        heavy = sum(v for k, v in known.items() if not threads(k))
        lights = [v for k, v in known.items() if threads(k)]
        light = sum(lights) / max(1, min(cores, len(lights)))
        return (f"; about {_minutes(heavy + light)} left in the build"
                + (" (not counting chapters never timed)" if len(known) < len(left) else ""))

    def begin(k, why):
        stem = profiles.chapter(k).stem
        log(f"[nlbudget] {stem}: running at {profile} ({why}); last time "
            f"{_minutes(left.get(k))}{remaining()}")
        rec_path = _paths(k, profile, results_dir, build_dir)[0]
        old = record(k, profile, results_dir, build_dir) or {}
        rec_path.parent.mkdir(parents=True, exist_ok=True)
        # void the record first: a failed or killed run leaves the chapter stale
        results.atomic_write_text(rec_path, json.dumps({"digest": None,
                                                        "elapsed_s": old.get("elapsed_s")}))
        return inputs(k, profile, seed, results_dir)

    def finish(k, inp, elapsed):
        rec_path, executed, res = _paths(k, profile, results_dir, build_dir)
        results.atomic_write_text(rec_path, json.dumps({
            "digest": digest(inp), "inputs": inp, "executed": file_sha(executed),
            "results": file_sha(res), "elapsed_s": round(elapsed, 1),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1))
        left.pop(k, None)
        outcome[k] = "ran"
        log(f"[nlbudget] {profiles.chapter(k).stem}: done in {_minutes(elapsed)} "
            f"(build so far {_minutes(time.perf_counter() - t_build)})")

    def reap(block: bool) -> None:
        """Collect finished one-thread chapters (wait for one if `block`)."""
        while running:
            for k, (proc, t0, inp, logf) in list(running.items()):
                if proc.poll() is not None:
                    del running[k]
                    logf.close()
                    if proc.returncode != 0:
                        for other, (p2, *_rest) in running.items():
                            p2.wait()
                        text = Path(logf.name).read_text(errors="replace")[-6000:]
                        raise RuntimeError(f"chapter {profiles.chapter(k).stem} failed "
                                           f"(exit {proc.returncode}):\n{text}")
                    finish(k, inp, time.perf_counter() - t0)
                    block = False
            if not block:
                return
            time.sleep(1)

    try:
        for k in order:
            stem = profiles.chapter(k).stem
            while any(d in running for d in reads(k)):  # what it reads must be written
                reap(block=True)
            why = "forced" if force else status(k, profile, seed, results_dir, build_dir)
            if why == "fresh":
                log(f"[nlbudget] {stem}: fresh, skipped (inputs unchanged)")
                outcome[k] = "fresh"
                left.pop(k, None)
                continue
            left.setdefault(k, estimate(k, profile, results_dir, build_dir))
            need = threads(k) or cores
            while running and sum(threads(r) for r in running) + need > cores:
                reap(block=True)
            inp = begin(k, why)
            t0 = time.perf_counter()
            if need >= cores:  # alone, in this process
                runner.run(k, profile=profile, seed=seed, results_dir=results_dir,
                           build_dir=build_dir)
                finish(k, inp, time.perf_counter() - t0)
                continue
            logs = Path(build_dir or paths.build_dir()) / profile / "chapters"
            logf = open(logs / f"{stem}.log", "w")
            cmd = [sys.executable, "-m", "nlbudget.cli", "run", k, "--profile", profile,
                   "--seed", str(seed)]
            if results_dir is not None:
                cmd += ["--results-dir", str(results_dir)]
            if build_dir is not None:
                cmd += ["--build-dir", str(build_dir)]
            running[k] = (subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                           start_new_session=True,  # killed with its kernel
                                           env={**os.environ, "NLBUDGET_ROOT":
                                                str(paths.repo_root())}), t0, inp, logf)
        reap(block=True)
    finally:
        import signal

        for proc, *_rest in running.values():  # interrupted: stop what still runs
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return outcome
