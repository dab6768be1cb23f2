"""The ledger's pages and the committed results behind them: which part each chapter is in
(the table of contents), the committed scales' results with whether they are stale and their
re-judging (`judge_committed`), and the ledger page and its text: counts per kind and verdict,
the decision table (each row's rule next to each scale's verdict) and every row's details."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import json
import re
from pathlib import Path

from nlbudget import paths
from nlbudget.book import plan, profiles
from nlbudget.verdicts import claims, results


def _toc() -> str:
    return (paths.repo_root() / "book" / "_toc.yml").read_text(encoding="utf-8")


def part_titles() -> dict[str, str]:
    """{"I": "Part I — …", …}: the parts' captions in `book/_toc.yml`, the one place they are
    written (read line by line: `caption: Part N — …`)."""
    return {m.group(2): m.group(1).strip()
            for m in re.finditer(r"^\s*-?\s*caption:\s*(Part ([IVX]+) —.*)$", _toc(), re.M)}


def chapter_parts() -> dict[str, str]:
    """{chapter stem: its part ("I" … "IV")}, from where `book/_toc.yml` lists it."""
    out, part = {}, None
    for line in _toc().splitlines():
        if m := re.match(r"^\s*-?\s*caption:\s*(?:Part ([IVX]+) —)?", line):
            part = m.group(1)
        elif (m := re.match(r"^\s*-\s*file:\s*notebooks/(\d\d_\w+)\s*$", line)) and part:
            out[m.group(1)] = part
    return out


#: The scales whose results are committed (made once, on a CPU or a GPU, not by every build).
COMMITTED = plan.COMMITTED


def committed_dir(profile: str) -> Path:
    """Where a committed scale's results live: `data/results/<profile>/` of the checkout (or of
    the wheel's copy), whatever results folder this build writes to."""
    return paths.shipped() / "data" / "results" / profile


def staleness(key: str, profile: str) -> str:
    """'' when a committed result of chapter `key` was made from the inputs the chapter has now
    (its committed record, `<stem>.fresh.json`, against `plan.inputs`; what only the page
    reads is left out — the notebook's prose, and package versions: another machine's patch
    release does not make a result stale); else which inputs changed since."""
    stem = profiles.chapter(key).stem
    try:
        rec = json.loads((committed_dir(profile) / f"{stem}.fresh.json").read_text())
    except (OSError, ValueError):
        return "no record of its inputs"
    seed = rec.get("inputs", {}).get("settings", {}).get("seed", 0)
    now = plan.inputs(key, profile, seed, committed_dir(profile).parent)
    changed = [k for k in now if k not in plan.PAGE_ONLY and now[k] != rec.get("inputs", {}).get(k)]
    return ", ".join(plan.named(committed_step(key, profile), changed, rec))


def committed_step(key: str, profile: str) -> plan.Step:
    """A committed result as a plan step: its figures file under `committed_dir`."""
    return plan.chapter_step(key, profile, committed_dir(profile).parent)


def verdicts_staleness(key: str, profile: str) -> str | None:
    """'fresh' when chapter `key`'s committed verdicts at `profile` were judged by its claims
    code as it is now, else why not (`plan.verdicts_freshness`); None where it has no
    committed result."""
    st = committed_step(key, profile)
    if not st.outputs["results file"].is_file():
        return None
    return plan.verdicts_freshness(plan.read_record(st, plan.committed_record(st)), st)


def judge_committed(profile: str, keys=None, log=plan.say) -> dict[str, dict]:
    """Re-judge the committed results at `profile` whose claims code changed since they were
    judged (all of `keys` when given), from their stored figures: their verdicts files and
    records change, their figures files do not. Returns {stem: `results.judge`'s answer}.
    Only `nlbudget judge` calls it: a book build never writes the committed folder."""
    out = {}
    for key in keys or profiles.CHAPTERS:
        why = verdicts_staleness(key, profile)
        if why is None or (keys is None and why == "fresh"):
            continue
        st = committed_step(key, profile)
        out[st.stem] = plan.judge(st, plan.committed_record(st))
        log(f"[nlbudget] {st.stem} ({profile}, committed): re-judged from its stored figures "
            f"({why}): {len(out[st.stem]['changed'])} of {out[st.stem]['claims']} verdict rows "
            "changed")
    return out


def committed_rows(profile: str) -> dict[str, dict]:
    """{claim id: its row at a committed scale}: verdict and measurement, with the result's
    date and commit and whether it is stale."""
    out = {}
    for key in profiles.CHAPTERS:
        stem = profiles.chapter(key).stem
        if not (committed_dir(profile) / f"{stem}.json").is_file():
            continue
        doc = results.read(stem, profile, committed_dir(profile).parent)
        git = doc.get("environment", {}).get("git") or {}
        made = (f"{str(doc.get('created', ''))[:10]}, commit {str(git.get('commit', '?'))[:7]}"
                + (" with local changes" if git.get("dirty") else ""))
        stale = staleness(key, profile)
        judged = verdicts_staleness(key, profile)
        if judged != "fresh":  # judged by other claims code: the page says so, and how to fix
            stale = ", ".join(filter(None, (stale, f"its verdicts ({judged}: `nlbudget judge "
                                                   f"--profile {profile}` re-judges them)")))
        for c in doc.get("claims", []):
            out[c["id"]] = {**c, "made": made, "stale": stale}
    return out


def with_committed(rows: list[dict]) -> list[dict]:
    """The ledger rows with each committed scale's verdict beside this build's."""
    scales = {prof: committed_rows(prof) for prof in COMMITTED}
    for r in rows:
        for prof, got in scales.items():
            c = got.get(r["id"])
            r[f"verdict_{prof}"] = c["verdict"] if c else ""
            r[f"{prof}_row"] = c
    return rows


#: What a ledger row carries beyond `results.LEDGER_FIELDS`: its positive control, its
#: evidence by kind (`verdicts.claims.EVIDENCE`), what its headline finds and what it can show.
EXTRA_FIELDS = ("positive_control", "evidence", "finds", "shows")


def ledger_rows(profile: str, results_dir: Path | None = None) -> list[dict]:
    """The ledger's rows at `profile` (`results.ledger`) with each row's positive control and
    evidence, and each committed scale's row beside it (`with_committed`)."""
    rows = results.ledger(profile, results_dir)
    folder = Path(results_dir or paths.results_dir()) / profile
    got = {c["id"]: c for doc in results.read_dir(folder) for c in doc["claims"]}
    for r in rows:
        for k in EXTRA_FIELDS:
            r[k] = got.get(r["id"], {}).get(k) or ("" if k in ("finds", "shows") else {})
    return with_committed(rows)


GUARDS_TEXT = {"negative": "guards the negative findings", "positive": "guards the positive "
               "findings", "both": "guards both directions"}


def control_text(pc: dict) -> str:
    """A positive control in a few words: passed, failed, none needed; what it guards, where."""
    if not pc:
        return "—"
    if pc.get("passed") is None:
        return _inline(pc.get("what", "none needed"))
    aim = "; ".join(x for x in (GUARDS_TEXT.get(pc.get("guards", "both"), ""),
                                f"measured on {pc['scope']}" if pc.get("scope") else "") if x)
    return ("passed" if pc["passed"] else "**failed**") + f" ({aim})" * bool(aim) + \
        f": {_inline(pc.get('what', ''))}" + (f" ({_inline(pc['measured'])})"
                                             if pc.get("measured") else "")


def evidence_text(ev: dict) -> str:
    """A row's evidence, kind by kind, how it reads its figures and whether it stands past a
    failed control: `authors' data (points): reproduced; transfer (intervals): transfers` (a
    piece not run reads nothing: `reproduction: not run`)."""
    return "; ".join(f"{k}{reads_text(e, ' ({})')}: **{e['verdict']}**"
                     + (" past a failed control that guards the other direction"
                        if e.get("stands") else "") for k, e in ev.items()) or "—"


def reads_text(e: dict, form: str = "{}") -> str:
    """How an evidence piece reads its figures, in `form`; "" for a piece that was not run."""
    return "" if e.get("verdict") in ("", claims.NOT_RUN) else form.format(e.get("reads", "intervals"))


def evidence_glance(rows: list[dict]) -> list[str]:
    """The ledger's evidence at a glance: per row, what the verdict rests on — each kind of
    evidence with its verdict and how it reads its figures, the control and the direction it
    guards, and what the row can show — in one scannable table."""
    lines = ["| claim | verdict | what it can show | evidence (how it reads) | positive control |",
             "|---|---|---|---|---|"]
    for r in rows:
        pc = r.get("positive_control") or {}
        ctrl = ("none needed" if pc.get("passed") is None else
                ("passed" if pc["passed"] else "**failed**") + " — "
                + GUARDS_TEXT.get(pc.get("guards", "both"), "")
                + (f", on {_inline(pc['scope'])}" if pc.get("scope") else "")) if pc else "—"
        shows = r.get("shows") or ("a test of the claim" if r["kind"] != "book"
                                   else "the book's own question")
        lines.append(f"| {r['id']} | {r['verdict']} | {shows} | "
                     f"{evidence_text(r.get('evidence') or {})} | {ctrl} |")
    return lines


def evidence_counts(rows: list[dict]) -> str:
    """Paper rows counted by kind of evidence (rows) and that evidence's own verdict (columns);
    a row with several kinds counts once in each."""
    c = {k: {v: 0 for v in claims.VERDICTS} for k in claims.EVIDENCE}
    for r in (r for r in rows if r.get("kind") == "paper"):  # the book's questions aside
        for k, e in (r.get("evidence") or {}).items():
            c[k][e["verdict"]] += 1
    head = "| evidence | " + " | ".join(claims.VERDICTS) + " | total |"
    lines = [head, "|---" * (len(claims.VERDICTS) + 2) + "|"]
    for k, row in c.items():
        lines.append(f"| {k} | " + " | ".join(str(row[v]) for v in claims.VERDICTS)
                     + f" | {sum(row.values())} |")
    return "\n".join(lines)


def unstored_section() -> list[str]:
    """The text's numbers no stored author file holds (each chapter's `authors.UNSTORED`)."""
    rows = [u for k in profiles.CHAPTERS if importlib.util.find_spec(
        mod := profiles.chapter(k).module + ".authors")
        for u in getattr(importlib.import_module(mod), "UNSTORED", ())]
    return ["## The text's numbers no stored file holds", "", "The P3 author's result files "
            "are read on their points wherever they hold a sentence's numbers; these numbers "
            "of the text are in none of them, so no row can check them against the author's "
            "own data:", "", *(f"* **{c}** — {what} ({where})" for c, what, where in rows),
            ""] if rows else []


def rules() -> dict[str, str]:
    """{claim id: its rule in prose}: the claim function's docstring (threshold, control,
    interval, multiplicity), the paper's quoted sentence dropped, for the decision table."""
    out = {}
    for key in profiles.CHAPTERS:
        for fn in profiles.chapter(key).load().CLAIMS:
            ids = re.findall(r'"((?:P\d|BOOK\.P\d)\.[\w-]+)"', inspect.getsource(fn))
            doc = " ".join((fn.__doc__ or "").split())
            doc = re.sub(r'^(P\d[^:]*|The book\'s question): "[^"]*"[.,;]?\s*(—\s*)?', "", doc)
            for i in ids[:1]:
                out[i] = doc
    return out


def decision_table(rows: list[dict], profile: str) -> list[str]:
    """The ledger's decision table: per row, the rule next to each scale's verdict."""
    rule = rules()
    head = (f"| claim | the rule | positive control | evidence | `{profile}` | "
            + " | ".join(f"`{p}`" for p in COMMITTED) + " |")
    lines = [head, "|---|---|---|---|---|" + "---|" * len(COMMITTED)]
    for r in rows:
        at = " | ".join((r.get(f"verdict_{p}") or "—")
                        + (" (stale)" if r.get(f"{p}_row") and r[f"{p}_row"]["stale"] else "")
                        for p in COMMITTED)
        text = rule.get(r["id"], "")
        if len(text) < 40:  # a derivation's docstring is its statement: the rule is shared
            text = ("checked in sympy (a proof, or an identity verified at the sizes checked: "
                    "the row says which) and numerically in float64; the negative controls "
                    "must fail" if r["kind"] == "derivation" else "")
        text = "; ".join(t for t in (text, f"control: {r['control']}" if r["control"] else "")
                         if t)
        # this build's control and evidence; a committed scale's where this build has none
        shown = r if r.get("positive_control") or r.get("evidence") else next(
            (r[f"{p}_row"] for p in COMMITTED if r.get(f"{p}_row")), r)
        lines.append(f"| {r['id']} | {_inline(text)} | "
                     f"{control_text(shown.get('positive_control') or {})} | "
                     f"{evidence_text(shown.get('evidence') or {})} | {r['verdict']} | {at} |")
    return lines


KIND_TITLES = {"paper": "claims of the papers", "book": "the book's own questions",
               "derivation": "derivations (a paper's steps, proved or checked at one size)"}


def counts_markdown(rows: list[dict]) -> str:
    """Claims counted by kind (rows) and verdict (columns)."""
    c = results.counts(rows)
    head = "| kind | " + " | ".join(results.VERDICTS) + " | total |"
    lines = [head, "|---" * (len(results.VERDICTS) + 2) + "|"]
    for k, row in c.items():
        label = "**all**" if k == "all" else KIND_TITLES[k]
        lines.append(f"| {label} | " + " | ".join(str(row[v]) for v in results.VERDICTS)
                     + f" | {sum(row.values())} |")
    return "\n".join(lines)


def _inline(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _details(r: dict) -> list[str]:
    """The folded part of a ledger row: everything behind the verdict."""
    out = []
    for label, key in (("measured here", "measured"), ("control", "control"), ("why", "reason"),
                       ("would decide it", "needs"), ("the author's own data", "author_data"),
                       ("note", "note")):
        if r.get(key):
            out.append(f"**{label}:** {_inline(r[key])}")
    if r.get("positive_control"):
        out.append(f"**positive control:** {control_text(r['positive_control'])}")
    for k, e in (r.get("evidence") or {}).items():
        out.append(f"**evidence, {k}:** **{e['verdict']}** — {_inline(e.get('measured', ''))}"
                   + (f" *(setting: {_inline(e['setting'])})*" if e.get("setting") else "")
                   + (f"; control: {control_text(e['positive_control'])}"
                      if e.get("positive_control") else ""))
    if r.get("parts"):
        out.append("**parts:** " + "; ".join(f"{p}: {v}" for p, v in r["parts"].items()))
    if k := r.get("construction"):  # the paper's claim not run: what the book's own shows
        out.append(f"**what the book's construction shows** (not the paper's object): **"
                   f"{k['verdict']}** — {_inline(k['reason'])}" + "; parts: " * bool(k["parts"])
                   + "; ".join(f"{p}: {v}" for p, v in k["parts"].items()))
    if r.get("shows"):
        out.append(f"**what it can show:** {r['shows']}")
    if r.get("obtained"):
        out.append(f"**obtained:** {r['obtained']} "
                   + claims.OBTAINED_WORDS.get(r["obtained"], ""))
    for prof in COMMITTED:
        c = r.get(f"{prof}_row")
        if c:
            stale = f"; **stale** (changed since: {c['stale']})" if c["stale"] else ""
            out.append(f"**at `{prof}`** ({c['made']}{stale}): {_inline(c['measured'])} — "
                       f"**{c['verdict']}**: {_inline(c['reason'])}"
                       + (f"; would decide it: {_inline(c['needs'])}" if c.get("needs") else ""))
    if r.get("measured_paper_profile"):
        out.append(f"**at the paper profile:** {_inline(r['measured_paper_profile'])} "
                   f"(**{r['verdict_paper_profile']}**)")
    return out


def counts_section(rows: list[dict], profile: str) -> list[str]:
    """The ledger page's counts: this build's, then each other committed scale's (and which of
    its chapters are stale); a build at a committed scale prints its counts once."""
    lines = ["## Counts", "", f"This build (`{profile}`):", "", counts_markdown(rows), "",
             f"The paper rows of this build by kind of evidence, each with its own verdict "
             "(a row with several kinds counts in each):", "", evidence_counts(rows), ""]
    for prof in (p for p in COMMITTED if p != profile):
        at = [{**r, "verdict": r[f"verdict_{prof}"] or "not run",
               "evidence": (r.get(f"{prof}_row") or {}).get("evidence") or {}} for r in rows]
        stale = sorted({r[f"{prof}_row"]["stale"] and r["chapter"] for r in rows
                        if r.get(f"{prof}_row")} - {"", False})
        lines += [f"At `{prof}` (committed results, made once on a CPU; "
                  + (f"stale for chapter(s) {', '.join(stale)}: their inputs changed since)"
                     if stale else "none stale)") + ":", "", counts_markdown(at), "",
                  f"By kind of evidence at `{prof}`:", "", evidence_counts(at), ""]
    return lines


def intro(profile: str) -> list[str]:
    """The ledger page's opening: what it is, its vocabulary, the positive control and the
    kinds of evidence with the headline rule."""
    return [
        "# Claims ledger", "",
        f"Every claim of the four papers, what this build measured (profile `{profile}`), and a "
        "verdict. This page is generated from the chapters' results files "
        f"(`data/results/{profile}/*.json`); a claim whose chapter has not run is `not run`. "
        "Every verdict comes from a claim function of the chapter's module "
        "(`nlbudget.chapters`), compares with the control the claim names, and rests on an "
        "interval over seeds or evaluation windows:", "",
        "* **reproduced** — the effect is there, in the claimed direction, beyond the "
        "uncertainty; **not reproduced** — the uncertainty excludes it, or it goes the other "
        "way; **inconclusive** — the uncertainty holds both (the row says what would decide "
        "it); **not run** — not measured at this profile (the row says why); **partly** — a "
        "claim of several stated parts, some of which hold; **transfers** / **does not "
        "transfer** — what reproduced / not reproduced read as where the only evidence that "
        "decides is a transfer to another model than the paper's.",
        "* **positive control**: before a rule may decide, the experiment must show it could "
        "have detected the effect (the model trained to its plateau and its MLPs nonlinear, the "
        "gate beats chance held out, the probe moved perplexity, the trained reference learns "
        "the task in the setting compared), measured on the layers, tokens or hops the claim "
        "is about; a failed control gives **inconclusive**, naming it — but only for the "
        "findings its failure could produce: a control whose failure can only understate an "
        "effect (an over-fitted gate scored held out, an under-trained model, noisy lenses) "
        "guards the *negative* findings, and an effect found past it stands, saying so.",
        "* **evidence**: each paper row rests on up to three kinds — the **authors' data** (the "
        "P3 author's result files, CC BY 4.0, re-analysed with the same rule), a "
        "**reproduction** in the paper's setting as near as this machine allows, a "
        "**transfer** to another model — each with its own verdict. The author's files are "
        "read as the author reports them: on their point estimates where they hold points "
        "(their per-layer 'intervals' are unpaired spreads, not intervals of the cost), with "
        "the paper's own denominator. The headline verdict is "
        f"{claims.HEADLINE_RULE}.",
        "* *obtained*: what decides the row — **replicated** with the book's own code, "
        "**reproduced** from the author's data, **derived** by proof, **verified** (an "
        "identity checked symbolically at one small size, not a proof for every size), or "
        "**none** (nothing run or re-analysed decides it).", "",
    ]


def ledger_markdown(profile: str, results_dir: Path | None = None,
                    figure: str | None = None) -> str:
    """The claims ledger page: a picture, counts per kind and verdict, then one table per
    part; every row links to the section that measured it, states both scales, and folds
    the long text. Generated from the results files only."""
    rows = ledger_rows(profile, results_dir)
    lines = intro(profile)
    if figure:
        lines += [f"```{{figure}} {figure}", ":name: ledger-overview", "",
                  "Claims by part and kind, coloured by verdict.", "```", ""]
    lines += counts_section(rows, profile)
    lines += ["## The evidence at a glance", "", "What each verdict rests on: each kind of "
              "evidence with its own verdict and how it reads its figures — the author's "
              "**points** where the files hold points, **paired intervals** where paired data "
              "exist, **intervals** over seeds or windows — the positive control with the "
              "direction it guards (a failed control blocks only the findings its failure could "
              "produce: one that can only understate an effect blocks *no effect*, not "
              "*effect*), and what the row can show (a proof, an identity verified at the sizes "
              "checked, a consistency check of the author's numbers against the author's text, "
              "a test of the book's own construction). The whole ledger is also "
              "{download}`ledger.csv <ledger.csv>` and {download}`ledger.json <ledger.json>`.",
              "", *evidence_glance(rows), ""]
    lines += unstored_section()
    lines += ["## Decision table", "", "Each row's rule as its claim function states it (the "
              "threshold, the control, the interval and its multiplicity), beside the verdict "
              "at each scale; the function's source is folded under its chapter's claims.", "",
              *decision_table(rows, profile), ""]
    for part, title in part_titles().items():
        part_rows = [r for r in rows if r["part"] == part]
        if not part_rows:
            continue
        lines += [f"## {title}", "", ":::{list-table}", ":header-rows: 1",
                  ":widths: 22 10 28 24 16", "",
                  "* - claim", "  - kind", "  - the paper says (its scale)",
                  f"  - this build's scale (`{profile}`)", "  - verdict"]
        for r in part_rows:
            link = f"{{ref}}`{r['id']} <{r['section']}>`" if r.get("section") else r["id"]
            scale = _inline(r["scale"]) or "—"
            lines += [f"* - {link}: {_inline(r['claim'])}", f"  - {r['kind']}",
                      f"  - {_inline(r['paper'])} *({_inline(r['paper_scale'])})*",
                      f"  - {scale}",
                      f"  - `{profile}`: **{r['verdict']}**" + "".join(
                          f"; `{prof}`: **{r[f'verdict_{prof}']}**"
                          + (" (stale)" if r[f"{prof}_row"]["stale"] else "")
                          for prof in COMMITTED if r.get(f"verdict_{prof}")), "",
                      "    ```{dropdown} details", ""]
            for i, d in enumerate(_details(r)):
                lines += ([""] if i else []) + [f"    {d}"]
            lines += ["    ```", ""]
        lines += [":::", ""]
    return "\n".join(lines)


def ledger_text(profile: str, results_dir: Path | None = None) -> str:
    """`nlbudget ledger`: counts per kind and verdict at each scale, then a line per claim."""
    rows = ledger_rows(profile, results_dir)
    width = max(len(v) for v in results.VERDICTS)
    out = [f"claims ledger, profile {profile!r}"]
    for prof in (profile, *[p for p in COMMITTED if p != profile]):
        at = rows if prof == profile else [
            {**r, "verdict": r[f"verdict_{prof}"] or "not run"} for r in rows]
        out += ["", f"at {prof}" + ("" if prof == profile else " (committed)"),
                f"{'kind':<12}" + "".join(f"{v:>{width + 2}}" for v in results.VERDICTS)
                + "   total"]
        for k, row in results.counts(at).items():
            out.append(f"{k:<12}" + "".join(f"{row[v]:>{width + 2}}" for v in results.VERDICTS)
                       + f"{sum(row.values()):>8}")
    ev = {k: {} for k in claims.EVIDENCE}
    for r in rows:
        for k, e in (r.get("evidence") or {}).items():
            ev[k][e["verdict"]] = ev[k].get(e["verdict"], 0) + 1
    out += ["", f"paper rows at {profile} by kind of evidence (its own verdict):"] + [
        f"  {k:<14} " + ", ".join(f"{v} {n}" for v, n in c.items()) for k, c in ev.items()]
    out += ["", f"headline rule: {claims.HEADLINE_RULE}"]
    extra = [p for p in COMMITTED if p != profile]
    out += ["", f"{'claim':<38} {'kind':<11} {profile:<16}" + "".join(f"{p:<16}" for p in extra)]
    def at(r, p):
        stale = " (stale)" * bool((r.get(f"{p}_row") or {}).get("stale"))
        return f"{(r[f'verdict_{p}'] or '—') + stale:<16}"

    for r in rows:
        out.append(f"{r['id']:<38} {r['kind']:<11} {r['verdict']:<16}"
                   + "".join(at(r, p) for p in extra))
    return "\n".join(out)
