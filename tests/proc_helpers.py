"""Small process/network helpers shared by the tests that start real processes."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def free_port() -> int:
    """A port nothing listens on right now (bound and released; the OS does not hand it out again at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
