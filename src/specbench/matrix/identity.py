"""Is the process listening on the runner's port the server this runner started?

Read from the kernel, not asked of the server: the listening sockets on the port (/proc/net/tcp, tcp6; state
0A = LISTEN) and the socket inodes held open by the processes of the server's process group (/proc/PID/fd).
Engine-agnostic, and a foreign server (another runner's, a leftover) on the same port can never answer as ours.
None where /proc cannot tell (not Linux): the caller then trusts the port as before.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

_LISTEN = "0A"


def listening_inodes(port: int) -> set[int] | None:
    """Inodes of the TCP sockets listening on `port` (any address); None when /proc/net is not readable."""
    found: set[int] = set()
    readable = False
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            parts = line.split()
            if len(parts) < 10 or parts[3] != _LISTEN:
                continue
            if int(parts[1].rsplit(":", 1)[1], 16) == port:
                found.add(int(parts[9]))
    return found if readable else None


def group_pids(pgid: int) -> list[int]:
    """The processes whose process group is `pgid` (/proc/PID/stat field 5)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            out.append(int(entry.name))
    return out


def socket_inodes(pid: int) -> set[int] | None:
    """The socket inodes `pid` holds open; None when its fd table is not readable."""
    out: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def port_holder(port: int, pgid: int) -> Literal["group", "other", "nobody"] | None:
    """Who listens on `port`: a process of group `pgid` (`group`), someone else (`other`), no one (`nobody`: the
    server closed its socket or died), None when /proc cannot tell."""
    inodes = listening_inodes(port)
    if inodes is None:
        return None
    if not inodes:
        return "nobody"
    readable = False
    for pid in group_pids(pgid):
        held = socket_inodes(pid)
        if held is None:
            continue
        readable = True
        if held & inodes:
            return "group"
    return "other" if readable else None


def served_by_group(port: int, pgid: int) -> bool | None:
    """True when a process of group `pgid` holds a socket listening on `port`, False when another process (or
    nobody) listens there, None when /proc cannot tell."""
    who = port_holder(port, pgid)
    return None if who is None else who == "group"


# -- the runner's mark: a random token in the environment of every process it starts (and so of their children,
# whatever session or group they move to). Only a process that carries it is ever signalled (orphans.py,
# watchdog.py, lifecycle.py): pid, start time and command line can be read (and so matched) by anyone, the
# environment of a process only by its owner, and the token is never written anywhere but a child's environment.
MARK_ENV = "SPECBENCH_SERVER_MARK"


def new_mark() -> str:
    """A fresh random token for one server's processes."""
    import secrets

    return secrets.token_hex(16)


def mark_digest(mark: str) -> str:
    """What a store records of a mark: its SHA-256, so the store never holds the token itself."""
    import hashlib

    return hashlib.sha256(mark.encode()).hexdigest()


def environ_mark(pid: int) -> str | None:
    """The value of MARK_ENV in `pid`'s environment (/proc/PID/environ), None when absent or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = MARK_ENV.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


def carries_mark(pid: int, digest: str) -> bool:
    """`pid` carries the mark whose digest is `digest` (a crafted store naming a foreign pid fails here)."""
    mark = environ_mark(pid)
    return mark is not None and mark_digest(mark) == digest


def marked_pids(mark: str) -> list[int]:
    """Every process (but this one) whose environment carries `mark`: a server and all its descendants, including
    those that left its process group or session."""
    out = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me and environ_mark(int(entry.name)) == mark:
            out.append(int(entry.name))
    return out


def marked_pids_by_digest(digest: str) -> list[int]:
    """`marked_pids` for a mark known only by its digest (a store's record)."""
    out = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me and carries_mark(int(entry.name), digest):
            out.append(int(entry.name))
    return out
