"""Faults around the servers a run starts (#18): a foreign server on the runner's port is never measured (two
runners, two stores, one port); a second Ctrl-C during the engine's stop grace period still stops it; a store
another process holds locked is a one-line error at once."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from proc_helpers import free_port, pid_alive
from run_helpers import ROOT, cli, make_tokenizer, rows, served, standin_matrix, wait

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
# busy: `make test` runs it once, in its busy pass (every core busy: tools/ci/busy.py), not in the main pass
pytestmark = [pytest.mark.slow, pytest.mark.busy]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _run(m: Path, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_runners_on_one_port_never_measure_each_others_server(tmp_path: Path, tokenizer_dir: Path) -> None:
    port = free_port()
    # A's engine takes 20 s to bind the port; B (started meanwhile, the port still free) binds it at once and
    # serves its own long cells: A's readiness probes get answers from B's server all along
    a = standin_matrix(tmp_path / "a.toml", port, tokenizer_dir, tp="1", specs=0, concurrency="[1]", boot_s=20)
    b = standin_matrix(tmp_path / "b.toml", port, tokenizer_dir, tp="1", specs=0, concurrency="[1, 2]", boot_s=0,
                       itl_ms=40, num_requests=20)
    sa, sb = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    pa = _run(a, sa)
    pb = None
    try:
        wait(lambda: rows(sa, "SELECT 1 FROM servers WHERE status='running'"), 60, "A's server to start")
        pb = _run(b, sb)
        wait(lambda: rows(sb, "SELECT 1 FROM cells WHERE status='running'"), 60, "B's first cell")
        _, err_a = pa.communicate(timeout=120)
        _, err_b = pb.communicate(timeout=120)
    finally:
        for p in (pa, pb):
            if p is not None and p.poll() is None:
                p.kill()
    assert pb.returncode == 0, err_b
    assert rows(sb, "SELECT status FROM cells") == [("done",), ("done",)]
    assert pa.returncode == 1
    (status, reason), = rows(sa, "SELECT status, reason FROM cells")
    assert status == "failed" and "server exited" in reason  # A's own server could not bind: never "done"
    assert rows(sa, "SELECT count(*) FROM requests") == [(0,)]


def test_a_second_ctrl_c_during_the_stop_grace_period_kills_the_engine(tmp_path: Path, tokenizer_dir: Path) -> None:
    port = free_port()
    # the engine ignores SIGTERM, the grace period is 120 s: only the second Ctrl-C can end it early
    m = standin_matrix(tmp_path / "m.toml", port, tokenizer_dir, tp="1", specs=0, concurrency="[1]", boot_s=0,
                       itl_ms=40, num_requests=20, stop_s=120, extra_cmd=("--ignore-sigterm",))
    store = tmp_path / "r.sqlite"
    proc = _run(m, store)
    try:
        pgid = json.loads(wait(lambda: (rows(store, "SELECT value FROM meta WHERE key='active_server'")
                                        or [("",)])[0][0], 60, "the server"))["pgid"]
        wait(lambda: served(port) >= 2, 60, "the cell under way")
        proc.send_signal(signal.SIGINT)
        wait(lambda: rows(store, "SELECT 1 FROM cells WHERE reason LIKE 'interrupted%'"), 30, "the first Ctrl-C")
        # the runner is in the stop's grace period once the engine says it ignored the SIGTERM (an event, not a guess)
        wait(lambda: any("ignored SIGTERM" in f.read_text() for f in (tmp_path / "r-logs").glob("*.log")), 60,
             "the SIGTERM to reach the engine")
        assert pid_alive(pgid)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)  # far inside the 120 s grace period
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not pid_alive(pgid)
    assert rows(store, "SELECT status FROM servers") == [("stopped",)]
    assert rows(store, "SELECT value FROM meta WHERE key='active_server'") == [("",)]


def test_a_locked_store_is_one_line_at_once(tmp_path: Path, tokenizer_dir: Path) -> None:
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, tp="1", specs=0, concurrency="[1]")
    store = tmp_path / "r.sqlite"
    from specbench.matrix.store import Store

    Store(store).close()
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program writing to it
    try:
        r = cli("run", str(m), "--store", str(store), "--no-progress", timeout=20)  # not the 30 s busy wait
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"specbench: error: {store}: the results store is locked by another process (database is locked); "
        "nothing was run"]
