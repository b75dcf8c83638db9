"""The results store on a real SQLite file: the documented schema, write-ahead, resume rules."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from paths import ROOT
from specbench.errors import UserError
from specbench.matrix.store import RequestRow, Store

DOCS = ROOT / "docs" / "structures.md"


def _doc_columns() -> dict[str, list[str]]:
    """Column names per table, read from the CREATE TABLE statements in docs/structures.md."""
    text = DOCS.read_text()
    sql = text[text.index("```sql"): text.index("```", text.index("```sql") + 6)]
    sql = re.sub(r"--[^\n]*", "", sql)
    out = {}
    for m in re.finditer(r"CREATE TABLE (\w+)\s*\((.*?)\);", sql, re.S):
        cols = []
        for part in re.split(r",(?![^()]*\))", m.group(2)):
            word = part.strip().split()[0]
            if word.upper() != "PRIMARY":
                cols.append(word)
        out[m.group(1)] = cols
    return out


def _cell(store: Store, cid: str = "cell-a") -> None:
    store.ensure_cell(cell_id=cid, server_id="srv-1", phase=1, tp=1, algorithm="ar", label="ar",
                      server={"tp": 1}, client={"concurrency": 1})


def test_schema_is_exactly_the_documented_one(tmp_path: Path) -> None:
    Store(tmp_path / "r.sqlite").close()
    conn = sqlite3.connect(tmp_path / "r.sqlite")
    for table, cols in _doc_columns().items():
        have = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        assert have == cols, table
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_running_is_on_disk_before_the_cell_ends(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    store = Store(path)
    _cell(store)
    store.start_cell("cell-a")
    other = sqlite3.connect(path)  # another process's view
    assert other.execute("SELECT status, attempts FROM cells WHERE cell_id='cell-a'").fetchone() == ("running", 1)
    store.finish_cell("cell-a", "done", metrics={"output_throughput": 10.0},
                      clamp={"prompt_tokens": 5, "clamped": False},
                      requests=[RequestRow(0, 5, 3, 0.01, 0.05, [0.01, 0.02], None),
                                RequestRow(1, 5, 0, None, 0.01, [], "HTTP 500: boom")])
    row = other.execute("SELECT status, metrics_json, clamp_json FROM cells WHERE cell_id='cell-a'").fetchone()
    assert row[0] == "done" and '"output_throughput": 10.0' in row[1] and '"clamped": false' in row[2]
    reqs = store.requests("cell-a")
    assert [r.idx for r in reqs] == [0, 1]
    assert reqs[0].itl == [0.01, 0.02] and reqs[1].error == "HTTP 500: boom"
    store.close()


def test_resume_rules(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.sqlite")
    for cid in ("done", "failed", "running", "pending", "skipped"):
        _cell(store, cid)
    store.start_cell("done")
    store.finish_cell("done", "done")
    store.start_cell("failed")
    store.finish_cell("failed", "failed", reason="server exited", log_text="whole log")
    store.start_cell("running")  # a crash: never finished
    store.skip_cell("skipped", "planner: max_running_request is zero")
    assert [store.needs_run(c, retry_failed=False) for c in ("done", "failed", "running", "pending", "skipped")] \
        == [False, False, True, True, True]
    assert store.needs_run("failed", retry_failed=True)
    # ensure_cell on a second run keeps what is there
    _cell(store, "done")
    assert store.cell("done")["status"] == "done" and store.cell("done")["attempts"] == 1
    assert store.cell("failed")["log_text"] == "whole log"
    store.start_cell("failed")
    assert store.cell("failed")["attempts"] == 2 and store.cell("failed")["log_text"] is None
    store.close()


def test_a_file_that_is_not_sqlite_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_text("this is not a database " * 100)
    with pytest.raises(UserError, match="not a specbench results store"):
        Store(bad)
