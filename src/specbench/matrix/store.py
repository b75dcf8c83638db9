"""The results store: one SQLite file per run, written ahead (schema in docs/structures.md).

A cell row is `running` (committed) before the cell starts and `done` / `partial` / `failed` / `skipped` after
(`partial`: more requests failed than the client's `max_failed_fraction` allows, but not all).
A re-run of the same matrix keeps `done` cells, re-runs `running` ones (a crash interrupted them) and
`failed` and `partial` ones only when asked (`--retry-failed`). WAL mode, autocommit: every write is on disk when the
call returns, so a SIGKILL loses at most the cell in flight. A packed or Ray run has one writer too: the workers'
records are applied by the runner (relay.py); a store another process holds locked is an error at once.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from specbench.errors import UserError
from specbench.matrix.store_meta import check_log_folder, other_matrix
from specbench.matrix.store_rows import (
    BootRow,
    RequestRow,
    StoredRepeat,
    _j,
    _t,
    _unj,
    boot_row,
    insert_boot,
    insert_repeat,
    insert_requests,
    read_repeats,
    repeat_counts,
    request_rows,
)
from specbench.redact import redact_obj
from specbench.stored.schema import ADDED_COLUMNS, COLUMNS, SCHEMA, CellRow, ServerRow

__all__ = ["RequestRow", "Store", "StoredRepeat", "check_log_folder", "lock_store"]




def insert_sql(table: str) -> str:
    """`INSERT INTO table(every column) VALUES(?, ...)`, for writers that fill whole rows (testing/synthetic.py)."""
    cols = COLUMNS[table]
    return f"INSERT INTO {table}({', '.join(cols)}) VALUES({', '.join('?' * len(cols))})"


# how long a write waits for another connection's write lock (WAL: readers never block it); one runner per store
# (runner.py's flock) and one writer per run (relay.py), so only a foreign writer ever makes it wait
BUSY_TIMEOUT_MS = 30_000

SERVER_STATUSES = ("pending", "running", "ready", "stopped", "failed", "skipped")


def lock_store(store_path: Path) -> Any:
    """One runner per store: an exclusive flock on the store file itself, so the lock follows the file's identity
    (device and inode), not its name: a symlink, `./x.db` against an absolute path or a bind mount reach the same
    lock. The kernel releases it even on SIGKILL. flock and SQLite's own POSIX (fcntl) locks do not interact on
    Linux. Returns the open file; closing it releases the lock."""
    import fcntl
    import os

    real = Path(os.path.realpath(store_path))
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(real, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except IsADirectoryError:
        raise UserError(f"{store_path}: is a folder, not a results store") from None
    except OSError as exc:
        raise UserError(f"{store_path}: cannot open the results store ({exc.strerror or exc})") from None
    f = os.fdopen(fd, "rb")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise UserError(f"{store_path}: another `specbench run` is using this store") from None
    except OSError as exc:
        f.close()
        raise UserError(f"{store_path}: cannot lock the results store ({exc.strerror or exc})") from None
    return f


class Store:
    """A thin wrapper over one SQLite connection; every method commits before it returns."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._check_damage()
            self.conn.executescript(SCHEMA)
            self._check_tables()
            for table, cols in ADDED_COLUMNS.items():
                have = {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}
                for name, kind in cols:
                    if name not in have:
                        self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        except sqlite3.OperationalError as exc:
            if _is_damage(exc):
                raise UserError(f"{self.path}: the results store is damaged ({exc})") from None
            raise UserError(f"{self.path}: cannot open the results store ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: not a specbench results store ({exc})") from None
        except OSError as exc:
            raise UserError(f"{self.path}: cannot create the results store ({exc.strerror or exc})") from None
        self.conn.row_factory = sqlite3.Row

    def _check_damage(self) -> None:
        """A damaged file is one line at open, naming the damage SQLite found (`PRAGMA quick_check`: b-tree and
        page structure, O(pages), without the index cross-checks of integrity_check)."""
        rows = [r[0] for r in self.conn.execute("PRAGMA quick_check(3)")]
        if rows != ["ok"]:
            what = " ".join(" ".join(map(str, rows)).replace("*** in database main ***", "").split())
            raise UserError(f"{self.path}: the results store is damaged ({what[:300]})")

    def _check_tables(self) -> None:
        """Tables of the schema's names but other columns: another program's database, not a results store."""
        for table, cols in COLUMNS.items():
            have = {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}
            added = {name for name, _ in ADDED_COLUMNS.get(table, ())}
            missing = [c for c in cols if c not in have and c not in added]
            if missing:
                raise UserError(f"{self.path}: not a specbench results store (table {table} has no column "
                                f"{missing[0]})")

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """One transaction (the connection is in autocommit mode otherwise)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def check_writable(self) -> None:
        """A one-line error at once when another process holds the store's write lock (instead of waiting out
        the busy timeout at the first write)."""
        self.conn.execute("PRAGMA busy_timeout=0")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise UserError(f"{self.path}: the results store is locked by another process ({exc}); "
                            "nothing was run") from None
        finally:
            self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta
    def claim(self, name: str, text: str, path: str, engine: str, replace: bool = False) -> None:
        """Refuse, in one line naming both, a matrix other than the one whose results this store holds
        (other_matrix); `replace` (run --new-matrix) lets it in: its text then replaces the stored one."""
        meta = self.meta()
        why = other_matrix(meta, name, text, engine)
        if why is not None and not replace:
            raise UserError(f"{self.path}: holds the results of {meta.get('matrix_path') or 'another matrix'} "
                            f"({why}); {path} is another matrix: give --store another file, or --new-matrix to run "
                            "it into this store anyway (its text then replaces the stored one)")

    def set_meta(self, items: Mapping[str, object]) -> None:
        """Text values are stored as they are (secrets masked), any other value as its JSON."""
        with self._tx():
            for k, v in items.items():
                self.conn.execute(
                    "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (k, _t(v) if isinstance(v, str) else _j(v)),
                )

    def meta(self) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self.conn.execute("SELECT key, value FROM meta")}

    # -- servers
    def put_server(self, *, server_id: str, phase: int, tp: int, engine: str, settings: Mapping[str, object],
                   command: list[str], env: dict[str, str], verdict: str, plan: Mapping[str, object] | None,
                   status: str) -> None:
        """Insert or refresh a server tuple before it is launched (or skipped)."""
        assert status in SERVER_STATUSES, status
        command, env = redact_obj(list(command)), redact_obj(dict(env))  # learns the secrets before the rest
        self.conn.execute(
            """INSERT INTO servers(server_id, phase, tp, engine, settings_json, command_json, env_json, verdict,
                                   plan_json, status)
               VALUES(?,?,?,?,?,?,?,?,?,?)
               ON CONFLICT(server_id) DO UPDATE SET phase=excluded.phase, tp=excluded.tp, engine=excluded.engine,
                 settings_json=excluded.settings_json, command_json=excluded.command_json, env_json=excluded.env_json,
                 verdict=excluded.verdict, plan_json=excluded.plan_json, status=excluded.status""",
            (server_id, phase, tp, engine, _j(settings), _j(command), _j(env), verdict, _j(plan), status),
        )

    def update_server(self, server_id: str, **fields: Any) -> None:
        """Set columns of a server row; `*_json` columns take Python values."""
        if not fields:
            return
        cols, vals = [], []
        for k, v in fields.items():
            if k == "status":
                assert v in SERVER_STATUSES, v
            cols.append(f"{k}=?")
            vals.append(_j(v) if k.endswith("_json") else _t(v) if isinstance(v, str) else v)
        self.conn.execute(f"UPDATE servers SET {', '.join(cols)} WHERE server_id=?", (*vals, server_id))

    def server(self, server_id: str) -> ServerRow | None:
        row = self.conn.execute("SELECT * FROM servers WHERE server_id=?", (server_id,)).fetchone()
        return _server_row(row) if row else None

    def servers(self) -> list[ServerRow]:
        return [_server_row(r) for r in self.conn.execute("SELECT * FROM servers ORDER BY phase, rowid")]

    # -- cells
    def ensure_cell(self, *, cell_id: str, server_id: str, phase: int, tp: int, algorithm: str, label: str,
                    server: Mapping[str, object], client: Mapping[str, object]) -> None:
        """Create a `pending` row for a cell not seen before; an existing row keeps its status."""
        self.conn.execute(
            """INSERT OR IGNORE INTO cells(cell_id, server_id, phase, tp, algorithm, label, server_json, client_json,
                                           status, attempts)
               VALUES(?,?,?,?,?,?,?,?, 'pending', 0)""",
            (cell_id, server_id, phase, tp, algorithm, label, _j(server), _j(client)),
        )

    def cell_status(self, cell_id: str) -> str | None:
        row = self.conn.execute("SELECT status FROM cells WHERE cell_id=?", (cell_id,)).fetchone()
        return row["status"] if row else None

    def needs_run(self, cell_id: str, retry_failed: bool) -> bool:
        """Resume rule: done is kept; failed re-runs only with retry_failed; anything else (re)runs."""
        status = self.cell_status(cell_id)
        if status == "done":
            return False
        if status in ("failed", "partial"):
            return retry_failed
        return True

    def start_cell(self, cell_id: str, *, server_json: Mapping[str, object] | None = None) -> None:
        """Write-ahead: the row says `running` (and counts the attempt) before any request is sent."""
        with self._tx():
            self.conn.execute(
                """UPDATE cells SET status='running', attempts=attempts+1, started_at=?, ended_at=NULL, reason=NULL,
                                    metrics_json=NULL, log_text=NULL, diagnosis_json=NULL
                   WHERE cell_id=?""",
                (time.time(), cell_id),
            )
            if server_json is not None:
                self.conn.execute("UPDATE cells SET server_json=? WHERE cell_id=?", (_j(server_json), cell_id))
            self.conn.execute("DELETE FROM requests WHERE cell_id=?", (cell_id,))
            self.conn.execute("DELETE FROM repeat_runs WHERE cell_id=?", (cell_id,))

    def continue_cell(self, cell_id: str, *, server_json: Mapping[str, object] | None = None) -> None:
        """A cell that has repeats stored gets more on this boot: they are kept. A `running` cell (a run stopped
        between its repeats) counts the attempt; a `done` one (a repeat-until-decided round) keeps its status and
        metrics until the new repeat is merged (matrix/rounds.py)."""
        with self._tx():
            self.conn.execute("UPDATE cells SET attempts=attempts+1, reason=NULL WHERE cell_id=? AND status='running'",
                              (cell_id,))
            if server_json is not None:
                self.conn.execute("UPDATE cells SET server_json=? WHERE cell_id=?", (_j(server_json), cell_id))

    def finish_cell(self, cell_id: str, status: str, *, reason: str | None = None,
                    metrics: Mapping[str, object] | None = None, clamp: Mapping[str, object] | None = None,
                    requests: Iterable[RequestRow] = (), log_text: str | None = None,
                    diagnosis: Mapping[str, object] | None = None, repeat: StoredRepeat | None = None) -> None:
        """The cell's outcome and its requests (or its last repeat: matrix/store_rows.py), in one transaction."""
        assert status in ("done", "partial", "failed", "skipped", "pending"), status
        with self._tx():
            self.conn.execute(
                """UPDATE cells SET status=?, reason=?, ended_at=?, metrics_json=?, clamp_json=COALESCE(?, clamp_json),
                                    log_text=?, diagnosis_json=? WHERE cell_id=?""",
                (status, _t(reason), time.time(), _j(metrics), _j(clamp), _t(log_text), _j(diagnosis), cell_id),
            )
            insert_requests(self.conn, cell_id, requests)
            if repeat is not None:
                insert_repeat(self.conn, cell_id, repeat)

    # -- repeats and boots (matrix/store_rows.py)
    def put_boot(self, server_id: str, *, started_at: float, log_path: str | None = None,
                 pid: int | None = None) -> None:
        """A boot of a server (numbered 1, 2, ... per server in the order they are recorded)."""
        with self._tx():
            insert_boot(self.conn, server_id, started_at, log_path, pid)

    def put_repeat(self, cell_id: str, repeat: StoredRepeat) -> None:
        """One finished repeat of a cell and its request rows, in one transaction."""
        with self._tx():
            insert_repeat(self.conn, cell_id, repeat)

    def stored_repeats(self, cell_id: str) -> list[StoredRepeat]:
        return read_repeats(self.conn, cell_id)

    def repeat_counts(self) -> dict[str, int]:
        """{cell id: repeats stored}."""
        return repeat_counts(self.conn)

    def boots(self, server_id: str | None = None) -> list[BootRow]:
        if server_id is None:
            return [boot_row(r) for r in self.conn.execute("SELECT * FROM boots ORDER BY rowid")]
        return [boot_row(r) for r in self.conn.execute("SELECT * FROM boots WHERE server_id=? ORDER BY boot",
                                                       (server_id,))]

    def put_gpu_samples(self, cell_id: str, rows: Iterable[tuple[Any, ...]], append: bool = False) -> None:
        """A cell's GPU telemetry (matrix/telemetry.py): (t_s, gpu, name, memory_used_mib, utilization_pct,
        power_w) rows, replacing an earlier attempt's (`append`: added to those of the cell's earlier boots)."""
        with self._tx():
            if not append:
                self.conn.execute("DELETE FROM gpu_samples WHERE cell_id=?", (cell_id,))
            self.conn.executemany("INSERT INTO gpu_samples VALUES(?,?,?,?,?,?,?)",
                                  [(cell_id, *r) for r in rows])

    def skip_cell(self, cell_id: str, reason: str) -> None:
        self.conn.execute(
            "UPDATE cells SET status='skipped', reason=?, ended_at=? WHERE cell_id=?", (_t(reason), time.time(), cell_id)
        )

    def mark_interrupted(self, cell_id: str, reason: str = "interrupted; re-run next time") -> None:
        """The cell stays `running` (so the next run re-runs it) and says why it did not finish."""
        self.conn.execute("UPDATE cells SET reason=? WHERE cell_id=? AND status='running'", (_t(reason), cell_id))

    def set_metrics(self, cell_id: str, metrics: Mapping[str, object]) -> None:
        self.conn.execute("UPDATE cells SET metrics_json=? WHERE cell_id=?", (_j(metrics), cell_id))

    def cell(self, cell_id: str) -> CellRow | None:
        row = self.conn.execute("SELECT * FROM cells WHERE cell_id=?", (cell_id,)).fetchone()
        return _cell_row(row) if row else None

    def cells(self) -> list[CellRow]:
        return [_cell_row(r) for r in self.conn.execute("SELECT * FROM cells ORDER BY phase, rowid")]

    def requests(self, cell_id: str) -> list[RequestRow]:
        """A cell's request rows as written (store_rows.py::RequestRow: one type for the row, both ways)."""
        try:
            return request_rows(self.conn, cell_id)
        except (ValueError, TypeError) as exc:  # a damaged store: a JSON column no longer reads
            raise StoreDamaged(f"a request row of {cell_id} holds no JSON ({exc})") from None


def _js(row: sqlite3.Row, column: str) -> Any:
    """A JSON column decoded (json.loads: its shape is the writer's, stored/schema.py's rows name it)."""
    try:
        return _unj(row[column])
    except (ValueError, TypeError) as exc:  # a damaged store: its JSON text no longer reads
        raise StoreDamaged(f"column {column} holds no JSON ({exc})") from None


def _server_row(r: sqlite3.Row) -> ServerRow:
    """A `servers` row, its columns in DDL order (a bad JSON column is named in that order too)."""
    return {"server_id": r["server_id"], "phase": r["phase"], "tp": r["tp"], "engine": r["engine"],
            "settings": _js(r, "settings_json"), "command": _js(r, "command_json"), "env": _js(r, "env_json"),
            "verdict": r["verdict"], "plan": _js(r, "plan_json"), "server_info": _js(r, "server_info_json"),
            "status": r["status"], "log_path": r["log_path"], "log_text": r["log_text"],
            "diagnosis": _js(r, "diagnosis_json"), "started_at": r["started_at"], "ended_at": r["ended_at"]}


def _cell_row(r: sqlite3.Row) -> CellRow:
    return {"cell_id": r["cell_id"], "server_id": r["server_id"], "phase": r["phase"], "tp": r["tp"],
            "algorithm": r["algorithm"], "label": r["label"], "server": _js(r, "server_json"),
            "client": _js(r, "client_json"), "status": r["status"], "reason": r["reason"], "attempts": r["attempts"],
            "started_at": r["started_at"], "ended_at": r["ended_at"], "metrics": _js(r, "metrics_json"),
            "clamp": _js(r, "clamp_json"), "log_text": r["log_text"], "diagnosis": _js(r, "diagnosis_json")}


class StoreDamaged(Exception):
    """What a read found damaged (a column that no longer decodes); `Store` names its file."""


_DAMAGE_WORDS = ("malformed", "could not decode", "not a database", "file is not a database", "corrupt")


def _is_damage(exc: BaseException) -> bool:
    return any(w in str(exc).lower() for w in _DAMAGE_WORDS)


def damage_error(path: Path, exc: BaseException) -> UserError | None:
    """The one-line error for a damaged store (None when `exc` is no damage: a lock, a full disk)."""
    if isinstance(exc, StoreDamaged) or isinstance(exc, UnicodeDecodeError) or (
            isinstance(exc, sqlite3.DatabaseError) and (_is_damage(exc)
                                                        or not isinstance(exc, sqlite3.OperationalError))):
        return UserError(f"{path}: the results store is damaged ({' '.join(str(exc).split())[:200]}); move it aside "
                         "and run again, "
                         "or give --store a new file")
    return None
