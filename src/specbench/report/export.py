"""Cells as flat records for notebooks and spreadsheets: CSV or JSON.

One record per cell. Columns: the `cells` columns; `metrics.<key>` for every `metrics_json` key,
`client.<key>`, `server.<key>`, `clamp.<key>` likewise; `speedup_vs_ar` and `speedup_source` from
tables.speedup_of. In CSV a list or dict value (e.g. `metrics.accept_lengths`) is a JSON string and
None is empty; in JSON values keep their types.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from specbench.errors import UserError
from specbench.report.load import Store
from specbench.report.tables import ar_throughputs, speedup_of

FORMATS = ("csv", "json")
BASE_COLUMNS = ("store", "cell_id", "server_id", "phase", "tp", "algorithm", "label", "concurrency", "status",
                "reason", "attempts", "started_at", "ended_at", "speedup_vs_ar", "speedup_source")


def records(stores: Sequence[Store]) -> list[dict[str, Any]]:
    ar = ar_throughputs(stores)
    out = []
    for store in stores:
        for c in store.cells:
            speedup, source, _ = speedup_of(store, c, ar)
            rec: dict[str, Any] = {
                "store": store.label, "cell_id": c.cell_id, "server_id": c.server_id, "phase": c.phase, "tp": c.tp,
                "algorithm": c.algorithm, "label": c.label, "concurrency": c.concurrency, "status": c.status,
                "reason": c.reason, "attempts": c.attempts, "started_at": c.started_at, "ended_at": c.ended_at,
                "speedup_vs_ar": speedup, "speedup_source": source,
            }
            for prefix, mapping in (("metrics", c.metrics), ("client", c.client), ("server", c.server),
                                    ("clamp", c.clamp)):
                for key in sorted(mapping):
                    rec[f"{prefix}.{key}"] = mapping[key]
            out.append(rec)
    return out


def columns(recs: Sequence[dict[str, Any]]) -> list[str]:
    """BASE_COLUMNS, then every other key in first-seen order grouped by prefix (metrics, client, server, clamp)."""
    extra: list[str] = []
    for rec in recs:
        for key in rec:
            if key not in BASE_COLUMNS and key not in extra:
                extra.append(key)
    order = {"metrics": 0, "client": 1, "server": 2, "clamp": 3}
    extra.sort(key=lambda k: (order.get(k.split(".", 1)[0], 9), k))
    return list(BASE_COLUMNS) + extra


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def to_csv(stores: Sequence[Store]) -> str:
    recs = records(stores)
    cols = columns(recs)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    for rec in recs:
        writer.writerow([_csv_value(rec.get(c)) for c in cols])
    return buf.getvalue()


def to_json(stores: Sequence[Store]) -> str:
    return json.dumps(records(stores), indent=1, default=str) + "\n"


def export(stores: Sequence[Store], fmt: str) -> str:
    fmt = fmt.lower()
    if fmt == "csv":
        return to_csv(stores)
    if fmt == "json":
        return to_json(stores)
    raise UserError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
