"""Servers a killed `specbench run` left behind: recorded before they can outlive the runner, stopped by the next run.

Each running server has a meta row `active_server` (serial runs, and slot 0 of a packed run) or `active_server.N`
(slot N of a packed run, one per concurrently running server): its process group id, its start time in clock
ticks since boot, argv and server id. The next run stops every recorded group whose leader is still the same
process (same pid and start time); a recycled pid fails the start-time check and is left alone.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any, Protocol

ACTIVE_KEY = "active_server"


class MetaStore(Protocol):
    def set_meta(self, items: dict[str, Any]) -> None: ...
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


def active_record(pgid: int, argv: list[str], server_id: str, **extra: Any) -> dict[str, Any]:
    """The meta value that lets a later run find this server group (written right after the server starts)."""
    return {"pgid": pgid, "start": start_ticks(pgid), "argv": argv, "server_id": server_id,
            "host": socket.gethostname(), **extra}


def record_active(store: MetaStore, pgid: int, argv: list[str], server_id: str, slot: int = 0,
                  **extra: Any) -> None:
    store.set_meta({active_key(slot): json.dumps(active_record(pgid, argv, server_id, **extra))})


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
        start = info.get("start")
    except (ValueError, KeyError, TypeError):
        return None
    if info.get("host", socket.gethostname()) != socket.gethostname():  # a Ray task's server on another node
        return None
    now = start_ticks(pgid)
    if now is None or start is None or now != int(start):
        return None
    if not _is_our_server(pgid, info.get("argv")):  # a crafted or stale record must not stop a foreign group
        return None
    stop_group(pgid, grace_s)
    return f"stopped server {info.get('server_id')} (pgid {pgid}) left by an interrupted run"


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [w.decode(errors="replace") for w in raw.split(b"\0") if w]


def _is_our_server(pgid: int, argv: Any) -> bool:
    """The recorded group is still the server specbench started: its leader leads its own process group and runs
    the recorded command (the launch's words after the program, in order, end its command line; the program itself
    may show as its interpreter, so it is not compared)."""
    if not isinstance(argv, list) or not argv:
        return False
    try:
        if os.getpgid(pgid) != pgid:
            return False
    except OSError:
        return False
    words = _cmdline(pgid)
    tail = [str(a) for a in argv[1:]]
    return words is not None and (not tail or words[-len(tail):] == tail)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM the group, SIGKILL it after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        if not group_alive(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and group_alive(pgid):
            time.sleep(0.1)
