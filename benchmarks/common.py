"""What the benchmark scripts share: a timer and the common command-line options."""

import argparse
import statistics
import time


def timed(fn, repeats: int, warmup: bool = False) -> float:
    """Median wall-clock seconds of `fn()` over `repeats` calls (after one unmeasured call
    with `warmup`)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def parser(repeats: int = 7) -> argparse.ArgumentParser:
    """--model, --windows, --length, --repeats; scripts add their own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=repeats)
    return ap
