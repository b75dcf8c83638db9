"""Which processes a runner may signal, and that none it started outlives it (#23).

- Only processes carrying the runner's mark (a random token in their environment, read from /proc/PID/environ)
  are ever signalled: a crafted store record naming a foreign process by pid, start time and a one-word argv stops
  nothing; neither does a record of a server whose runner is alive.
- Every engine dies with the runner, whatever signal ends it (SIGHUP, SIGQUIT, SIGTERM, SIGKILL), including a
  child that left the server's process group and session (setsid); a clean run leaves no descendant.
- The store lock follows the file, not its name: a second runner through a symlink is refused, and the first
  runner's cells finish.
Real processes throughout; every wait is for an event (a line, a pid gone), with a generous deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proc_helpers import free_port, pid_alive
from run_helpers import ROOT, make_tokenizer, rows, standin_matrix, wait
from specbench.matrix.identity import MARK_ENV, mark_digest, new_mark
from specbench.matrix.orphans import active_record, reap_one

# busy: `make test` runs it once, in its busy pass (every core busy: tools/ci/busy.py), not in the main pass
pytestmark = pytest.mark.busy

SRC = str(ROOT / "src")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _sleeper(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True, env=env)


def _wait_gone(pids: list[int], timeout_s: float = 60) -> None:
    wait(lambda: not any(pid_alive(p) for p in pids), timeout_s, f"processes {pids} to be gone")


def test_a_crafted_record_with_a_one_word_argv_stops_nothing() -> None:
    p = _sleeper()
    try:
        wait(lambda: Path(f"/proc/{p.pid}/cmdline").read_bytes().count(b"\0") >= 3, 30, "the exec")
        rec = active_record(p.pid, ["python3"], "srv-crafted")  # pid, start time, a one-word argv: all match
        rec["mark_sha256"] = mark_digest(new_mark())  # whatever digest it claims, the process carries no mark
        assert reap_one(json.dumps(rec), grace_s=1) is None
        rec.pop("mark_sha256")
        assert reap_one(json.dumps(rec), grace_s=1) is None
        assert p.poll() is None
    finally:
        p.kill()
        p.wait(timeout=10)


def test_a_live_runners_server_is_never_reaped(tmp_path: Path) -> None:
    from specbench.matrix import lifecycle

    proc = lifecycle.ServerProcess(argv=[sys.executable, "-c", "print('up', flush=True); import time; "
                                                               "time.sleep(120)"],
                                   env=dict(os.environ), log_path=tmp_path / "s.log").start()
    try:
        wait(lambda: "up" in proc.log_text(), 30, "the server")
        rec = active_record(proc.pid, proc.argv, "srv-live")
        assert rec["mark_sha256"] == mark_digest(proc.mark or "")
        rec["runner_pid"] = 1  # another runner's record (pid 1 is no runner of ours): its watchdog is alive
        assert reap_one(json.dumps(rec), grace_s=1) is None
        assert proc.alive()
    finally:
        proc.stop(grace_s=5)
    assert not proc.group_alive()


RUNNER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from specbench.matrix import lifecycle
    log = Path(sys.argv[1])
    p = lifecycle.ServerProcess(argv=[sys.executable, "-m", "specbench.testing.standin_server", "--setsid-child",
                                      "--port", sys.argv[2]], env=dict(os.environ), log_path=log).start()
    while "setsid child pid=" not in p.log_text():
        time.sleep(0.05)
    print(p.pid, p.log_text().split("setsid child pid=")[1].split()[0], flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM, signal.SIGKILL],
                         ids=lambda s: signal.Signals(s).name)
def test_every_engine_dies_with_the_runner_whatever_signal_ends_it(tmp_path: Path, sig: int) -> None:
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path / "s.log"), str(free_port())],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC})
    pids: list[int] = []
    try:
        assert runner.stdout is not None
        pids = [int(w) for w in runner.stdout.readline().split()]
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)
        runner.send_signal(sig)
        runner.wait(timeout=30)
        _wait_gone(pids)  # the engine (PDEATHSIG) and its setsid child (the watchdog, by the mark)
    finally:
        if runner.poll() is None:
            runner.kill()
        for p in pids:
            if pid_alive(p):
                os.kill(p, signal.SIGKILL)


def _run(m: Path, store: Path | str, cwd: Path = ROOT) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress"], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})


def _watchdogs(digests: set[str]) -> list[int]:
    """The watchdogs of these marks still running (other runs on the machine have their own)."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                words = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"specbench.matrix.watchdog" in words and any(d.encode() in words for d in digests):
                out.append(int(entry.name))
    return out


def _setsid_pids(log_dir: Path) -> list[int]:
    return [int(x) for f in sorted(log_dir.glob("*.log")) for x in re.findall(r"setsid child pid=(\d+)",
                                                                                 f.read_text())]


def test_a_clean_run_leaves_no_descendant(tmp_path: Path, tokenizer_dir: Path) -> None:
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, tp="1", specs=0, concurrency="[1]",
                       extra_cmd=("--setsid-child",))
    store = tmp_path / "r.sqlite"
    p = _run(m, store)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    children = _setsid_pids(tmp_path / "r-logs")
    assert children, "the stand-in did not start its setsid child"
    assert not any(pid_alive(c) for c in children)  # gone when the run returned, not some time later
    digests = {d for f in (tmp_path / "r-logs").glob("*.log") for d in re.findall(r"mark_sha256=(\w+)",
                                                                                    f.read_text())}
    assert digests and not _watchdogs(digests)  # the run's own watchdogs have exited too


def test_a_hangup_stops_the_run_its_engine_and_the_setsid_child(tmp_path: Path, tokenizer_dir: Path) -> None:
    port = free_port()
    m = standin_matrix(tmp_path / "m.toml", port, tokenizer_dir, tp="1", specs=0, concurrency="[1]",
                       itl_ms=200, num_requests=50, extra_cmd=("--setsid-child",))
    store = tmp_path / "r.sqlite"
    p = _run(m, store)
    try:
        wait(lambda: rows(store, "SELECT 1 FROM cells WHERE status='running'"), 90, "a running cell")
        pgid = json.loads(rows(store, "SELECT value FROM meta WHERE key='active_server'")[0][0])["pgid"]
        wait(lambda: _setsid_pids(tmp_path / "r-logs"), 30, "the setsid child")
        children = _setsid_pids(tmp_path / "r-logs")
        p.send_signal(signal.SIGHUP)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err
    _wait_gone([pgid, *children], 30)
    assert rows(store, "SELECT status FROM cells") == [("running",)]  # re-run next time


def test_a_second_runner_through_a_symlink_is_refused(tmp_path: Path, tokenizer_dir: Path) -> None:
    # the first runner's engine boots for 600 s (readiness waits as long): the runner holds the store until this
    # test interrupts it, whatever the machine's load, and its live engine must survive every second runner
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, tp="1", specs=0, concurrency="[1]",
                       boot_s=600)
    m.write_text(m.read_text().replace("ready_s = 60", "ready_s = 900"))
    (tmp_path / "real").mkdir()
    store = tmp_path / "real" / "r.sqlite"
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "alias.sqlite").symlink_to(store)  # a symlink to the file itself: another name, another folder
    first = _run(m, store)
    try:
        wait(lambda: rows(store, "SELECT value FROM meta WHERE key='active_server' AND value != ''"), 90,
             "the first runner's server")
        pgid = json.loads(rows(store, "SELECT value FROM meta WHERE key='active_server'")[0][0])["pgid"]
        # the same file by other names: a symlink to it, a symlinked folder, a path relative to another folder
        for other, cwd in ((tmp_path / "alias.sqlite", ROOT), (tmp_path / "link" / "r.sqlite", ROOT),
                           (Path("real/r.sqlite"), tmp_path)):
            second = _run(m, other, cwd=cwd)
            _, err2 = second.communicate(timeout=120)
            assert second.returncode == 2, err2
            assert err2.strip().splitlines() == [
                f"specbench: error: {other}: another `specbench run` is using this store"]
            assert pid_alive(pgid) and first.poll() is None  # the live runner's engine was never signalled
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130, err
    _wait_gone([pgid], 30)


def test_the_boot_log_on_disk_is_written_redacted(tmp_path: Path) -> None:
    from specbench.matrix import lifecycle

    key = "sk-live-" + "9f" * 12
    code = ("import sys; print('args: --api-key', sys.argv[1], flush=True); "
            "print('Authorization: Bearer', sys.argv[1], flush=True); print('done', flush=True)")
    proc = lifecycle.ServerProcess(argv=[sys.executable, "-c", code, key, "--api-key", key], env=dict(os.environ),
                                   log_path=tmp_path / "boot.log").start()
    proc.popen.wait(timeout=30)  # type: ignore[union-attr]
    text = proc.log_text()
    proc.stop(grace_s=1)
    assert "done" in text and "--api-key" in text
    assert key not in (tmp_path / "boot.log").read_text()


def test_the_mark_is_in_the_engines_environment_and_nowhere_in_its_store(tmp_path: Path) -> None:
    from specbench.matrix import lifecycle

    code = f"import os; print(os.environ.get({MARK_ENV!r}), flush=True)"
    proc = lifecycle.ServerProcess(argv=[sys.executable, "-c", code], env=dict(os.environ),
                                   log_path=tmp_path / "b.log").start()
    proc.popen.wait(timeout=30)  # type: ignore[union-attr]
    assert proc.mark and proc.mark in proc.log_text()
    rec = active_record(proc.pid, proc.argv, "srv")
    proc.stop(grace_s=1)
    assert proc.mark not in json.dumps(rec)


def test_a_child_that_retitles_itself_like_an_engine_still_carries_the_mark(tmp_path: Path) -> None:
    """vLLM's EngineCore and SGLang's scheduler rename themselves with `setproctitle`, which by default writes the
    title over the environment block: the mark must survive it, or a runner's death leaves that process running."""
    pytest.importorskip("setproctitle")  # a dev dependency (pyproject), as in the engines' own venvs
    from specbench.matrix.identity import marked_pids
    from specbench.matrix.lifecycle import ServerProcess

    # as vLLM names its engine core, made unique to this test (a real EngineCore may run beside it), and longer than
    # the command line: setproctitle's default then reuses the environment block
    title = f"VLLM::EngineCore-{tmp_path.name}-" + "-" * 300
    child = f"import setproctitle, time; setproctitle.setproctitle({title!r}); print('titled', flush=True); time.sleep(120)"
    server = tmp_path / "server.py"
    server.write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {child!r}])
        time.sleep(120)
    """))
    proc = ServerProcess([sys.executable, str(server)], dict(os.environ), tmp_path / "server.log").start()
    try:
        wait(lambda: "titled" in proc.log_text(), 60, "the child to retitle itself")
        mine = title[:60].encode()  # setproctitle cuts the title to the command line's length under SPT_NOENV
        retitled = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).startswith(mine)]
        assert retitled, "setproctitle changed no command line"
        assert proc.mark is not None
        assert {int(p.name) for p in retitled} <= set(marked_pids(proc.mark))  # found by the mark, as the watchdog does
    finally:
        proc.stop(grace_s=5)
    _wait_gone([int(p.name) for p in retitled])


def _cmdline(p: Path) -> bytes:
    try:
        return p.joinpath("cmdline").read_bytes()
    except OSError:
        return b""
