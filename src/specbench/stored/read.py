"""Read a results store (SQLite, schema in docs/structures.md) into frozen records (`records.py`).

Read-only and tolerant: a store written by an older or interrupted `specbench run` may lack tables,
columns or metric keys; those read as None / empty and are listed in `LoadedStore.warnings`. Only a path
that is not a file or not SQLite at all is a user error.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.errors import UserError
from specbench.redact import redact_obj, redact_text
from specbench.stored import schema as store_schema
from specbench.stored.impossible import DAMAGED, impossible
from specbench.stored.records import CellRecord, LoadedStore, RequestRecord, ServerRecord, cell_sort_key, natural_key

SQLITE_MAGIC = b"SQLite format 3\x00"

# Columns read per table: the store's own (matrix/store.py, docs/structures.md "Results store"); absent ones read
# as None. The requests' inter-token latencies (`itl_json`) are not read by the report.
SERVER_COLUMNS = store_schema.SERVER_COLUMNS
CELL_COLUMNS = store_schema.CELL_COLUMNS
REQUEST_COLUMNS = tuple(c for c in store_schema.REQUEST_COLUMNS if c != "itl_json")


def _json(text: Any, what: str, warnings: list[str], default: Any) -> Any:
    if text is None or text == "":
        return default
    if not isinstance(text, (str, bytes)):
        return text
    nan: list[bool] = []

    def no_nan(word: str) -> Any:  # no writer stores NaN (a damaged or hand-edited store): read it as no value
        if word == "NaN":
            nan.append(True)
            return None
        return float(word)

    try:
        value = json.loads(text, parse_constant=no_nan)
    except ValueError:
        warnings.append(f"{what}: not JSON, ignored")
        return default
    if nan:
        warnings.append(f"{what}: NaN read as no value")
    return value


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _argv(value: Any) -> tuple[str, ...]:
    return tuple(str(a) for a in value) if isinstance(value, list) else ()


# One row of a table as read: column -> its SQLite value (text, integer, real, blob or NULL; a cell's metrics_json
# already parsed by _redact_cell). A store another program wrote can hold any of them in any column: the records are
# built through _int, _float, _text and _json, which take each value by its type.
Row = dict[str, object]


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _select(con: sqlite3.Connection, table: str, wanted: tuple[str, ...], warnings: list[str],
            skip: tuple[str, ...] = ()) -> list[Row]:
    """The `wanted` columns of every row (None where the table lacks one); `skip`: columns not read (None)."""
    have = _columns(con, table) - set(skip) if skip else _columns(con, table)
    if not have:
        warnings.append(f"table {table!r} missing")
        return []
    later = {name for name, _ in store_schema.ADDED_COLUMNS.get(table, ())}  # older stores lack them: not a warning
    missing = [c for c in wanted if c not in have and c not in later and c not in skip]
    if missing:
        warnings.append(f"table {table!r} lacks columns: {', '.join(missing)}")
    cols = [c for c in wanted if c in have]
    rows = con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
    return [{**dict.fromkeys(wanted), **dict(zip(cols, row))} for row in rows]


def _int(value: object) -> int | None:
    if not isinstance(value, (int, float, str, bytes)):  # None, or nothing int() reads
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float(value: object) -> float | None:
    if not isinstance(value, (int, float, str, bytes)):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _text(value: object) -> str | None:
    """A text column: NULL is None; a number or blob a foreign store put there, its text (as a report shows it)."""
    return value if value is None or isinstance(value, str) else str(value)


def _unreadable(path: Path, exc: BaseException) -> UserError:
    """The one-line error of a store SQLite cannot read: the first line of SQLite's message (else its type)."""
    return UserError(f"{path}: cannot read the SQLite store: "
                     f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


def _open(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise UserError(f"{path}: no such results store")
    if not path.is_file():
        raise UserError(f"{path}: not a file (expected the SQLite results store of `specbench run`)")
    with path.open("rb") as fh:
        head = fh.read(16)
    if head and head != SQLITE_MAGIC:
        raise UserError(f"{path}: not an SQLite results store")
    try:
        return _connect_ro(path, "mode=ro")  # UnicodeDecodeError: a damaged schema text (below)
    except sqlite3.OperationalError:
        # a WAL store in a folder we cannot write: SQLite cannot make its -shm file. A killed runner's last writes
        # are still in the -wal file: read a copy of both where SQLite can build its index; without a WAL, read the
        # file as it is (no runner can be writing it there either)
        wal = path.with_name(path.name + "-wal")
        if wal.is_file() and wal.stat().st_size > 0:
            return _connect_wal_copy(path, wal)
        try:
            return _connect_ro(path, "mode=ro&immutable=1")
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            raise _unreadable(path, exc) from None
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise _unreadable(path, exc) from None


def _connect_wal_copy(path: Path, wal: Path) -> sqlite3.Connection:
    """The store and its write-ahead log copied to a temporary folder (removed at exit) and opened there, so the
    WAL's pages are read; a copy that fails says plainly what cannot be read."""
    import atexit
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="specbench-ro-"))
    atexit.register(shutil.rmtree, tmp, True)
    try:
        shutil.copyfile(path, tmp / path.name)
        shutil.copyfile(wal, tmp / wal.name)
        return _connect_ro(tmp / path.name, "mode=rw")
    except (OSError, sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: its folder is read-only and its write-ahead log {wal.name} (the last writes of a "
                        f"run that was killed) cannot be read: {exc}; copy both files to a writable folder") from None


def _connect_ro(path: Path, query: str) -> sqlite3.Connection:
    """A read-only connection (`file:...?mode=ro`): report and export never write a store."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True)
    # a damaged store can hold bytes that are not UTF-8: read them with replacement characters, not a traceback
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    try:
        con.execute("PRAGMA query_only = 1")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        con.close()
        raise
    return con


@dataclass(frozen=True)
class _Rows:
    """The raw rows of each table, every wanted column present (None where the store lacks it); the requests already
    as records by cell (read row by row: a 20,000-cell store has 320,000 of them)."""

    meta: list[Row]
    servers: list[Row]
    cells: list[Row]
    requests: dict[str, list[RequestRecord]]
    warnings: list[str]  # absent tables and columns


def _redact_cell(r: Row, warnings: list[str], seen: dict[str, str] | None = None,
                 flat_seen: dict[str, dict[str, object]] | None = None) -> Row:
    """A cell row with its secrets masked: text columns as text; metrics_json parsed first and masked as an object
    (redact_obj: by key name, strings as text), which is what its text would give without running the text rules over
    every number of a 20,000-cell store."""
    seen = {} if seen is None else seen  # one text masked once: the cells of a server repeat its server_json
    flat_seen = {} if flat_seen is None else flat_seen  # one set of metric strings masked once

    def text(v: str) -> str:
        if v not in seen:
            seen[v] = redact_text(v)
        return seen[v]

    out = {k: text(v) if isinstance(v, str) and k != "metrics_json" else v for k, v in r.items()}
    m = _json(r.get("metrics_json"), f"cells[{r.get('cell_id')}].metrics_json", warnings, None)
    if isinstance(m, dict):  # only the items holding a string can hold a secret: redact_obj of those is the same
        texts = {k: v for k, v in m.items() if _has_text(v)}
        if texts:
            flat = all(isinstance(v, str) for v in texts.values())  # the usual case: a memo by value
            key = "\0".join(f"{k}\1{v}" for k, v in sorted(texts.items())) if flat else None
            if key is not None and key in flat_seen:
                masked = flat_seen[key]  # str -> str: shared between cells, never changed in place
            else:
                masked = redact_obj(texts)
                if key is not None:
                    flat_seen[key] = masked
            m = {**m, **masked}
    out["metrics_json"] = m
    return out


def _has_text(v: object) -> bool:
    """A string anywhere inside (redact_obj masks string values only: a mapping's keys pass as they are)."""
    if isinstance(v, str):
        return True
    if isinstance(v, dict):
        return any(_has_text(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_text(x) for x in v)
    return False


def _read_rows(path: Path, logs: bool = True) -> _Rows:
    con = _open(path)
    warnings: list[str] = []
    try:
        try:
            meta_rows = _select(con, "meta", ("key", "value"), warnings)
            server_rows = _select(con, "servers", SERVER_COLUMNS, warnings,
                                  skip=() if logs else ("log_text",))
            cell_rows = _select(con, "cells", CELL_COLUMNS, warnings)
            requests = _read_requests(con, warnings)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            raise _unreadable(path, exc) from None
    finally:
        con.close()
    # secrets masked on the way in (specbench/redact.py), so a store written before redaction existed is shared safely
    meta_rows, server_rows = ([{k: redact_text(v) if isinstance(v, str) else v for k, v in r.items()}
                               for r in rows] for rows in (meta_rows, server_rows))
    seen: dict[str, str] = {}
    flat_seen: dict[str, dict[str, object]] = {}
    cell_rows = [_redact_cell(r, warnings, seen, flat_seen) for r in cell_rows]
    return _Rows(meta_rows, server_rows, cell_rows, requests, warnings)


def _read_requests(con: sqlite3.Connection, warnings: list[str]) -> dict[str, list[RequestRecord]]:
    """Every request row by cell, in idx order (error texts masked), read one row at a time."""
    have = _columns(con, "requests")
    if not have:
        warnings.append("table 'requests' missing")
        return {}
    later = {name for name, _ in store_schema.ADDED_COLUMNS.get("requests", ())}
    missing = [c for c in REQUEST_COLUMNS if c not in have and c not in later]
    if missing:
        warnings.append(f"table 'requests' lacks columns: {', '.join(missing)}")
    cols = ", ".join(c if c in have else "NULL" for c in REQUEST_COLUMNS)
    at = {c: i for i, c in enumerate(REQUEST_COLUMNS)}
    out: dict[str, list[RequestRecord]] = {}
    for row in con.execute(f"SELECT {cols} FROM requests"):
        cid = row[at["cell_id"]]
        if cid is None:
            continue
        err = row[at["error"]]
        out.setdefault(str(cid), []).append(RequestRecord(
            idx=_int(row[at["idx"]]) or 0, repeat=_int(row[at["repeat"]]), category=row[at["category"]],
            prompt_tokens=_int(row[at["prompt_tokens"]]), output_tokens=_int(row[at["output_tokens"]]),
            ttft_s=_float(row[at["ttft_s"]]), e2e_s=_float(row[at["e2e_s"]]), accept_len=_float(row[at["accept_len"]]),
            spec_verify_ct=_int(row[at["spec_verify_ct"]]), error=redact_text(err) if isinstance(err, str) else err,
            sent_at=_float(row[at["sent_at"]]), first_token_at=_float(row[at["first_token_at"]]),
            ended_at=_float(row[at["ended_at"]]), boot=_int(row[at["boot"]])))
    for v in out.values():
        v.sort(key=lambda q: q.idx)
    return out


def _server_record(r: Row, warnings: list[str]) -> ServerRecord:
    where = f"servers[{r['server_id']}]"
    return ServerRecord(
        server_id=str(r["server_id"]),
        phase=_int(r["phase"]),
        tp=_int(r["tp"]),
        engine=_text(r["engine"]),
        settings=_mapping(_json(r["settings_json"], f"{where}.settings_json", warnings, {})),
        command=_argv(_json(r["command_json"], f"{where}.command_json", warnings, [])),
        verdict=_text(r["verdict"]),
        plan=_json(r["plan_json"], f"{where}.plan_json", warnings, None),
        status=_text(r["status"]),
        log_path=_text(r["log_path"]),
        log_text=_text(r["log_text"]),
        diagnosis=_json(r["diagnosis_json"], f"{where}.diagnosis_json", warnings, None),
    )


def _cell_record(r: Row, warnings: list[str],
                 reqs: Mapping[str, list[RequestRecord]] | None = None) -> CellRecord:
    cid = str(r["cell_id"])
    metrics = _mapping(_json(r["metrics_json"], f"cells[{cid}].metrics_json", warnings, {}))
    status, reason = str(r["status"] or "pending"), _text(r["reason"])
    why = impossible(status, metrics)
    if why is not None:  # numbers no run writes: the cell is shown damaged, none of its numbers (impossible.py)
        warnings.append(f"cells[{cid}]: {why}: shown as damaged, without its numbers")
        status, reason, metrics = DAMAGED, f"damaged store: {why}", {}
    listed = metrics.get("accept_lengths")
    if isinstance(listed, list) and listed:
        accepts = tuple(float(a) for a in listed
                        if isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a))
    else:
        # requests.accept_len of the successful requests, in idx order (used when accept_lengths is absent)
        accepts = tuple(q.accept_len for q in (reqs or {}).get(cid, []) if q.ok and q.accept_len is not None
                        and status != DAMAGED)
    return CellRecord(
        cell_id=cid,
        server_id=_text(r["server_id"]),
        phase=_int(r["phase"]),
        tp=_int(r["tp"]),
        algorithm=_text(r["algorithm"]),
        label=str(r["label"] or r["algorithm"] or cid),
        status=status,
        reason=reason,
        attempts=_int(r["attempts"]) or 0,
        started_at=_float(r["started_at"]),
        ended_at=_float(r["ended_at"]),
        metrics=metrics,
        server=_mapping(_json(r["server_json"], f"cells[{cid}].server_json", warnings, {})),
        client=_mapping(_json(r["client_json"], f"cells[{cid}].client_json", warnings, {})),
        clamp=_mapping(_json(r["clamp_json"], f"cells[{cid}].clamp_json", warnings, {})),
        log_text=_text(r["log_text"]),
        diagnosis=_json(r["diagnosis_json"], f"cells[{cid}].diagnosis_json", warnings, None),
        accept_lengths=accepts,
        requests=tuple((reqs or {}).get(cid, ())),
    )


def load_store(path: str | Path, label: str | None = None, *, logs: bool = True) -> LoadedStore:
    """Read one store. Raises UserError when the file is missing or not SQLite. `logs` False leaves the servers'
    log_text unread (None): the step-cost model's observations never read a log, and masking secrets in a store's
    logs was ~80 % of reading it (4.7 s over the recorded stores; benchmarks/RESULTS.md seventh session)."""
    path = Path(path)
    rows = _read_rows(path, logs)
    warnings = rows.warnings
    meta = {str(r["key"]): "" if r["value"] is None else str(r["value"]) for r in rows.meta if r["key"] is not None}
    servers = [_server_record(r, warnings) for r in rows.servers if r["server_id"] is not None]
    reqs = rows.requests
    cells = [_cell_record(r, warnings, reqs) for r in rows.cells if r["cell_id"] is not None]
    cells.sort(key=cell_sort_key)
    return LoadedStore(
        path=path,
        label=label or path.stem,
        meta=meta,
        servers=tuple(sorted(servers, key=lambda s: (s.phase or 0, s.tp or 0, natural_key(s.server_id)))),
        cells=tuple(cells),
        warnings=tuple(warnings),
    )
