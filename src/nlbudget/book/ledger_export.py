"""The claims ledger as flat records, for a reader's own tools: `nlbudget ledger --format
csv|json` (one record a row: the headline, and per kind of evidence its verdict, how it reads
its figures and its control)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from nlbudget.book.ledger import ledger_rows, reads_text
from nlbudget.verdicts import claims


#: The columns of the ledger's export (`export_rows`): per row, the headline and, per kind of
#: evidence, its verdict, how it reads its figures, and its control (passed, the direction it
#: guards, where it measured).
EXPORT_FIELDS = (
    "id", "part", "chapter", "kind", "claim", "verdict", "shows", "finds", "reason", "needs",
    "control", "positive_control_passed", "positive_control_guards", "positive_control_scope",
    *(f"{k.replace(chr(39), '').replace(' ', '_')}_{f}" for k in claims.EVIDENCE
      for f in ("verdict", "reads", "control_passed", "control_guards", "stands")))


def export_rows(rows: list[dict]) -> list[dict]:
    """The ledger as flat records (`EXPORT_FIELDS`): `nlbudget ledger --format csv|json`."""
    def guards(pc):  # the direction a control guards, where it can fail
        return pc.get("guards", "") if pc.get("passed") is not None else ""

    out = []
    for r in rows:
        pc = r.get("positive_control") or {}
        rec = {**{f: r.get(f, "") for f in EXPORT_FIELDS[:11]}, "positive_control_passed":
               pc.get("passed", ""), "positive_control_guards": guards(pc),
               "positive_control_scope": pc.get("scope", "")}
        for k in claims.EVIDENCE:
            e = (r.get("evidence") or {}).get(k) or {}
            epc, key = e.get("positive_control") or {}, k.replace("'", "").replace(" ", "_")
            rec.update({f"{key}_verdict": e.get("verdict", ""), f"{key}_reads": reads_text(e),
                        f"{key}_control_passed": epc.get("passed", ""),
                        f"{key}_control_guards": guards(epc), f"{key}_stands": e.get("stands", "")})
        out.append({f: ("" if rec[f] is None else rec[f]) for f in EXPORT_FIELDS})
    return out


def ledger_export(profile: str, fmt: str, results_dir: Path | None = None) -> str:
    """The ledger at `profile` as CSV or JSON (`export_rows`)."""
    recs = export_rows(ledger_rows(profile, results_dir))
    if fmt == "json":
        return json.dumps({"profile": profile, "headline_rule": claims.HEADLINE_RULE,
                           "rows": recs}, indent=1, ensure_ascii=False) + "\n"
    if fmt != "csv":
        raise ValueError(f"format {fmt!r}: one of csv, json")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(recs)
    return buf.getvalue()
