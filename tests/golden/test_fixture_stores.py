"""Committed stores are read as they are: a store in WAL mode grows -wal/-shm files beside it when a test reads it
(SQLite creates them even for a read-only connection), and a committed -wal holds rows the .db alone lacks."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from paths import ROOT


def _committed(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in out.stdout.splitlines()]


def test_every_committed_store_is_one_file_in_rollback_journal_mode() -> None:
    stores = _committed("tests/data/*.db", "tests/data/*.sqlite")
    assert len(stores) >= 5  # the GPU runs' stores are committed
    for path in stores:
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        finally:
            conn.close()
        assert mode == "delete", f"{path.name}: journal_mode={mode}; run PRAGMA journal_mode=DELETE on it"
    assert _committed("tests/data/*-wal", "tests/data/*-shm") == []
