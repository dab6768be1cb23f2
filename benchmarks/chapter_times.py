"""Benchmark (prints figures; not a test): where each chapter's time goes.

Every chapter records the seconds spent in its named phases (`nlbudget.timing`) in its results
file. This prints, per chapter in build order, the total and every phase (nested phases
indented; a nested phase's time is also inside its parent's), and the sum over chapters.

    python benchmarks/chapter_times.py [--profile ci] [--results-dir data/results]
        [--run] [--force]

With `--run` it first builds the chapters that are not fresh (`--force`: all of them) with
`nlbudget.book.runner.run_chapters`, then prints the times those runs recorded.
"""

import argparse

from nlbudget.book import plan, profiles, runner
from nlbudget.verdicts import results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="ci", choices=profiles.PROFILES)
    ap.add_argument("--results-dir", default=None)
    ap.add_argument("--build-dir", default=None)
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--min-seconds", type=float, default=1.0, help="hide shorter phases")
    a = ap.parse_args()
    if a.run:
        runner.run_chapters(plan.make(a.profile, results_dir=a.results_dir,
                                      build_dir=a.build_dir, force=a.force))
    total = 0.0
    for key in plan.run_order():
        stem = profiles.chapter(key).stem
        try:
            doc = results.read(stem, a.profile, a.results_dir)
        except FileNotFoundError:
            print(f"{stem}: no results at {a.profile}")
            continue
        t = doc.get("timings")
        if not t:
            print(f"{stem}: its results file records no timings (written before they were)")
            continue
        total += t["total_s"]
        print(f"{stem}: {t['total_s']:8.1f} s  ({t['total_s'] / 60:.1f} min, "
              f"created {doc['created']})")
        for name, s in t["phases"].items():
            if s >= a.min_seconds:
                depth = name.count("/")
                print(f"    {'  ' * depth}{name.rsplit('/', 1)[-1]:<{44 - 2 * depth}} {s:8.1f} s")
    print(f"all chapters: {total:.1f} s ({total / 60:.1f} min)")


if __name__ == "__main__":
    main()
