"""Server lifecycle against real processes: the instant server, a server that never becomes ready, one
that exits at once, one that ignores SIGTERM, and children that must die with their group."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from proc_helpers import free_port
from specbench.engines.openai.server import openai_probe
from specbench.matrix import lifecycle

# busy: `make test` runs it once, in its busy pass (every core busy: tools/ci/busy.py), not in the main pass
pytestmark = pytest.mark.busy


def _proc(tmp_path: Path, code: str | None = None, argv: list[str] | None = None) -> lifecycle.ServerProcess:
    return lifecycle.ServerProcess(argv=argv or [sys.executable, "-c", code or ""], env=dict(os.environ),
                                   log_path=tmp_path / "server.log")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0


def test_instant_server_ready_then_stopped_and_port_freed(tmp_path: Path) -> None:
    port = free_port()
    p = _proc(tmp_path, argv=[sys.executable, "-m", "specbench.testing.instant_server", "--port", str(port)]).start()
    try:
        secs = lifecycle.wait_ready(p, f"http://127.0.0.1:{port}", ("/health",), openai_probe, timeout_s=30)
        assert 0 < secs < 30
        assert not lifecycle.port_free("127.0.0.1", port)
    finally:
        how = p.stop(grace_s=10)
    assert how == "SIGTERM"
    assert not p.group_alive()
    assert lifecycle.wait_port_free("127.0.0.1", port, 10)
    assert "READY" in p.log_text()


def test_never_ready_times_out_with_the_whole_log_and_dies(tmp_path: Path) -> None:
    code = ("import time\nfor i in range(300):\n    print('loading shard', i, flush=True)\n"
            "print('still loading', flush=True)\ntime.sleep(600)\n")
    p = _proc(tmp_path, code).start()
    t0 = time.monotonic()
    with pytest.raises(lifecycle.ServerFailed) as exc:
        lifecycle.wait_ready(p, f"http://127.0.0.1:{free_port()}", ("/health",), openai_probe, timeout_s=2.0,
                             poll_s=0.1)
    assert 1.9 < time.monotonic() - t0 < 15
    assert exc.value.kind == "timeout"
    assert "loading shard 0\n" in exc.value.log_text and "still loading" in exc.value.log_text  # all of it
    assert p.alive()
    p.stop(grace_s=5)
    assert not p.group_alive()


def test_early_exit_is_detected_at_once_with_its_log(tmp_path: Path) -> None:
    code = "import sys\nprint('AssertionError: max_running_request is zero', flush=True)\nsys.exit(3)\n"
    p = _proc(tmp_path, code).start()
    t0 = time.monotonic()
    with pytest.raises(lifecycle.ServerFailed) as exc:
        lifecycle.wait_ready(p, f"http://127.0.0.1:{free_port()}", ("/health",), openai_probe, timeout_s=60)
    assert time.monotonic() - t0 < 15
    assert exc.value.kind == "exited" and exc.value.returncode == 3
    assert "max_running_request is zero" in exc.value.log_text


def test_sigterm_ignored_then_sigkill_of_the_whole_group(tmp_path: Path) -> None:
    # the leader ignores SIGTERM and starts a child (like an engine's scheduler process)
    code = ("import signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import signal,time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
            "print('child', c.pid, flush=True)\ntime.sleep(600)\n")
    p = _proc(tmp_path, code).start()
    deadline = time.monotonic() + 10
    while "child" not in p.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(p.log_text().split()[1])
    how = p.stop(grace_s=1.0)
    assert how == "SIGKILL"
    assert not p.group_alive()
    assert _gone(child)


def test_a_missing_executable_is_a_start_failure(tmp_path: Path) -> None:
    p = _proc(tmp_path, argv=[str(tmp_path / "no-such-engine"), "--port", "1"])
    with pytest.raises(lifecycle.ServerFailed) as exc:
        p.start()
    assert exc.value.kind == "start" and "no-such-engine" in exc.value.log_text


def test_env_drops_spec_v2_and_sets_cell_variables() -> None:
    env = lifecycle.clean_env({"PATH": "/bin", "SGLANG_ENABLE_SPEC_V2": "1"}, {"X": "a b"}, ["SGLANG_ENABLE_SPEC_V2"])
    assert env == {"PATH": "/bin", "X": "a b"}


def test_gpu_baseline_is_immediate_without_nvidia_smi() -> None:
    used = lifecycle.gpu_memory_used_mib()
    if used is None:
        assert lifecycle.wait_gpu_baseline(None, 0.1)
    else:
        assert lifecycle.wait_gpu_baseline(used, 5.0, tolerance_mib=100_000)


def test_readiness_honours_its_timeout_against_a_port_that_never_answers(tmp_path: Path) -> None:
    """A listener that accepts nothing (connections sit in its backlog): every health GET hangs until its own
    timeout. The wait ends at the readiness timeout plus at most a poll, not plus 5 s per health path (#18)."""
    import socket

    with socket.socket() as hang:
        hang.bind(("127.0.0.1", 0))
        hang.listen(64)
        port = hang.getsockname()[1]
        p = _proc(tmp_path, "import time; time.sleep(600)").start()
        try:
            t0 = time.monotonic()
            with pytest.raises(lifecycle.ServerFailed) as exc:
                lifecycle.wait_ready(p, f"http://127.0.0.1:{port}", ("/health", "/v1/models"), openai_probe,
                                     timeout_s=1.0, poll_s=0.5)
            took = time.monotonic() - t0
        finally:
            p.stop(grace_s=5)
    assert exc.value.kind == "timeout"
    assert took < 1.0 + 0.5 + 1.5  # the old per-request 5 s timeouts took 10 s here


def _ctrl_c_once(said: Callable[[], bool], within_s: float = 120.0) -> threading.Thread:
    """A thread that presses Ctrl-C on this process once `said()` holds (an event the child wrote), or after
    `within_s`; started here, joined by the caller."""
    def send() -> None:
        deadline = time.monotonic() + within_s
        while not said() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=send)
    sender.start()
    return sender


def test_a_ctrl_c_during_the_stop_grace_period_kills_the_group_at_once(tmp_path: Path) -> None:

    # the engine says when the SIGTERM reached it (and ignores it): the Ctrl-C is sent on that line, an event, so
    # it lands inside the 300 s grace period however slow the machine is
    p = _proc(tmp_path, "import os, signal, time\n"
                        "signal.signal(signal.SIGTERM, lambda *a: os.write(1, b'ignored SIGTERM\\n'))\n"
                        "print('up', flush=True)\ntime.sleep(600)\n").start()
    while "up" not in p.log_text():
        time.sleep(0.05)

    sender = _ctrl_c_once(lambda: "ignored SIGTERM" in p.log_text())
    how = p.stop(grace_s=300)
    sender.join()
    assert p.stop_interrupted and how.startswith("SIGKILL")
    assert not p.group_alive()


LISTENER = "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"


def test_who_holds_the_port_and_a_killed_server_is_reaped_within_the_grace(tmp_path: Path) -> None:
    """identity.port_holder tells our server's socket from another process's and from none; a killed server counts
    as exited once reaped (ServerProcess.exits_within), and a cell whose requests failed waits for that
    (cellrun._alive_after) instead of reading a dying port as a foreign server's."""

    from specbench.matrix.cellrun import _alive_after
    from specbench.matrix.identity import port_holder

    port = free_port()
    p = _proc(tmp_path, LISTENER.format(port=port)).start()
    try:
        deadline = time.monotonic() + 30
        while lifecycle.port_free("127.0.0.1", port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert port_holder(port, p.pid) == "group"
        assert port_holder(port, os.getpgid(0)) == "other"  # the server runs in its own session
        assert not p.exits_within(0.2) and _alive_after(p, failed=False) and p.alive()
        os.killpg(p.pid, signal.SIGKILL)
        assert not _alive_after(p, failed=True)
        assert p.exits_within(0) and p.returncode() == -signal.SIGKILL
        assert port_holder(port, p.pid) == "nobody"
    finally:
        p.stop(grace_s=5)


def test_a_ctrl_c_while_the_watchdog_stops_the_marked_processes_reaches_the_caller(tmp_path: Path) -> None:
    """A Ctrl-C that lands in `Watchdog.close()` (the watchdog giving a marked process its SIGTERM grace) was
    absorbed there, and a matrix run went on to its next round. It now kills what carries the mark at once, reaps
    the watchdog and raises. The signal is sent on an event: the marked process's line that it ignored the SIGTERM."""
    import subprocess

    from specbench.matrix import identity
    from specbench.matrix.watchdog import Watchdog, _alive

    mark = identity.new_mark()
    said = tmp_path / "said.txt"
    child = subprocess.Popen(
        [sys.executable, "-c", "import os, signal, sys, time\n"
         "f = open(sys.argv[1], 'a')\n"
         "signal.signal(signal.SIGTERM, lambda *a: (f.write('ignored SIGTERM\\n'), f.flush()))\n"
         "f.write('up\\n'); f.flush()\ntime.sleep(600)\n", str(said)],
        env={**os.environ, identity.MARK_ENV: mark}, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "up" not in (said.read_text() if said.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        dog = Watchdog(mark, grace_s=300.0)
        assert dog.popen is not None
        watchdog = dog.popen

        sender = _ctrl_c_once(lambda: "ignored SIGTERM" in said.read_text())
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            dog.close(wait_s=300.0)
        sender.join()
        assert time.monotonic() - t0 < 120  # not the 300 s grace: the Ctrl-C ended the wait
        assert watchdog.returncode is not None  # reaped
        child.wait(timeout=30)
        assert not _alive(child.pid)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
