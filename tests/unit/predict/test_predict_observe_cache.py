"""A store's observations are read once per process while its file stays as it was (predict/observe.py::_of_file),
and again as soon as it changes: in its main file, or only in its write-ahead log, as a store a run is still writing
does (SQLite WAL mode). The real recorded H100 MoE store, copied."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from paths import DATA
from specbench.predict.observe import observations

STORE = DATA / "h100-moe-long-sglang-0.5.15.post1" / "h100-moel.db"


def _copy(tmp_path: Path) -> str:
    path = tmp_path / "store.db"
    shutil.copy(STORE, path)
    path.chmod(0o644)
    return str(path)


def test_a_changed_store_is_read_again(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    first = observations(path)
    assert len(first) == 11 and observations(path) == first
    con = sqlite3.connect(path)
    con.execute("DELETE FROM cells WHERE label = 'eagle3-sim2.5' AND client_json LIKE '%8192%'")
    con.commit()
    con.close()
    assert len(observations(path)) == 11 - 3


def test_a_change_still_in_the_write_ahead_log_is_seen(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"  # stays in the file's header
    con.close()
    assert len(observations(path)) == 11
    stamp = Path(path).stat().st_mtime_ns, Path(path).stat().st_size
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_autocheckpoint=0")
        con.execute("DELETE FROM cells WHERE label = 'ar' AND client_json LIKE '%2048%'")
        con.commit()  # the connection stays open: the change lives in store.db-wal only
        assert (Path(path).stat().st_mtime_ns, Path(path).stat().st_size) == stamp
        assert len(observations(path)) < 11  # AR cells and the speedups over them gone
    finally:
        con.close()
