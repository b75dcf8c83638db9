"""Is the process listening on the runner's port the server this runner started?

Read from the kernel, not asked of the server: the listening sockets on the port (/proc/net/tcp, tcp6; state
0A = LISTEN) and the socket inodes held open by the processes of the server's process group (/proc/PID/fd).
Engine-agnostic, and a foreign server (another runner's, a leftover) on the same port can never answer as ours.
None where /proc cannot tell (not Linux): the caller then trusts the port as before.
"""

from __future__ import annotations

import os
from pathlib import Path

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


def served_by_group(port: int, pgid: int) -> bool | None:
    """True when a process of group `pgid` holds a socket listening on `port`, False when another process (or
    nobody) listens there, None when /proc cannot tell."""
    inodes = listening_inodes(port)
    if inodes is None:
        return None
    if not inodes:
        return False
    readable = False
    for pid in group_pids(pgid):
        held = socket_inodes(pid)
        if held is None:
            continue
        readable = True
        if held & inodes:
            return True
    return False if readable else None
