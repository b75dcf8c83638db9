"""Every process a runner starts dies with the runner, whatever signal ends it (SIGKILL included).

Two guards, both keyed on the server's mark (identity.py: a random token in the environment of the server and so
of every descendant):
- the direct child gets `prctl(PR_SET_PDEATHSIG, SIGKILL)` (lifecycle.py's preexec): the kernel kills it when the
  thread that started it dies;
- a watchdog process (`python -m specbench.matrix.watchdog`, in its own session, so a terminal's Ctrl-C or hangup
  does not reach it) reads the mark from its stdin, then waits for EOF there: the runner holds the pipe's other end,
  so EOF comes when the runner closed it (a clean stop) or died (any signal). It then stops every process that
  carries the mark, including descendants that left the server's process group or session (`setsid`), and exits.
Standard library only: it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from specbench.matrix.identity import mark_digest, marked_pids, marked_pids_by_digest


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_marked(mark: str | None = None, grace_s: float = 10.0, digest: str | None = None) -> list[int]:
    """SIGTERM every process carrying the mark (given as the token or its digest), SIGKILL those left after
    `grace_s`. Returns the pids that were signalled. A process without the mark is never signalled."""
    def find() -> list[int]:
        return marked_pids(mark) if mark is not None else marked_pids_by_digest(digest or "")

    if mark is None and not digest:
        return []
    hit = find()
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        left = [p for p in find() if _alive(p)]
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(_alive(p) for p in left):
            time.sleep(0.05)
    return hit


def watched(digest: str) -> bool:
    """A watchdog for this mark is running: its runner is alive (the watchdog outlives it only while it stops
    the mark's processes), so they are no orphans. Read from /proc/PID/cmdline, the digest is its last word."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(os.path.join(entry.path, "cmdline"), "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        if b"specbench.matrix.watchdog" in words and digest.encode() in words:
            return True
    return False


class Watchdog:
    """The runner's end of one watchdog: `close()` (or the runner's death) makes it stop the mark's processes."""

    def __init__(self, mark: str, grace_s: float = 5.0):
        self.mark = mark
        env = {k: v for k, v in os.environ.items() if k != "SPECBENCH_SERVER_MARK"}
        src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.popen: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "specbench.matrix.watchdog", str(grace_s), mark_digest(mark)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env, close_fds=True)
        assert self.popen.stdin is not None
        self.popen.stdin.write(mark.encode() + b"\n")
        self.popen.stdin.flush()

    def close(self, wait_s: float = 15.0) -> None:
        """End the watch: the watchdog stops what is left of the mark's processes, then exits (reaped here)."""
        if self.popen is None:
            return
        p, self.popen = self.popen, None
        try:
            assert p.stdin is not None
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)
        except KeyboardInterrupt:  # a Ctrl-C mid-stop is never absorbed: the marked processes are killed here at
            p.kill()               # once, the watchdog reaped, and the Ctrl-C goes on to the caller
            p.wait(timeout=5)
            stop_marked(self.mark, grace_s=0.0)
            raise


def main() -> None:
    grace_s = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)  # ends only by EOF on stdin (or SIGKILL)
    stdin = sys.stdin.buffer
    mark = stdin.readline().strip().decode()
    while stdin.read(65536):
        pass
    if mark:
        stop_marked(mark, grace_s)


if __name__ == "__main__":
    main()
