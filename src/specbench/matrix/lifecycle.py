"""Server process lifecycle: start in its own process group, log to a file, wait until really ready, stop.

Ready means the engine's health endpoint answers AND one short generation succeeds (an adapter
supplies both). An early exit or a timeout raises `ServerFailed` carrying the whole log. Stopping sends
SIGTERM to the whole group, then SIGKILL after a grace period; before the next boot the caller waits
until the port is free and, where `nvidia-smi` exists, GPU memory is back to its baseline.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


class Interrupted:
    """SIGTERM becomes KeyboardInterrupt (as Ctrl-C); `by_sigterm` says which one came, for forwarding."""

    by_sigterm = False

    @classmethod
    def handler(cls, _signum: int, _frame: Any) -> None:
        cls.by_sigterm = True
        raise KeyboardInterrupt


class ServerFailed(Exception):
    """The server exited early, or did not become ready in time. `log_text` is the whole log."""

    def __init__(self, kind: str, message: str, log_text: str, returncode: int | None = None):
        super().__init__(message)
        self.kind = kind  # "exited" | "timeout" | "start"
        self.message = message
        self.log_text = log_text
        self.returncode = returncode


@dataclass
class ServerProcess:
    """One engine process (and its children) in a fresh session; stdout+stderr go to `log_path`."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: str | None = None
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    stop_interrupted: bool = False  # a Ctrl-C came during stop(): the group was killed at once

    def start(self) -> ServerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab", buffering=0)
        try:
            self.popen = subprocess.Popen(  # argv list, never a shell: matrix values stay single words
                list(self.argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.cwd, start_new_session=True,
            )
        except OSError as exc:
            log.write(f"specbench: cannot start {self.argv[0]!r}: {exc}\n".encode())
            raise ServerFailed("start", f"cannot start {self.argv[0]!r}: {exc}", self.log_text()) from None
        finally:
            log.close()
        self.started_at = time.time()
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def group_alive(self) -> bool:
        """Any process left in the group (children outlive a killed leader)."""
        if self.popen is None:
            return False
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # the leader may be a zombie we have not reaped yet; reap and ask again
        self.popen.poll()
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self, grace_s: float = 30.0) -> str:
        """SIGTERM the group, wait up to `grace_s`, then SIGKILL it. Returns how it ended.

        A Ctrl-C (KeyboardInterrupt) during the grace period kills the group at once: the engine is never left
        running. `stop_interrupted` then says so, for the caller to finish its records and re-raise."""
        if self.popen is None:
            return "not started"
        how = "exited before stop"
        if self.group_alive():
            how = "SIGTERM"
            _killpg(self.pid, signal.SIGTERM)
            try:
                deadline = time.monotonic() + grace_s
                while time.monotonic() < deadline and self.group_alive():
                    time.sleep(0.1)
            except KeyboardInterrupt:
                self.stop_interrupted = True
                how = "SIGKILL (interrupted during the stop grace period)"
            if self.group_alive():
                how = how if self.stop_interrupted else "SIGKILL"
                self._kill_now()
        try:
            self.popen.wait(timeout=5)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            pass
        return how

    def _kill_now(self) -> None:
        """SIGKILL the group and wait (up to 10 s) until it is gone; further Ctrl-Cs do not stop the wait."""
        _killpg(self.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if not self.group_alive():
                    return
                time.sleep(0.05)
            except KeyboardInterrupt:
                self.stop_interrupted = True


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def clean_env(base: dict[str, str], overrides: dict[str, str], drop: Sequence[str] = ()) -> dict[str, str]:
    """The child's environment: ours, minus `drop`, plus the cell's variables (values as given, no shell)."""
    env = {k: v for k, v in base.items() if k not in drop}
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def wait_ready(proc: ServerProcess, base_url: str, health_paths: Sequence[str],
               probe: Callable[[str, float], None], timeout_s: float, poll_s: float = 0.5,
               owned: Callable[[], bool | None] | None = None) -> float:
    """Seconds until a health path answered 200 and `probe(base_url, timeout)` (one generation) succeeded.

    Raises ServerFailed("exited") as soon as the process dies, ServerFailed("timeout") after `timeout_s`: every
    request's timeout is cut to the time left, so it never overshoots by more than one poll interval. `owned()`
    (identity.py) is False while the port is served by a process outside the server's group: such answers do
    not count (a foreign server on the port is never taken for ours).
    """
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    last = "no answer yet"

    def left() -> float:
        return max(0.05, deadline - time.monotonic())

    with httpx.Client(timeout=httpx.Timeout(5.0), trust_env=False) as client:
        while True:
            rc = proc.returncode()
            if rc is not None:
                raise ServerFailed("exited", f"server exited with status {rc} before it was ready",
                                   proc.log_text(), rc)
            healthy = False
            for path in health_paths:
                try:
                    r = client.get(base_url + path, timeout=min(5.0, left()))
                except httpx.HTTPError as exc:
                    last = f"GET {path}: {type(exc).__name__}"
                    continue
                if r.status_code == 200:
                    healthy = True
                    break
                last = f"GET {path}: HTTP {r.status_code}"
            if healthy and owned is not None and owned() is False:
                healthy = False
                last = "the port answers, but from a process outside the server's process group"
            if healthy:
                try:
                    probe(base_url, min(60.0, left()))
                    return time.monotonic() - t0
                except Exception as exc:  # the engine answers health but cannot generate yet
                    last = f"probe generation failed: {exc}"
            if time.monotonic() >= deadline:
                raise ServerFailed("timeout", f"server not ready after {timeout_s:.0f} s ({last})", proc.log_text())
            time.sleep(min(poll_s, left()))


def port_free(host: str, port: int) -> bool:
    """True when a server could bind host:port now (as the engines do, with SO_REUSEADDR)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def wait_port_free(host: str, port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not port_free(host, port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def gpu_memory_used_mib() -> list[int] | None:
    """Used MiB per GPU from `nvidia-smi`, or None where there is no nvidia-smi (CPU machines)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        return [int(float(x)) for x in out.split() if x.strip()]
    except (subprocess.SubprocessError, ValueError, OSError):
        return None


def wait_gpu_baseline(baseline: list[int] | None, timeout_s: float, tolerance_mib: int = 1024,
                      gpus: Sequence[int] | None = None) -> bool:
    """Wait until every GPU (only `gpus`, by nvidia-smi index, when given: a packed run's slot) uses at most its
    baseline + tolerance. True at once without nvidia-smi."""
    if baseline is None:
        return True
    deadline = time.monotonic() + timeout_s
    while True:
        now = gpu_memory_used_mib()
        if now is None or all(n <= b + tolerance_mib for i, (n, b) in enumerate(zip(now, baseline))
                              if gpus is None or i in gpus):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(1.0)
