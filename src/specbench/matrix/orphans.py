"""Servers a killed `specbench run` left behind: recorded before they can outlive the runner, stopped by the next run.

Each running server has a meta row `active_server` (serial runs, and slot 0 of a packed run) or `active_server.N`
(slot N of a packed run, one per concurrently running server): its process group id, its start time in clock
ticks since boot, argv, server id, the digest of the server's mark (identity.py: a random token only the
processes this runner started carry in their environment) and the runner's own pid and start time. The next run
stops the processes that carry that mark, and nothing else: a recycled pid, a crafted record naming a foreign
process (whose pid, start time and command line anyone can read in /proc) and a server whose runner is still alive
(a second runner reaching the same store by another path) are all left alone.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, TypedDict

from specbench.matrix import identity
from specbench.matrix.watchdog import stop_marked, watched

ACTIVE_KEY = "active_server"


class MetaStore(Protocol):
    def set_meta(self, items: Mapping[str, str]) -> None: ...
    def meta(self) -> dict[str, str]: ...


def active_key(slot: int = 0) -> str:
    return ACTIVE_KEY if slot == 0 else f"{ACTIVE_KEY}.{slot}"


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, an identity
    that survives exec (a shebang script's cmdline starts with its interpreter, not our argv[0])."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


class ActiveRecord(TypedDict):
    """The JSON of an `active_server` meta row (key order as written)."""

    pgid: int
    start: int | None  # clock ticks since boot (start_ticks)
    argv: list[str]
    server_id: str
    host: str
    mark_sha256: str | None  # identity.py: the digest of the mark the server's processes carry
    runner_pid: int
    runner_start: int | None


def active_record(pgid: int, argv: list[str], server_id: str) -> ActiveRecord:
    """The meta value that lets a later run find this server group (written right after the server starts)."""
    mark = identity.environ_mark(pgid)
    return {"pgid": pgid, "start": start_ticks(pgid), "argv": argv, "server_id": server_id,
            "host": socket.gethostname(), "mark_sha256": identity.mark_digest(mark) if mark else None,
            "runner_pid": os.getpid(), "runner_start": start_ticks(os.getpid())}


def record_active(store: MetaStore, pgid: int, argv: list[str], server_id: str, slot: int = 0) -> None:
    store.set_meta({active_key(slot): json.dumps(active_record(pgid, argv, server_id))})


def clear_active(store: MetaStore, slot: int = 0) -> None:
    store.set_meta({active_key(slot): ""})


def reap_orphans(store: MetaStore, grace_s: float = 10.0) -> list[str]:
    """Stop every server group recorded as active (by a run that did not get to stop it); one message each."""
    msgs = []
    for key, raw in sorted(store.meta().items()):
        if key != ACTIVE_KEY and not key.startswith(ACTIVE_KEY + "."):
            continue
        msg = reap_one(raw, grace_s)
        if msg:
            msgs.append(msg)
        if raw:
            store.set_meta({key: ""})
    return msgs


def reap_orphan(store: MetaStore, grace_s: float = 10.0) -> str | None:
    """`reap_orphans` as one message (None when nothing was left behind)."""
    msgs = reap_orphans(store, grace_s)
    return "; ".join(msgs) if msgs else None


def reap_one(raw: str, grace_s: float = 10.0) -> str | None:
    """Stop the group of one active record if its leader is still the process that was started."""
    if not raw:
        return None
    try:
        info = json.loads(raw)
        pgid = int(info["pgid"])
    except (ValueError, KeyError, TypeError):
        return None
    if info.get("host", socket.gethostname()) != socket.gethostname():  # a Ray task's server on another node
        return None
    digest = info.get("mark_sha256")
    if not isinstance(digest, str) or not digest:  # a record without a mark (or a crafted one) stops nothing
        return None
    own = info.get("runner_pid") == os.getpid()  # this process started it (a cancelled Ray task stops its own)
    if not own and (_runner_alive(info) or watched(digest)):  # never take a live runner's server for an orphan
        return None
    if not stop_marked(digest=digest, grace_s=grace_s):
        return None
    return f"stopped server {info.get('server_id')} (pgid {pgid}) left by an interrupted run"


def _runner_alive(info: Mapping[str, object]) -> bool:
    """The run that recorded the server is still running (and is not this process). `info` is a parsed record
    (a stored one may be old or crafted): a pid or start time that is no number is no live runner."""
    pid, start = info.get("runner_pid"), info.get("runner_start")
    if not isinstance(pid, (int, float, str)) or not isinstance(start, (int, float, str, type(None))):
        return False
    try:
        now = start_ticks(int(pid))
        return now is not None and start is not None and now == int(start)
    except ValueError:
        return False
