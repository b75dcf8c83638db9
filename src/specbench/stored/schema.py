"""The results store's SQLite schema: the tables `specbench run` writes (matrix/store.py creates them), the columns
added after a table's first release, and the column names per table read from the DDL itself."""

from __future__ import annotations

import sqlite3
from typing import TypedDict

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta    (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS servers (server_id TEXT PRIMARY KEY, phase INTEGER, tp INTEGER, engine TEXT,
                      settings_json TEXT,
                      command_json TEXT,
                      env_json TEXT, verdict TEXT,
                      plan_json TEXT,
                      server_info_json TEXT,
                      status TEXT,
                      log_path TEXT, log_text TEXT, diagnosis_json TEXT,
                      started_at REAL, ended_at REAL);
CREATE TABLE IF NOT EXISTS cells   (cell_id TEXT PRIMARY KEY, server_id TEXT, phase INTEGER, tp INTEGER,
                      algorithm TEXT,
                      label TEXT,
                      server_json TEXT, client_json TEXT,
                      status TEXT,
                      reason TEXT, attempts INTEGER DEFAULT 0,
                      started_at REAL, ended_at REAL,
                      metrics_json TEXT,
                      clamp_json TEXT,
                      log_text TEXT, diagnosis_json TEXT);
CREATE TABLE IF NOT EXISTS requests(cell_id TEXT, idx INTEGER, prompt_tokens INTEGER, output_tokens INTEGER,
                      ttft_s REAL, e2e_s REAL, itl_json TEXT, error TEXT,
                      accept_len REAL, spec_verify_ct INTEGER,
                      category TEXT,
                      repeat INTEGER,
                      server_output_tokens INTEGER, counted_tokens INTEGER, count_source TEXT, early_stop INTEGER,
                      sent_at REAL, first_token_at REAL, ended_at REAL, boot INTEGER, max_tokens INTEGER,
                      accept_hist_json TEXT,
                      PRIMARY KEY (cell_id, idx));
CREATE TABLE IF NOT EXISTS gpu_samples(cell_id TEXT, t_s REAL, gpu TEXT, name TEXT, memory_used_mib REAL,
                      utilization_pct REAL, power_w REAL);
CREATE TABLE IF NOT EXISTS repeat_runs(cell_id TEXT, repeat INTEGER, round INTEGER, server_id TEXT, boot INTEGER,
                      started_at REAL, duration_s REAL, client_cpu_s REAL, stall_longest_s REAL, stall_total_s REAL,
                      counters_json TEXT, running_cap INTEGER, running_cap_source TEXT, cache_reset_json TEXT,
                      warmup_errors_json TEXT, reason TEXT,
                      PRIMARY KEY (cell_id, repeat));
CREATE TABLE IF NOT EXISTS boots(server_id TEXT, boot INTEGER, started_at REAL, log_path TEXT, pid INTEGER,
                      PRIMARY KEY (server_id, boot));
"""

# Columns added after a table's first release: a store written before them gains them (NULL) when `specbench run`
# opens it again; stored/read.py reads them as None from stores that never had them.
# `repeat`: which of the cell's `repeats` measured the request (0-based; NULL before repeats existed); `idx` then runs
# on across the repeats (repeat k's requests are k x the per-repeat count onwards), so (cell_id, idx) stays the key.
# `server_output_tokens` (what the server said), `counted_tokens` (what the client counted), `count_source`, `early_stop`
# (load/counting.py; `output_tokens` is the verified count): NULL in stores older than them.
# `sent_at`, `first_token_at`, `ended_at` (epoch seconds), `boot` (which boot of its server), `max_tokens`,
# `accept_hist_json`: what a cell's metrics are re-derived from (matrix/store_rows.py); NULL in stores older than them.
# The tables `repeat_runs` and `boots` are new tables, created empty in an older store.
ADDED_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {"requests": (
    ("category", "TEXT"), ("repeat", "INTEGER"), ("server_output_tokens", "INTEGER"), ("counted_tokens", "INTEGER"),
    ("count_source", "TEXT"), ("early_stop", "INTEGER"), ("sent_at", "REAL"), ("first_token_at", "REAL"),
    ("ended_at", "REAL"), ("boot", "INTEGER"), ("max_tokens", "INTEGER"), ("accept_hist_json", "TEXT"))}



def _columns_of(ddl: str) -> dict[str, tuple[str, ...]]:
    con = sqlite3.connect(":memory:")
    try:
        con.executescript(ddl)
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
        return {t: tuple(r[1] for r in con.execute(f"PRAGMA table_info({t})")) for t in tables}
    finally:
        con.close()


# Column names per table, in DDL order, read from SCHEMA itself (so there is no second list to keep in step)
COLUMNS: dict[str, tuple[str, ...]] = _columns_of(SCHEMA)
SERVER_COLUMNS = COLUMNS["servers"]
CELL_COLUMNS = COLUMNS["cells"]
REQUEST_COLUMNS = COLUMNS["requests"]


# The rows of `servers`, `cells` and `requests` as the store's writer reads them back (matrix/store.py: SELECT *, each
# `<name>_json` column decoded as `<name>`), in DDL order. The JSON columns hold what the writer stored: objects where
# an object was written, their values whatever the matrix and the metrics held.


class ServerRow(TypedDict):
    server_id: str
    phase: int | None
    tp: int | None
    engine: str | None
    settings: dict[str, object] | None
    command: list[str] | None
    env: dict[str, str] | None
    verdict: str | None
    plan: dict[str, object] | None
    server_info: dict[str, object] | None
    status: str | None
    log_path: str | None
    log_text: str | None
    diagnosis: dict[str, object] | None
    started_at: float | None
    ended_at: float | None


class CellRow(TypedDict):
    cell_id: str
    server_id: str | None
    phase: int | None
    tp: int | None
    algorithm: str | None
    label: str | None
    server: dict[str, object] | None
    client: dict[str, object] | None
    status: str | None
    reason: str | None
    attempts: int | None
    started_at: float | None
    ended_at: float | None
    metrics: dict[str, object] | None
    clamp: dict[str, object] | None
    log_text: str | None
    diagnosis: dict[str, object] | None
