"""Cells as flat records for notebooks and spreadsheets: CSV or JSON.

One record per cell. Columns: the `cells` columns; `metrics.<key>` for every `metrics_json` key,
`client.<key>`, `server.<key>`, `clamp.<key>` likewise; `speedup_vs_ar` and `speedup_source` from
tables.speedup_of; `speedup_ci95`, `speedup_decision`, `tpot_speedup_vs_ar`, `e2e_speedup_vs_ar`, `speedup_lead` and
`decision` from the derived keys (load/speedup.py: as stored, or computed alike for an older store). `jsonl` is per request instead: one JSON object a line per `requests` row (REQUEST_KEYS: the
row's columns with `itl_json` as the list `itl`, and the cell's store, label, algorithm, TP, concurrency and
simulated_accept_len). In CSV a list or dict value (e.g. `metrics.accept_lengths`) is a JSON string and
None is empty; in JSON values keep their types.

Intervals are flat as well (issue 34 item 7): `<name>_ci95_lo` / `<name>_ci95_hi` for the cell's own pooled
throughput, TPOT mean and E2E p50 (`output_throughput`, `tpot_ms_mean`, `e2e_ms_p50`) and for its speedups over AR
(`speedup`, `tpot_speedup`, `e2e_speedup`); `speedup_vs_ar` is the pooled estimate those intervals are centred on
(report/cellrows.py, the same row the report draws). The decision columns: `rank` (in its question, report/
decisions.py), `vs_best_<metric>` and `vs_ar_<metric>` (faster / slower / tie / undecided; best for the best) for
throughput, tpot and e2e, `headline` (its question's answer) and `warnings` (report/integrity.py).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence

from specbench.errors import UserError
from specbench.report.sections import ar_key
from specbench.stored.records import LoadedStore

FORMATS = ("csv", "json", "jsonl")
BASE_COLUMNS = ("store", "cell_id", "server_id", "phase", "tp", "algorithm", "label", "concurrency", "status",
                "reason", "attempts", "started_at", "ended_at", "speedup_vs_ar", "speedup_source", "speedup_ci95",
                "speedup_decision", "tpot_speedup_vs_ar", "e2e_speedup_vs_ar", "speedup_lead", "decision")
INTERVALS = ("output_throughput", "tpot_ms_mean", "e2e_ms_p50", "speedup", "tpot_speedup", "e2e_speedup")
DECISION_COLUMNS = ("rank", "vs_best_throughput", "vs_best_tpot", "vs_best_e2e", "vs_ar_throughput", "vs_ar_tpot",
                    "vs_ar_e2e", "headline", "warnings")


# A flat record (a cell, or a request): column -> value. Open: `metrics.<key>` etc. are whatever the store holds;
# the writers take each value by its type (_csv_text) or as JSON.
Record = dict[str, object]


def _flat(name: str, ci: object) -> Record:
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        return {f"{name}_ci95_lo": ci[0], f"{name}_ci95_hi": ci[1]}
    return {f"{name}_ci95_lo": None, f"{name}_ci95_hi": None}


def records(stores: Sequence[LoadedStore]) -> list[Record]:
    from specbench.report.cellrows import ar_cells, derived_of
    from specbench.report.decisions import questions, with_standings
    from specbench.report.tables import cell_rows

    pairs = cell_rows(stores)
    qs = questions(pairs)
    rows = with_standings([r for _, r in pairs], qs)
    headline = {(r.store, r.cell_id): q.decision.headline.text for q in qs for r in q.rows}
    ars = ar_cells(stores)
    out = []
    for (c, _), row in zip(pairs, rows):
        store = next(s for s in stores if s.label == row.store)
        d = derived_of(c, ars.get(ar_key(store, c))) if c.status == "done" else {}
        rec: Record = {
            "store": row.store, "cell_id": c.cell_id, "server_id": c.server_id, "phase": c.phase, "tp": c.tp,
            "algorithm": c.algorithm, "label": c.label, "concurrency": c.concurrency, "status": c.status,
            "reason": c.reason, "attempts": c.attempts, "started_at": c.started_at, "ended_at": c.ended_at,
            "speedup_vs_ar": row.speedup, "speedup_source": row.speedup_source,
            "speedup_ci95": list(row.speedup_ci) if row.speedup_ci is not None else None,
            "speedup_decision": d.get("speedup_decision"), "tpot_speedup_vs_ar": row.tpot_speedup,
            "e2e_speedup_vs_ar": row.e2e_speedup, "speedup_lead": d.get("speedup_lead"),
            "decision": d.get("decision"),
        }
        cis = {"output_throughput": row.throughput_ci, "tpot_ms_mean": d.get("tpot_ms_mean_ci95"),
               "e2e_ms_p50": d.get("e2e_ms_p50_ci95"), "speedup": row.speedup_ci,
               "tpot_speedup": row.tpot_speedup_ci, "e2e_speedup": row.e2e_speedup_ci}
        for name in INTERVALS:
            rec.update(_flat(name, cis[name]))
        rec.update({"rank": row.rank, **{f"vs_best_{m}": row.vs_best.get(m) for m in ("throughput", "tpot", "e2e")},
                    **{f"vs_ar_{m}": row.vs_ar.get(m) for m in ("throughput", "tpot", "e2e")},
                    "headline": headline.get((row.store, c.cell_id)), "warnings": list(row.warnings)})
        for prefix, mapping in (("metrics", c.metrics), ("client", c.client), ("server", c.server),
                                ("clamp", c.clamp)):
            for key in sorted(mapping):
                rec[f"{prefix}.{key}"] = mapping[key]
        out.append(rec)
    return out


def columns(recs: Sequence[Record]) -> list[str]:
    """BASE_COLUMNS, then every other key in first-seen order grouped by prefix (metrics, client, server, clamp)."""
    extra: list[str] = []
    for rec in recs:
        for key in rec:
            if key not in BASE_COLUMNS and key not in extra:
                extra.append(key)
    order = {"metrics": 1, "client": 2, "server": 3, "clamp": 4}
    extra.sort(key=lambda k: (order.get(k.split(".", 1)[0], 0) if "." in k else 0, k))
    return list(BASE_COLUMNS) + extra


# OWASP CSV injection: a text cell a spreadsheet would read as a formula (or a DDE command) starts with one of these
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_value(value: object) -> str:
    """A cell's text. Text that starts like a formula gets a leading `'` (OWASP's rule: shown, never evaluated);
    numbers are left as they are (a negative number is a number)."""
    text = _csv_text(value)
    if isinstance(value, str) and text.startswith(_FORMULA_START):
        return "'" + text
    return text


def _csv_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def to_csv(stores: Sequence[LoadedStore]) -> str:
    recs = records(stores)
    cols = columns(recs)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    quoted = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)  # a bare CR would split the row otherwise
    for row in ([_csv_value(c) for c in cols], *([_csv_value(rec.get(c)) for c in cols] for rec in recs)):
        (quoted if any("\r" in v for v in row) else writer).writerow(row)
    return buf.getvalue()


def to_json(stores: Sequence[LoadedStore]) -> str:
    return json.dumps(records(stores), indent=1, default=str) + "\n"


REQUEST_KEYS = ("store", "cell_id", "label", "algorithm", "tp", "concurrency", "simulated_accept_len", "repeat", "idx",
                "category", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "itl", "error", "accept_len",
                "spec_verify_ct", "sent_at", "first_token_at", "ended_at", "boot")


def request_records(stores: Sequence[LoadedStore]) -> list[Record]:
    """Every request of every store, with its cell's identity (the inter-token gaps read from the file again: the
    loaded LoadedStore leaves them out)."""
    from specbench.stored.read import _open

    out = []
    for store in stores:
        cells = {c.cell_id: c for c in store.cells}
        con = _open(store.path)
        try:
            have = {r[1] for r in con.execute("PRAGMA table_info(requests)")}
            cols = [c for c in ("cell_id", "idx", "repeat", "category", "prompt_tokens", "output_tokens", "ttft_s",
                                "e2e_s", "itl_json", "error", "accept_len", "spec_verify_ct", "sent_at",
                                "first_token_at", "ended_at", "boot") if c in have]
            rows = con.execute(f"SELECT {', '.join(cols)} FROM requests ORDER BY cell_id, idx").fetchall() if cols \
                else []
        finally:
            con.close()
        for row in rows:
            r = dict(zip(cols, row))
            c = cells.get(str(r.get("cell_id")))
            itl = r.pop("itl_json", None)
            rec: Record = {"store": store.label, "label": c.label if c else None, "algorithm": c.algorithm if c else None,
                   "tp": c.tp if c else None, "concurrency": c.concurrency if c else None,
                   "simulated_accept_len": c.simulated_accept_len if c else None,
                   **r, "itl": json.loads(itl) if isinstance(itl, str) else None}
            out.append({k: rec.get(k) for k in REQUEST_KEYS})
    return out


def to_jsonl(stores: Sequence[LoadedStore]) -> str:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in request_records(stores))


def export(stores: Sequence[LoadedStore], fmt: str) -> str:
    fmt = fmt.lower()
    if fmt == "csv":
        return to_csv(stores)
    if fmt == "json":
        return to_json(stores)
    if fmt == "jsonl":
        return to_jsonl(stores)
    raise UserError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
