"""Execute notebooks with papermill: one chapter (`run`, what `nlbudget run` does), one
exercise notebook (`run_exercises`), or everything a build's plan says is stale (`run_plan`).

`run_plan` runs the plan's chapters in its order: a chapter that uses every core runs alone, in
this process; one-thread chapters (`plan.threads`) run side by side, as many as there are
cores, each in its own process. It prints each chapter's start, end, elapsed time and the
estimated time left; then it runs the stale exercise notebooks, several at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from nlbudget import paths
from nlbudget.book import exercises, plan, preflight, profiles
from nlbudget.book.plan import Plan, Step, say


def refuse_overrides_in_the_committed_folder(profile: str, parameters: dict | None,
                                             results_dir) -> None:
    """A run with overridden settings at a committed profile (`full`) may not write the
    committed results folder: the file would read as the committed `full` result, its record
    left from the run before. Such a run names another folder (`--results-dir`)."""
    if not parameters or profile not in plan.COMMITTED:
        return
    if Path(results_dir or paths.results_dir()).resolve() == paths.results_dir().resolve():
        raise profiles.ParameterError(
            f"overrides ({', '.join(sorted(parameters))}) at the committed profile {profile!r} "
            f"would overwrite the committed results in {paths.results_dir()}: give the run "
            f"another folder (--results-dir), or change the profile's settings and rerun it "
            f"without overrides")


def check_parameters(key: str, parameters: dict) -> dict:
    """Validate the run parameters and overrides through `profiles.validate` (the same check
    the notebook's `profiles.from_notebook` makes): an unknown name fails, naming the valid
    ones. Returns the resolved settings."""
    return profiles.validate(key, **parameters)


#: Per-cell timeout (seconds) by profile: `full` and `paper` cells run for up to an hour on a
#: fast CPU (chapter 07's sweep at `full`: 45 minutes), so a slower one gets four.
CELL_TIMEOUT = {"smoke": 3600, "ci": 3600, "full": 4 * 3600, "paper": 4 * 3600}


def run(key: str, profile: str = "ci", seed: int | str = 0, parameters: dict | None = None,
        results_dir: str | Path | None = None, build_dir: str | Path | None = None,
        timeout: int | None = None) -> Path:
    """Execute chapter `key` at `profile` into `<build>/<profile>/chapters/<stem>.ipynb`, each
    cell within `timeout` seconds (default: $NLBUDGET_CELL_TIMEOUT where set — how `nlbudget
    run --timeout` reaches chapters run through the plan — else CELL_TIMEOUT of the profile).

    The notebook writes its own results file (`<results_dir>/<profile>/<stem>.json`) in its
    last cell, so a failed run leaves the previous results file as it was.
    """
    if isinstance(seed, str):
        seed = profiles.parse_seed(seed)
    params = {"profile": profile, "seed": seed, **(parameters or {})}
    check_parameters(key, params)  # fails before anything runs or is written
    refuse_overrides_in_the_committed_folder(profile, parameters, results_dir)
    preflight.run_folders(profile, results_dir, build_dir)  # and so does a read-only folder
    params["results_dir"] = str(Path(results_dir or paths.results_dir()).resolve())
    ch = profiles.chapter(key)
    out_dir = Path(build_dir or paths.build_dir()) / profile / "chapters"
    return _execute(profiles.notebook_path(key), out_dir / f"{ch.stem}.ipynb", params,
                    timeout or int(os.environ.get("NLBUDGET_CELL_TIMEOUT") or 0)
                    or CELL_TIMEOUT[profile], progress=not (os.environ.get("CI") or not sys.stderr.isatty()))


#: The profiles the exercise notebooks are written for: their solutions must pass every check.
SOLVED_AT = ("smoke", "ci")


def run_exercises(key: str, profile: str, results_dir=None, build_dir=None,
                  timeout: int = 600) -> Path:
    """Execute chapter `key`'s exercise notebook (solutions included) into
    `<build>/<profile>/exercises/`; its predictions read the chapter's results file. At the
    profiles the exercises are written for (SOLVED_AT) a solution whose check prints ✗ (a
    prediction the measurement contradicts) fails the run and leaves no executed copy."""
    res = str(Path(results_dir or paths.results_dir()).resolve())
    out = _execute(exercises.notebook(key), exercises.executed(key, profile, build_dir),
                   {"profile": profile, "results_dir": res}, timeout, progress=False)
    crossed = [ln for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"
               for o in c.get("outputs", []) if o.get("output_type") == "stream"
               for ln in o.get("text", "").splitlines() if "✗" in ln]
    if crossed and profile in SOLVED_AT:
        out.unlink()
        raise RuntimeError(f"exercise notebook {key} at profile {profile!r}: a solution's check "
                           "failed:\n  " + "\n  ".join(crossed))
    for ln in crossed:  # at full or paper a prediction may turn with the scale: said, not fatal
        print(f"exercise notebook {key} at {profile}: {ln}", file=sys.stderr)
    return out


class ChapterFailed(RuntimeError):
    """A chapter's notebook failed: the message names the cell, the error and the executed
    notebook (outputs up to the failure, the traceback in the failing cell)."""

    @classmethod
    def from_papermill(cls, e: Exception, src: Path, kept: Path | None) -> "ChapterFailed":
        where = (f"cell {e.cell_index} (execution count {e.exec_count})"
                 if hasattr(e, "cell_index") else "a cell")
        what = (f"{e.ename}: {e.evalue}" if hasattr(e, "ename")
                else f"{type(e).__name__}: {e}".strip())
        first = next(iter(getattr(e, "source", "").strip().splitlines()), "")
        return cls(f"{src.name} failed in {where}" + (f", which starts `{first[:80]}`"
                                                       if first else "")
                   + f": {what}" + (f"; the executed notebook, with the traceback: {kept}"
                                    if kept else ""))


def _keep_failed(tmp: Path, out: Path) -> Path | None:
    """A failed run's partial notebook, moved beside where the executed one would be."""
    if not tmp.is_file():
        return None
    failed = out.with_name(f"{out.stem}.failed.ipynb")
    tmp.replace(failed)
    return failed


def _execute(src: Path, out: Path, params: dict, timeout: int, progress: bool) -> Path:
    """papermill `src` → `out`, atomically: a failed run leaves no executed copy."""
    import papermill as pm  # cost: papermill and its kernel machinery, only when executing

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.running.ipynb")
    try:
        with kernel_environment():
            pm.execute_notebook(str(src), str(tmp), parameters=params, kernel_name="python3",
                                cwd=str(src.parent), execution_timeout=timeout,
                                progress_bar=progress, log_output=False)
    except Exception as e:  # a cell raised or timed out: say which, keep what ran
        raise ChapterFailed.from_papermill(e, src, _keep_failed(tmp, out)) from None
    hide_injected_parameters(tmp)
    tmp.replace(out)
    return out


@contextlib.contextmanager
def kernel_environment(**extra: str):
    """The environment a notebook's kernel inherits while papermill runs it: the same checkout,
    and figures drawn inline even where MPLBACKEND=Agg is set (tox, tests), or pages lose
    plots; plus `extra`. Restored on exit."""
    env = {"NLBUDGET_ROOT": str(paths.repo_root()),
           "MPLBACKEND": "module://matplotlib_inline.backend_inline", **extra}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def hide_injected_parameters(path: Path) -> None:
    """Papermill's injected parameters stay in an executed notebook, off the page."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, path)


def stop_children() -> list[int]:
    """Stop every process this one started, however deep (one-thread chapters' runners,
    papermill's kernels, which start in sessions of their own): SIGTERM, then SIGKILL to what
    is left after 5 s. Returns their pids."""
    import psutil

    kids = psutil.Process().children(recursive=True)  # the whole tree, before any parent dies
    for k in kids:
        with contextlib.suppress(psutil.Error):
            k.terminate()
    _, alive = psutil.wait_procs(kids, timeout=5)
    for k in alive:
        with contextlib.suppress(psutil.Error):
            k.kill()
    psutil.wait_procs(alive, timeout=5)
    return [k.pid for k in kids]


def kill_tree(proc) -> None:
    """Kill a runner started with `start_new_session=True` and everything under it (its
    kernel). POSIX: SIGKILL to its process group. Windows has neither `os.killpg` nor
    `signal.SIGKILL` (and no process groups from `start_new_session`): each descendant, then
    the runner, is killed through psutil (TerminateProcess)."""
    if hasattr(os, "killpg") and hasattr(signal, "SIGKILL"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return
    import psutil

    with contextlib.suppress(psutil.Error):
        for k in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                k.kill()
    with contextlib.suppress(OSError):
        proc.kill()


def stop_on_signals() -> None:
    """On SIGTERM (a `timeout`, a cancelled CI job) or SIGINT (Ctrl-C): stop every runner and
    kernel this process started (`stop_children`), then exit with 128 + the signal's number;
    the chapter that was running stays stale (`plan.void`), its results file untouched."""
    def stop(signum, frame):
        signal.signal(signum, signal.SIG_IGN)  # a second signal does not interrupt the stop
        stop_children()
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, stop)


# ------------------------------------------------------------------ running a plan


def run_plan(p: Plan, log=say, cores: int | None = None) -> dict:
    """Run what the plan says is stale: its chapters (`_Chapters`), then its exercise
    notebooks. Returns {"chapters": {key: 'ran' | 'fresh'}, "exercises": {…}, and the
    seconds each took}."""
    t = time.perf_counter()
    judge_steps(p, log)
    chapters = run_chapters(p, log, cores)
    took = {"chapters_s": time.perf_counter() - t}
    t = time.perf_counter()
    ex = run_exercise_steps(p, log, cores)
    took["exercises_s"] = time.perf_counter() - t
    return {"chapters": chapters, "exercises": ex, **took}


def judge_steps(p: Plan, log=say) -> None:
    """Re-judge the chapters that need not run but whose claims changed: seconds each, from
    their stored figures (`plan.judge`)."""
    for st in p.to_judge():
        out = plan.judge(st)
        log(f"[nlbudget] {st.stem}: re-judged from its stored figures ({st.rejudge}): "
            f"{len(out['changed'])} of {out['claims']} verdict rows changed")
        st.rejudge = ""


def run_chapters(p: Plan, log=say, cores: int | None = None) -> dict:
    """The plan's stale chapters (`_Chapters`). Returns {key: 'ran' | 'fresh'}."""
    return _Chapters(p, log, cores or os.cpu_count() or 1).run()


def run_exercise_steps(p: Plan, log=say, cores: int | None = None) -> dict:
    """The stale exercise notebooks, as many at a time as there are cores (each a few seconds
    of one-thread work)."""
    todo = p.stale("exercises")
    out = {s.key: "fresh" for s in p.exercises if s not in todo}
    if not todo:
        log("[nlbudget] exercises: fresh, skipped")
        return out

    def one(step: Step) -> None:
        plan.void(step)
        inp = plan.exercise_inputs(step.key, p.profile, p.results_dir)
        t0 = time.perf_counter()
        run_exercises(step.key, p.profile, p.results_dir, p.build_dir)
        plan.done(step, inp, time.perf_counter() - t0)

    t = time.perf_counter()
    with kernel_environment(OMP_NUM_THREADS="1"), \
            ThreadPoolExecutor(max_workers=cores or os.cpu_count() or 1) as pool:
        list(pool.map(one, todo))
    out.update({s.key: "ran" for s in todo})
    log(f"[nlbudget] exercises: {len(todo)} notebook(s) executed in "
        f"{time.perf_counter() - t:.0f} s")
    return out


class _Chapters:
    """The plan's chapters in its order: a chapter runs after those it reads have finished;
    every-core chapters alone, in this process; one-thread chapters side by side, each in its
    own process (`nlbudget run`), as many as there are cores."""

    def __init__(self, p: Plan, log, cores: int):
        self.p, self.log, self.cores = p, log, cores
        self.outcome: dict[str, str] = {}
        self.left = {s.key: plan.estimate(s.key, *p.when) for s in p.stale()}
        self.running: dict[str, tuple] = {}  # key -> (process, start, inputs, log file, step)
        self.t_build = time.perf_counter()

    def run(self) -> dict:
        try:
            for step in self.p.chapters:
                self.one(step)
            while self.running:  # every one-thread chapter still running, not just the first
                self.reap(block=True)
        finally:
            for proc, *_rest in self.running.values():  # interrupted: stop what still runs
                kill_tree(proc)
        return self.outcome

    def one(self, step: Step) -> None:
        while any(d in self.running for d in plan.reads(step.key)):  # what it reads: written
            self.reap(block=True)
        if step.why == "fresh":
            self.log(f"[nlbudget] {step.stem}: fresh, skipped (inputs unchanged)")
            self.outcome[step.key] = "fresh"
            return
        need = plan.threads(step.key) or self.cores
        while self.running and sum(plan.threads(r) for r in self.running) + need > self.cores:
            self.reap(block=True)
        inp = self.begin(step)
        t0 = time.perf_counter()
        if need >= self.cores:  # alone, in this process
            run(step.key, profile=self.p.profile, seed=self.p.seed,
                results_dir=self.p.results_dir, build_dir=self.p.build_dir)
            self.finish(step, inp, time.perf_counter() - t0)
        else:
            self.launch(step, inp, t0)

    def remaining(self) -> str:
        known = {k: v for k, v in self.left.items() if v is not None}
        if not known:
            return ""
        heavy = sum(v for k, v in known.items() if not plan.threads(k))
        lights = [v for k, v in known.items() if plan.threads(k)]
        light = sum(lights) / max(1, min(self.cores, len(lights)))
        return (f"; about {plan.minutes(heavy + light)} left in the build"
                + (" (not counting chapters never timed)" if len(known) < len(self.left)
                   else ""))

    def begin(self, step: Step) -> dict:
        self.log(f"[nlbudget] {step.stem}: running at {self.p.profile} ({step.why}); last time "
                 f"{plan.minutes(self.left.get(step.key))}{self.remaining()}")
        plan.void(step)  # a failed or killed run leaves the chapter stale
        # the inputs as they are when it starts: the chapters it reads have just run
        return plan.inputs(step.key, self.p.profile, self.p.seed, self.p.results_dir)

    def finish(self, step: Step, inp: dict, elapsed: float) -> None:
        plan.done(step, inp, elapsed)
        self.left.pop(step.key, None)
        self.outcome[step.key] = "ran"
        self.log(f"[nlbudget] {step.stem}: done in {plan.minutes(elapsed)} (build so far "
                 f"{plan.minutes(time.perf_counter() - self.t_build)})")

    def launch(self, step: Step, inp: dict, t0: float) -> None:
        p = self.p
        logf = open(step.executed.parent / f"{step.stem}.log", "w")
        cmd = [sys.executable, "-m", "nlbudget.book.runner", step.key, "--profile", p.profile,
               "--seed", str(p.seed)]
        for flag, value in (("--results-dir", p.results_dir), ("--build-dir", p.build_dir)):
            if value is not None:
                cmd += [flag, str(value)]
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True,  # killed with its kernel
                                env={**os.environ, "NLBUDGET_ROOT": str(paths.repo_root())})
        self.running[step.key] = (proc, t0, inp, logf, step)

    def reap(self, block: bool) -> None:
        """Collect finished one-thread chapters (wait for one if `block`)."""
        while self.running:
            for k, (proc, t0, inp, logf, step) in list(self.running.items()):
                if proc.poll() is None:
                    continue
                del self.running[k]
                logf.close()
                if proc.returncode != 0:
                    for other, *_rest in self.running.values():
                        other.wait()
                    text = Path(logf.name).read_text(errors="replace").strip().splitlines()
                    said = next((ln for ln in reversed(text) if "ChapterFailed:" in ln),
                                text[-1] if text else "")
                    raise ChapterFailed(f"chapter {step.stem} failed (exit {proc.returncode}): "
                                        f"{said.split('ChapterFailed: ', 1)[-1]}; its log: "
                                        f"{logf.name}")
                self.finish(step, inp, time.perf_counter() - t0)
                block = False
            if not block:
                return
            time.sleep(1)


def _main(argv: list[str] | None = None) -> None:
    """`python -m nlbudget.book.runner NN --profile P ...`: one chapter, as `run` executes it
    (the plan's one-thread chapters run this way, each in its own process)."""

    ap = argparse.ArgumentParser(prog="python -m nlbudget.book.runner")
    ap.add_argument("chapter")
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--seed", default="0")
    ap.add_argument("--results-dir", default=None)
    ap.add_argument("--build-dir", default=None)
    a = ap.parse_args(argv)
    stop_on_signals()
    print(f"executed: {run(a.chapter, a.profile, a.seed, None, a.results_dir, a.build_dir)}")


if __name__ == "__main__":
    _main()
