"""Benchmark (prints figures; not a test): this CPU, and the book's expected time on another.

Prints the CPU model, the flags that decide the book's speed (AVX2, AVX-512, native bfloat16,
AMX), float32 and bfloat16 GFLOPS of one of SmolLM2's MLP products (256×576 by 576×1536) on
one thread and on two — as PyTorch runs here, and with AVX2 only (`machine.AVX2_ONLY`) — and
the cold `tox -e book` time expected on the reference CPU: the last build's chapter times (their
freshness records), replayed in the build's schedule (`nlbudget.book.plan.schedule`:
chapters that use every core one at a time, one-thread chapters side by side) and scaled by the
float32 GFLOPS of the instructions that build used over the reference's, plus the exercises
and the HTML (scaled too) and the environment's creation (not scaled: it is downloads; the
reference runner took about 5 minutes).

The reference is the CPU of GitHub's hosted runners and most laptops: an AMD EPYC with AVX2 and
no AVX-512 or AMX, 69 GFLOPS float32 and 1.8 GFLOPS bfloat16 on one thread at that shape.
The book's budgets are sized so that the expected time there is at most 20 minutes.

To measure rather than scale, build with AVX2 only: on a CPU with AVX-512 this makes PyTorch
use the reference's instructions, and the build records it. It does not make the CPU as slow as
the reference: the machine the book is built on measured 69 GFLOPS float32 AVX2-only on
2026-12-02 (the reference's own figure) but 96 on 2026-12-04 (another host), so this scaling
still applies to an AVX2-only build:

    MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \
        DNNL_MAX_CPU_ISA=AVX2 tox -e book

    python benchmarks/cpu.py [--profile ci] [--build-dir build] [--env-seconds 300]
        [--reference-gflops 69]
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from nlbudget.book import plan, profiles
from nlbudget.assets import machine
from nlbudget import paths

REFERENCE = {"model": "AMD EPYC (AVX2, no AVX-512 or AMX): GitHub's hosted runners",
             "float32": 69.0, "bfloat16": 1.8}


def gflops_with(env: dict) -> dict:
    """{(dtype, threads): GFLOPS} measured in a fresh interpreter with `env` added (the median
    of three measurements each)."""
    code = ("import json, statistics; from nlbudget.assets import machine; print(json.dumps("
            "{f'{d} {n}': statistics.median(machine.matmul_gflops(d, n) for _ in range(3)) "
            "for d in ('float32', 'bfloat16') for n in (1, 2)}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True).stdout
    return {tuple(k.split()): v for k, v in json.loads(out).items()}


def replay(durations: dict[str, float], cores: int = 2) -> float:
    """The wall time of `runner.run_chapters` with these chapter durations: its schedule,
    a chapter that uses every core alone, one-thread chapters `cores` at a time, and no
    chapter before those whose results it reads have finished."""
    order = plan.schedule(list(durations))
    t, running = 0.0, {}  # key -> end time

    def wait_one():
        nonlocal t
        k = min(running, key=running.get)
        t = max(t, running.pop(k))

    for k in order:
        while any(d in running for d in plan.reads(k)):
            wait_one()
        need = plan.threads(k) or cores
        while running and sum(plan.threads(r) for r in running) + need > cores:
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
    g = {"as PyTorch runs here": gflops_with({}),
         "AVX2 only": gflops_with(machine.AVX2_ONLY)}
    for label, res in g.items():
        for dtype in ("float32", "bfloat16"):
            print(f"{label:>20}, {dtype:>8} {m}x{k} @ {k}x{n}: {res[dtype, '1']:7.1f} GFLOPS on "
                  f"1 thread, {res[dtype, '2']:7.1f} on 2  (reference, 1 thread: "
                  f"{REFERENCE[dtype]})")
    build = Path(a.build_dir or paths.build_dir()) / a.profile
    durations = {}
    for key in plan.run_order():
        rec = plan.record(key, a.profile, build_dir=a.build_dir)
        if rec and rec.get("elapsed_s"):
            durations[key] = float(rec["elapsed_s"])
    if not durations:
        print(f"no executed chapters under {build}: build the book first (tox -e book)")
        return
    times = json.loads((build / "build-times.json").read_text()) if (
        build / "build-times.json").is_file() else {}
    used = times.get("cpu", {}).get("isa", {})
    label = "AVX2 only" if used.get("torch") == "avx2" else "as PyTorch runs here"
    ratio = g[label]["float32", "1"] / a.reference_gflops
    print(f"the last build computed with {used.get('torch', '?').upper()} ({label}): float32 "
          f"{g[label]['float32', '1']:.1f} GFLOPS, {ratio:.2f}x the reference's")
    print(f"\nthe last build at {a.profile} ({build}), here and scaled to the reference CPU:")
    for key, s in durations.items():
        stem = profiles.chapter(key).stem
        one = " (one thread)" if plan.threads(key) else ""
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
