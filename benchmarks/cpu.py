"""Benchmark (prints figures; not a test): this CPU, and the book's expected time on another.

Prints the CPU model, the flags that decide the book's speed (AVX2, AVX-512, native bfloat16,
AMX), float32 and bfloat16 GFLOPS of one of SmolLM2's MLP products (256×576 by 576×1536) on
one thread and on two, and the cold `tox -e book` time expected on the reference CPU: the
last build's chapter times (their freshness records), replayed in the build's schedule
(`nlbudget.incremental.schedule`: chapters that use every core one at a time, one-thread
chapters side by side) and scaled by this CPU's float32 speed over the reference's, plus the
exercises and the HTML (scaled too) and the environment's creation (not scaled: it is
downloads; the reference runner took about 5 minutes).

The reference is the CPU of GitHub's hosted runners and most laptops: an AMD EPYC with AVX2 and
no AVX-512 or AMX, 69 GFLOPS float32 and 1.8 GFLOPS bfloat16 on one thread at that shape.
The book's budgets are sized so that the expected time there is at most 20 minutes.

    python benchmarks/cpu.py [--profile ci] [--build-dir build] [--env-seconds 300]
        [--reference-gflops 69]
"""

import argparse
import json
from pathlib import Path

from nlbudget import incremental, machine, paths, profiles

REFERENCE = {"model": "AMD EPYC (AVX2, no AVX-512 or AMX): GitHub's hosted runners",
             "float32": 69.0, "bfloat16": 1.8}


def replay(durations: dict[str, float], cores: int = 2) -> float:
    """The wall time of `incremental.run_chapters` with these chapter durations: its schedule,
    a chapter that uses every core alone, one-thread chapters `cores` at a time, and no
    chapter before those whose results it reads have finished."""
    order = incremental.schedule(list(durations))
    t, running = 0.0, {}  # key -> end time

    def wait_one():
        nonlocal t
        k = min(running, key=running.get)
        t = max(t, running.pop(k))

    for k in order:
        while any(d in running for d in incremental.reads(k)):
            wait_one()
        need = incremental.threads(k) or cores
        while running and sum(incremental.threads(r) for r in running) + need > cores:
            wait_one()
        if need >= cores:
            t += durations[k]
        else:
            running[k] = t + durations[k]
    return max([t, *running.values()])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="ci", choices=profiles.PROFILES)
    ap.add_argument("--build-dir", default=None)
    ap.add_argument("--env-seconds", type=float, default=300.0,
                    help="creating the environment on the reference runner (downloads)")
    ap.add_argument("--reference-gflops", type=float, default=REFERENCE["float32"])
    a = ap.parse_args()

    c = machine.cpu()
    print(f"CPU: {c['model']} ({c['cores']} cores)")
    print("flags: " + ", ".join(f"{f} {'yes' if v else 'no' if v is not None else '?'}"
                                for f, v in c["flags"].items()))
    m, k, n = machine.SHAPE
    g = {}
    for dtype in ("float32", "bfloat16"):
        for threads in (1, 2):
            g[dtype, threads] = machine.matmul_gflops(dtype, threads)
        print(f"{dtype:>9} {m}x{k} @ {k}x{n}: {g[dtype, 1]:7.1f} GFLOPS on 1 thread, "
              f"{g[dtype, 2]:7.1f} on 2  (reference CPU, 1 thread: {REFERENCE[dtype]})")
    ratio = g["float32", 1] / a.reference_gflops
    print(f"float32 speed over the reference's: {ratio:.2f}x; bfloat16 over float32 here: "
          f"{g['bfloat16', 1] / g['float32', 1]:.2f}x "
          f"(reference: {REFERENCE['bfloat16'] / REFERENCE['float32']:.3f}x)")

    build = Path(a.build_dir or paths.build_dir()) / a.profile
    durations = {}
    for key in incremental.run_order():
        rec = incremental.record(key, a.profile, build_dir=a.build_dir)
        if rec and rec.get("elapsed_s"):
            durations[key] = float(rec["elapsed_s"])
    if not durations:
        print(f"no executed chapters under {build}: build the book first (tox -e book)")
        return
    times = json.loads((build / "build-times.json").read_text()) if (
        build / "build-times.json").is_file() else {}
    print(f"\nthe last build at {a.profile} ({build}), here and scaled to the reference CPU:")
    for key, s in durations.items():
        stem = profiles.chapter(key).stem
        one = " (one thread)" if incremental.threads(key) else ""
        print(f"  {stem:<28}{s / 60:6.1f} min here  {s * ratio / 60:6.1f} min there{one}")
    here = replay(durations)
    there = replay({k: v * ratio for k, v in durations.items()})
    ex, html = times.get("exercises_s", 0.0), times.get("html_s", 0.0)
    print(f"  chapters as the build runs them: {here / 60:.1f} min here, {there / 60:.1f} min "
          f"there" + (f" (this build's own clock: {times['chapters_s'] / 60:.1f} min)"
                      if times.get("chapters_s") and len(times.get("chapters_ran", [])) ==
                      len(durations) else ""))
    print(f"  exercises {ex:.0f} s, HTML {html:.0f} s (here)")
    total = a.env_seconds + there + (ex + html) * ratio
    print(f"expected cold `tox -e book` on the reference CPU: {total / 60:.1f} min "
          f"(environment {a.env_seconds / 60:.1f} + chapters {there / 60:.1f} + exercises and "
          f"HTML {(ex + html) * ratio / 60:.1f}); goal: at most 20 min")


if __name__ == "__main__":
    main()
