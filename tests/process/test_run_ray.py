"""`specbench run --executor ray` on a local Ray head node with 8 simulated GPUs (`ray.init(num_gpus=8)` in a
helper process started here, on 127.0.0.1): the store is the serial run's, cell for cell; a Ray worker killed
mid-cell gives failed cells with the reason, its server is stopped, and --retry-failed re-runs them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from proc_helpers import free_port, pid_alive
from run_helpers import ROOT, cli, comparable, make_tokenizer, placements, rows, standin_matrix, wait

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

pytest.importorskip("ray", reason="Ray is not installed: it is the optional extra `pip install .[ray]`")

@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`ray start --head` on 127.0.0.1 with 8 GPUs declared, in a session of its own: its daemons share that
    process group, which the teardown stops (only the processes this test started)."""
    port = free_port()
    ray_exe = Path(sys.executable).with_name("ray")
    tmp = tmp_path_factory.mktemp("ray")
    head = subprocess.Popen([str(ray_exe), "start", "--head", "--num-gpus", "8", "--num-cpus", "8",
                             "--node-ip-address", "127.0.0.1", "--port", str(port), "--include-dashboard", "false",
                             "--disable-usage-stats", "--temp-dir", str(tmp)],
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = head.communicate(timeout=120)
        assert head.returncode == 0, err
        yield f"127.0.0.1:{port}"
    finally:
        for sig, grace in ((signal.SIGTERM, 3), (signal.SIGKILL, 20)):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            try:
                wait(lambda: not _group_alive(head.pid), grace, "the Ray daemons to stop")
                break
            except AssertionError:
                continue


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


def _env() -> dict[str, str]:
    # a loopback-only test cluster: no token (Ray would otherwise write one under ~/.ray for every later cluster)
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "disabled"}


def test_ray_run_is_the_serial_run_cell_for_cell(tmp_path: Path, tokenizer_dir: Path, ray_address: str) -> None:
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, specs=1, concurrency="[1]", boot_s=0.5)
    serial, on_ray = tmp_path / "serial.sqlite", tmp_path / "ray.sqlite"
    r = cli("run", str(m), "--store", str(serial), "--no-progress", env=_env())
    assert r.returncode == 0, r.stderr
    r = cli("run", str(m), "--store", str(on_ray), "--no-progress", "--executor", "ray", "--address", ray_address,
            env=_env())
    assert r.returncode == 0, r.stderr
    assert comparable(on_ray) == comparable(serial)
    for s in placements(on_ray):  # Ray gave each server tp GPUs; the whole log came back into the driver's folder
        assert len(s["placement"]["gpus"]) == rows(on_ray, "SELECT tp FROM servers WHERE server_id=?",
                                                   s["server_id"])[0][0]
        (log_path,), = rows(on_ray, "SELECT log_path FROM servers WHERE server_id=?", s["server_id"])
        assert Path(log_path).parent == tmp_path / "ray-logs"
        assert Path(log_path).read_text() == s["log"] and "READY" in s["log"]
        assert f"CUDA_VISIBLE_DEVICES={','.join(s['placement']['gpus'])}\n" in s["log"]


def test_a_lost_ray_worker_fails_its_cells_with_the_reason(tmp_path: Path, tokenizer_dir: Path,
                                                          ray_address: str) -> None:
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, tp="1", specs=0, concurrency="[1, 2]",
                       itl_ms=40, num_requests=10)
    store = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress", "--executor", "ray", "--address", ray_address], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait(lambda: rows(store, "SELECT 1 FROM cells WHERE status='running'"), 90, "a running cell")
        (info,), = wait(lambda: rows(store, "SELECT server_info_json FROM servers WHERE status='ready'"), 30, "ready")
        (active,), = wait(lambda: rows(store, "SELECT value FROM meta WHERE key='active_server' AND value != ''"),
                          30, "the server's record")
        os.kill(json.loads(info)["placement"]["host_pid"], signal.SIGKILL)  # the Ray worker running the tuple
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    cells = rows(store, "SELECT status, reason FROM cells")
    assert len(cells) == 2 and all(s == "failed" for s, _ in cells)
    assert all(r.startswith("ray: ") and "--retry-failed re-runs it" in r for _, r in cells)
    assert not pid_alive(json.loads(active)["pgid"])  # the server the lost worker left was stopped
    r = cli("run", str(m), "--store", str(store), "--no-progress", "--retry-failed", "--executor", "ray",
            "--address", ray_address, env=_env())
    assert r.returncode == 0, r.stderr
    assert rows(store, "SELECT status, attempts FROM cells") == [("done", 2), ("done", 2)]


def _one_error(r: subprocess.CompletedProcess[str]) -> str:
    """The run's `specbench: error:` line (Ray's own log lines may come before it)."""
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("specbench: error: --executor ray: "), r.stderr
    return last


def test_a_dead_address_is_one_line_not_minutes_of_retries(tmp_path: Path, tokenizer_dir: Path) -> None:
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, tp="1", specs=0, concurrency="[1]")
    port = free_port()  # nothing listens on it
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        r = cli("run", str(m), "--store", str(tmp_path / "r.sqlite"), "--no-progress", "--executor", "ray",
                "--address", address, env=_env(), timeout=120)  # Ray alone retries for minutes
        assert f"no Ray cluster at {address}" in _one_error(r)
    assert rows(tmp_path / "r.sqlite", "SELECT count(*) FROM cells WHERE status != 'pending'") in ([(0,)], [])


def test_an_address_that_accepts_but_never_answers_is_refused(tmp_path: Path, tokenizer_dir: Path) -> None:
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, tp="1", specs=0, concurrency="[1]")
    with socket.socket() as silent:  # connections complete in its backlog; nothing is ever said
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        r = cli("run", str(m), "--store", str(tmp_path / "r.sqlite"), "--no-progress", "--executor", "ray",
                "--address", address, env=_env(), timeout=120)
    assert f"no Ray cluster at {address}: no answer within" in _one_error(r)


def test_a_cluster_without_gpus_is_refused_before_any_task(tmp_path: Path, tokenizer_dir: Path) -> None:
    """No address: a new local Ray instance, started with no GPU (CUDA_VISIBLE_DEVICES empty); every task would
    ask for num_gpus = tp and wait forever."""
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, tp="1", specs=0, concurrency="[1]")
    env = {k: v for k, v in _env().items() if k != "RAY_ADDRESS"} | {"CUDA_VISIBLE_DEVICES": ""}
    r = cli("run", str(m), "--store", str(tmp_path / "r.sqlite"), "--no-progress", "--executor", "ray", env=env,
            timeout=240)
    assert "has no GPU" in _one_error(r)
    assert rows(tmp_path / "r.sqlite", "SELECT status FROM cells") in ([], [("pending",)])


def test_a_tuple_wider_than_every_node_fails_with_the_reason(tmp_path: Path, tokenizer_dir: Path,
                                                            ray_address: str) -> None:
    m = standin_matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, tp="[1, 16]", specs=0, concurrency="[1]")
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress", "--executor", "ray", "--address", ray_address,
            env=_env(), timeout=240)
    assert r.returncode == 1, r.stderr
    assert rows(store, "SELECT tp, status, reason FROM cells ORDER BY tp") == [
        (1, "done", None), (16, "failed", "tp=16 needs a Ray node with 16 GPUs; the cluster's largest has 8")]
