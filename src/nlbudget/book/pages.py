"""What a chapter page shows besides its figures: the ledger rows it wrote, the rules that
decided them (from source), the paper's scale beside ours, and numbers for the prose (glue)."""

from __future__ import annotations

import inspect
import sys

import pandas as pd

from nlbudget import paths
from nlbudget.verdicts import results


def committed_claims(stem: str, profile: str) -> dict[str, dict]:
    """{claim id: row} of a chapter's committed result at `profile` (`data/results/<profile>/`,
    made once on this CPU and committed), or {} where there is none."""
    try:
        doc = results.read(stem, profile, paths.shipped() / "data" / "results")
    except (OSError, ValueError):
        return {}
    return {c["id"]: c for c in doc.get("claims", [])}


def _control(pc: dict) -> str:
    """A row's positive control: passed or failed (what, measured), or none needed."""
    if not pc:
        return "—"
    if pc.get("passed") is None:
        return pc.get("what", "—")
    return ("passed: " if pc["passed"] else "FAILED: ") + pc.get("what", "") + (
        f" ({pc['measured']})" if pc.get("measured") else "")


def claims_table(doc: dict, committed: tuple[str, ...] = ("full",)) -> pd.DataFrame:
    """The chapter's ledger rows, read back from its results file, each column naming its
    scale; beside them the verdict and figures of each committed scale (`full`) where one
    exists."""
    reg = {r["id"]: r for r in results.claims_registry()}
    prof = doc.get("profile", "?")
    others = {p: committed_claims(doc["chapter"], p) for p in committed if p != prof}
    rows = []
    for c in doc["claims"]:
        parts = "; ".join(f"{p}: {v}" for p, v in c.get("parts", {}).items())
        row = {"claim": c["id"], "kind": c["kind"], "paper says": reg[c["id"]]["paper"],
               f"measured ({prof})": c["measured"], "control": c["control"] or "—",
               f"verdict ({prof})": c["verdict"],
               "positive control": _control(c.get("positive_control") or {}),
               "evidence": "; ".join(f"{k}: {e['verdict']}"
                                     for k, e in (c.get("evidence") or {}).items()) or "—",
               "why": c["reason"] + (f" ({parts})" if parts else ""),
               "would decide it": c["needs"] or "—"}
        for p, rows_p in others.items():
            if rows_p:
                o = rows_p.get(c["id"], {})
                row[f"verdict ({p}, committed)"] = o.get("verdict", "—")
                row[f"measured ({p}, committed)"] = o.get("measured", "—")
        rows.append(row)
    return pd.DataFrame(rows).set_index("claim")


def rules(module) -> str:
    """The source of a chapter's claim functions and thresholds (its `claims` module; given
    the chapter's package, its `claims.py`), for a folded cell."""
    from IPython.display import Code

    module = sys.modules.get(f"{module.__name__}.claims", module)
    consts = [f"{k} = {v!r}" for k, v in vars(module).items()
              if k.isupper() and isinstance(v, (int, float)) and not isinstance(v, bool)]
    src = "\n\n".join(inspect.getsource(f) for f in module.CLAIMS)
    return Code("\n".join(consts) + "\n\n\n" + src, language="python")


def source(*objs):
    """The source of library functions or classes, shown on the page (the mechanism)."""
    from IPython.display import Code

    return Code("\n\n".join(inspect.getsource(o) for o in objs), language="python")


def scale_box(rows: dict[str, tuple[str, str]]) -> "object":
    """The 'paper's scale vs ours' box: {aspect: (paper, this build)} as a small table."""
    from IPython.display import Markdown

    lines = ["| | the paper | this build |", "|---|---|---|"]
    lines += [f"| {k} | {p} | {o} |" for k, (p, o) in rows.items()]
    return Markdown("\n".join(lines))


def glue_all(values: dict) -> None:
    """`glue` every value under its key, hidden, for the prose: strings as Markdown (use
    ``{glue:md}`key` ``), numbers as they are (``{glue:text}`key:.2f` ``)."""
    from IPython.display import Markdown
    from myst_nb import glue

    for k, v in values.items():
        glue(k, Markdown(v) if isinstance(v, str) else v, display=False)


def mixture_table(mixture: dict) -> pd.DataFrame:
    """The ranges of windows dealt from one mixture of documents (`corpora.describe`): how many
    windows and paragraphs each holds, and the first words of one."""
    return pd.DataFrame({k: {"windows": v["windows"], "paragraphs": len(v["paragraphs"]),
                             "first words of one": v["sample"][0]}
                         for k, v in mixture.items()}).T
