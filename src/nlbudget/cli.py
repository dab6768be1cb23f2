"""`nlbudget run NN --profile P`, `nlbudget book`, `nlbudget ledger`, `nlbudget student-edition`,
`nlbudget judge`, `nlbudget compare`, `nlbudget launch`, `nlbudget fetch`; `nlbudget budget
--model M` (chapter 07's budget for your own model); for instructors `nlbudget slides NN` and
`nlbudget grading NN`."""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time

from nlbudget import paths
from nlbudget.assets import corpora, models
from nlbudget.book import launch, plan, preflight, profiles
from nlbudget.book.build import (COMMITTED, EDITIONS, build, judge_committed, ledger_export,
                                 ledger_markdown, ledger_text)
from nlbudget.book.exercises import student_edition
from nlbudget.book.runner import ChapterFailed, run, run_chapters, stop_on_signals
from nlbudget.errors import AssetUnavailable, ParameterError
from nlbudget.teaching import grading, slides
from nlbudget.tools import budget as budget_tool
from nlbudget.verdicts.results import compare


def _param(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="nlbudget", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="execute one chapter with papermill")
    r.add_argument("chapter", help="chapter number, e.g. 01")
    b = sub.add_parser("book", help="run the chapters whose inputs changed (all with --force), "
                       "then build the book")
    b.add_argument("--no-run", action="store_true", help="reuse executed chapters")
    b.add_argument("--force", action="store_true",
                   help="rerun every chapter and rebuild every page, fresh or not")
    b.add_argument("--edition", default="solutions", choices=EDITIONS,
                   help="student: the exercise pages without solutions or executed checks "
                   "(build/<profile>/site-student)")
    for p in (r, b):
        p.add_argument("--profile", default="ci", help=f"one of {', '.join(profiles.PROFILES)}")
        p.add_argument("--seed", default="0", help="a non-negative integer")
        p.add_argument("--results-dir", default=None)
        p.add_argument("--build-dir", default=None)
    r.add_argument("-p", "--param", action="append", type=_param, default=[],
                   metavar="NAME=VALUE", help="override a notebook parameter")
    r.add_argument("--timeout", type=int, default=None,
                   help="per-cell timeout, seconds (default: 1 h at smoke and ci, 4 h at full "
                   "and paper)")
    led = sub.add_parser("ledger", help="print the claims ledger: counts per kind and verdict, "
                         "then every claim")
    led.add_argument("--profile", default="ci")
    led.add_argument("--results-dir", default=None)
    led.add_argument("--markdown", action="store_true", help="the book page's markdown instead")
    led.add_argument("--format", choices=("text", "csv", "json"), default="text",
                     help="csv or json: every row with its evidence, how each piece reads its "
                     "figures, and its control with the direction it guards")
    j = sub.add_parser("judge", help="re-judge chapters' verdicts from their stored figures "
                       "with today's claims code (seconds; nothing reruns, no figure changes)")
    j.add_argument("chapters", nargs="*", help="chapter numbers (default: every chapter)")
    j.add_argument("--profile", default="ci", help=f"one of {', '.join(profiles.PROFILES)} "
                   f"({', '.join(COMMITTED)}: the committed results)")
    j.add_argument("--results-dir", default=None)
    j.add_argument("--build-dir", default=None)
    st = sub.add_parser("student-edition", help="write the exercise notebooks without their "
                        "solutions")
    st.add_argument("--out", default=None,
                    help="folder (default: notebooks/student, the committed copies)")
    f = sub.add_parser("fetch", help="fetch an offline model or corpus into the cache")
    f.add_argument("asset", help="smollm2-135m or shakespeare (pydocs ships with the book)")
    cmp_ = sub.add_parser("compare", help="two results folders: the verdicts and figures that "
                          "differ (timings and environment left out)")
    cmp_.add_argument("first")
    cmp_.add_argument("second")
    cmp_.add_argument("--profile", default="ci")
    cmp_.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for figures")
    cmp_.add_argument("--show", type=int, default=5, help="differing figures shown per chapter")
    la = sub.add_parser("launch", help="the repository URL the launch buttons and install cells "
                        "use (pyproject.toml's Repository)")
    la.add_argument("--sync", action="store_true", help="rewrite every notebook's install cell "
                    "from that URL")
    _instructors(sub)
    return ap


def _instructors(sub) -> None:
    """The instructors' commands (the teach extra): slides and grading."""
    sl = sub.add_parser("slides", help="a meeting's reveal.js slides, from the chapter as this "
                        "build executed it (the teach extra: nbconvert)")
    sl.add_argument("chapter", help="chapter number, e.g. 01")
    sl.add_argument("--profile", default="ci")
    sl.add_argument("--results-dir", default=None)
    sl.add_argument("--build-dir", default=None)
    gr = sub.add_parser("grading", help="a chapter's exercises as an otter-grader assignment: "
                        "student notebook, solutions, autograder (the teach extra)")
    gr.add_argument("chapter", help="chapter number, e.g. 01")
    gr.add_argument("--out", default=None, help="folder (default: build/grading/NN)")
    _budget_parser(sub)


def _budget_parser(sub) -> None:
    bu = sub.add_parser("budget", help="chapter 07's budget for any causal LM: per MLP layer "
                        "the linear, gated and random-feature lenses, the greedy path, the "
                        "held-out check and the realized speed; writes plan.json, lenses.csv, "
                        "figures and the budgeted model")
    bu.add_argument("--model", required=True, help="smollm2-135m, gemma3-270m, a folder saved "
                    "with save_pretrained, a .gguf file, or a hub id")
    bu.add_argument("--corpus", default=None, help="a UTF-8 text file, paragraphs separated by "
                    "blank lines (default: the book's Python documentation)")
    bu.add_argument("--budget", nargs="+", default=["1%", "5%"],
                    help="perplexity budgets, e.g. 1%% 5%% (default)")
    bu.add_argument("--out", default="budget", help="output folder (default: ./budget)")
    bu.add_argument("--profile", default="ci", help="smoke, ci (default) or full: chapter "
                    "07's windows and repeats at that scale")
    bu.add_argument("--seed", type=int, default=0)


def _check_profile(profile: str) -> None:
    if profile not in profiles.PROFILES:
        raise ParameterError(f"unknown profile {profile!r}; valid profiles: "
                             f"{', '.join(profiles.PROFILES)}")


def cmd_run(args) -> int:
    _check_profile(args.profile)
    if args.profile in plan.COMMITTED and not args.param:
        # a committed scale: through the plan, which leaves the inputs' record beside the
        # results file (the ledger marks the result stale when they change)
        if args.timeout:  # the plan's runs (here, or in a subprocess) read it
            os.environ["NLBUDGET_CELL_TIMEOUT"] = str(args.timeout)
        key = profiles.chapter(args.chapter).key
        p = plan.make(args.profile, profiles.parse_seed(args.seed), args.results_dir,
                      args.build_dir, force=True, keys=[key])
        run_chapters(p)
        print(f"executed: {p.chapters[0].executed}")
        return 0
    out = run(args.chapter, profile=args.profile, seed=args.seed, parameters=dict(args.param),
              results_dir=args.results_dir, build_dir=args.build_dir, timeout=args.timeout)
    print(f"executed: {out}")
    return 0


def cmd_book(args) -> int:
    _check_profile(args.profile)
    if args.no_run:
        preflight.results_folder(args.results_dir, args.profile)
    else:
        preflight.run_folders(args.profile, args.results_dir, args.build_dir)
    index = build(args.profile, run=not args.no_run, build_dir=args.build_dir,
                  results_dir=args.results_dir, seed=profiles.parse_seed(args.seed),
                  force=args.force, edition=args.edition)
    print(f"book: {index}")
    return 0


def cmd_ledger(args) -> int:
    _check_profile(args.profile)
    preflight.results_folder(args.results_dir, args.profile)
    if args.format != "text":
        sys.stdout.write(ledger_export(args.profile, args.format, args.results_dir))
        return 0
    print(ledger_markdown(args.profile, args.results_dir) if args.markdown
          else ledger_text(args.profile, args.results_dir))
    return 0


def cmd_judge(args) -> int:
    """Re-judge from the stored figures; the committed scales' results where they live."""
    _check_profile(args.profile)
    preflight.results_folder(args.results_dir, args.profile)
    keys = [profiles.chapter(k).key for k in args.chapters] or list(profiles.CHAPTERS)
    t = time.perf_counter()
    if args.profile in COMMITTED and args.results_dir is None:
        out = judge_committed(args.profile, keys, log=lambda line: None)
    else:
        out = {}
        for k in keys:
            st = plan.chapter_step(k, args.profile, args.results_dir, args.build_dir)
            if not st.outputs["results file"].is_file():
                print(f"{st.stem}: no results at {args.profile!r}: run it first "
                      f"(`nlbudget run {k} --profile {args.profile}`)")
                continue
            out[st.stem] = plan.judge(st)
    for stem, o in out.items():
        print(f"{stem}: {o['claims']} claims judged, {len(o['changed'])} changed")
        for cid, (a, b) in o["changed"].items():
            print(f"  {cid}: {a} -> {b}" if a != b else f"  {cid}: {b} (its text changed)")
    print(f"judged in {time.perf_counter() - t:.1f} s")
    return 0


def cmd_student_edition(args) -> int:
    for p in student_edition(args.out):
        print(f"wrote {p}")
    return 0


def cmd_compare(args) -> int:
    _check_profile(args.profile)
    preflight.compared(args.first, args.second, args.profile)
    diff = compare(args.first, args.second, args.profile, args.rtol)
    for stem, d in diff.items():
        if "missing" in d:
            print(f"{stem}: missing in the {d['missing']} folder")
            continue
        print(f"{stem}: {len(d['verdicts'])} verdict(s) and {len(d['figures'])} figure(s) differ")
        for i, (x, y) in d["verdicts"].items():
            print(f"  verdict {i}: {x} -> {y}")
        for k, (x, y) in list(d["figures"].items())[:args.show]:
            print(f"  {k}: {x!r} -> {y!r}")
    return 1 if any(d.get("verdicts") or d.get("figures") or "missing" in d
                    for d in diff.values()) else 0


def cmd_launch(args) -> int:
    url = launch.repository_url()
    print(f"repository: {url or 'not set (pyproject.toml [project.urls] Repository)'}")
    if args.sync:
        for p in launch.sync(url):
            print(f"rewrote the install cell of {p}")
    return 0


def cmd_fetch(args) -> int:
    print(models.fetch_gguf(args.asset) if args.asset in models.OFFLINE_MODELS
          else corpora.fetch(args.asset))
    return 0


def cmd_budget(args) -> int:
    budget_tool.run(args.model, args.corpus, args.budget, args.out, args.profile, args.seed)
    return 0


def cmd_slides(args) -> int:
    _check_profile(args.profile)
    out = slides.write(args.chapter, args.profile, args.results_dir, args.build_dir)
    n = slides.summary(out)
    print(f"slides: {out} ({n['sections']} slides, {n['figures']} figures)")
    return 0


def cmd_grading(args) -> int:
    key = profiles.chapter(args.chapter).key
    out = grading.export(key, args.out or paths.build_dir() / "grading" / key)
    for what, path in out.items():
        print(f"{what}: {path}")
    print(f"grade a submission: otter run -a {out['autograder']} SUBMISSION.ipynb")
    return 0


COMMANDS = {"run": cmd_run, "book": cmd_book, "ledger": cmd_ledger, "judge": cmd_judge,
            "student-edition": cmd_student_edition, "compare": cmd_compare,
            "launch": cmd_launch, "fetch": cmd_fetch, "slides": cmd_slides,
            "grading": cmd_grading, "budget": cmd_budget}


def warn_cuda_without_gpu() -> None:
    """At the start of work: a warning when torch is a CUDA build on a machine with no GPU."""
    import torch

    msg = preflight.cuda_build_without_gpu(torch.version.cuda, torch.cuda.is_available())
    if msg:
        print(f"nlbudget: warning: {msg}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.cmd in ("run", "book") and argv is None:  # the command, not a call from Python
        stop_on_signals()
    if args.cmd in ("run", "book", "budget"):
        warn_cuda_without_gpu()
    try:
        return COMMANDS[args.cmd](args)
    except (ParameterError, AssetUnavailable, ChapterFailed) as e:
        print(f"nlbudget: error: {e}", file=sys.stderr)
        return 1 if isinstance(e, ChapterFailed) else 2


if __name__ == "__main__":
    sys.exit(main())
