"""Small process/network helpers shared by the tests that start real processes."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_range() -> tuple[int, int]:
    """This xdist worker's own slice of the ports below the kernel's ephemeral range: a port taken from that range
    (bind to 0) can be handed to any test's outgoing connection before the server binds it (CI twice: 'address
    already in use'), and slices keep two workers from drawing the same port; below 20000 are Ray's default worker
    ports (a gcs port drawn there made `ray start` refuse: 'worker_ports ... used by other components')."""
    low, high = 20000, max(20001, _ephemeral_low() - 16)  # above Ray's worker ports (10002-19999, test_run_ray)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    width = (high - low) // max(1, count)
    start = low + (index % max(1, count)) * width
    return start, start + width


_handed: set[int] = set()


def free_port(block: int = 1) -> int:
    """A port (with the next block - 1 too) nothing listens on, never handed out before in this process, drawn
    below the ephemeral range from this worker's own slice."""
    import random

    start, end = _worker_range()
    for _ in range(500):
        p = random.randrange(start, max(start + 1, end - block))
        ports = range(p, p + block)
        if any(q in _handed for q in ports) or not all(_bindable(q) for q in ports):
            continue
        _handed.update(ports)
        return p
    raise AssertionError(f"no block of {block} free ports in {start}-{end}")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
