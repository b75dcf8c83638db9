"""`specbench run --gpus`: server tuples packed onto 8 simulated GPUs (a stand-in nvidia-smi on PATH), stand-in
engines as servers; the store is the serial run's, cell for cell; SIGKILL of the runner mid-run orphans no
server and loses no finished cell; GPU lists, topology and discovery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import fake_gpus
from proc_helpers import free_port, pid_alive
from run_helpers import ROOT, cli, comparable, make_tokenizer, placements, rows, standin_matrix, wait
from specbench.errors import UserError
from specbench.matrix import gpus

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture()
def gpu_env(tmp_path: Path) -> dict[str, str]:
    return fake_gpus.install(tmp_path / "bin")


def _port_block() -> int:
    """A port with the next 8 free too (one per slot)."""
    return free_port(8)


def test_packed_run_is_the_serial_run_cell_for_cell(tmp_path: Path, tokenizer_dir: Path,
                                                    gpu_env: dict[str, str]) -> None:
    m = standin_matrix(tmp_path / "m.toml", _port_block(), tokenizer_dir, boot_s=1.5)
    serial, packed = tmp_path / "serial.sqlite", tmp_path / "packed.sqlite"
    r = cli("run", str(m), "--store", str(serial), "--no-progress", env=gpu_env)
    assert r.returncode == 0, r.stderr
    r = cli("run", str(m), "--store", str(packed), "--no-progress", "--gpus", "0-7", env=gpu_env)
    assert r.returncode == 0, r.stderr
    assert "ran 16 cells (16 done, 0 partial, 0 failed)" in r.stdout
    assert comparable(packed) == comparable(serial)

    servers = placements(packed)
    for ph in (1, 2):
        group = [s for s in servers if s["phase"] == ph]
        assert len(group) == 4
        # the phase's servers ran at once: each one started before any other of its phase had ended
        assert max(s["started"] for s in group) < min(s["ended"] for s in group)
        used = [s["placement"]["gpus"] for s in group]
        assert all(len(g) == ph for g in used)  # tp GPUs each
        assert len({g for u in used for g in u}) == 4 * ph  # disjoint
        assert len({s["placement"]["port"] for s in group}) == 4
        for s in group:  # the server was given exactly those GPUs
            assert f"CUDA_VISIBLE_DEVICES={','.join(s['placement']['gpus'])}\n" in s["log"]
    # phases are barriers: phase 2 starts after every phase-1 server stopped
    assert min(s["started"] for s in servers if s["phase"] == 2) > max(s["ended"] for s in servers if s["phase"] == 1)
    # adjacent GPUs for tp=2 (the stand-in's topology links every pair alike: the lowest pairs by index)
    assert sorted(tuple(s["placement"]["gpus"]) for s in servers if s["phase"] == 2) == [
        ("0", "1"), ("2", "3"), ("4", "5"), ("6", "7")]

    again = cli("run", str(m), "--store", str(packed), "--no-progress", "--gpus", "0-7", env=gpu_env)
    assert again.returncode == 0 and "ran 0 cells" in again.stdout and "16 kept" in again.stdout


def test_sigkill_of_a_packed_run_orphans_no_server_and_reruns_no_finished_cell(
        tmp_path: Path, tokenizer_dir: Path, gpu_env: dict[str, str]) -> None:
    # 4 tp=1 tuples on 4 GPUs; 2 cells each of ~6 requests x 16 tokens x 20 ms
    m = standin_matrix(tmp_path / "m.toml", _port_block(), tokenizer_dir, tp="1", itl_ms=20, concurrency="[1, 2]",
                       num_requests=6)
    store = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress", "--gpus", "0-3"], cwd=ROOT, env=gpu_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait(lambda: rows(store, "SELECT 1 FROM cells WHERE status='done'")
             and len(rows(store, "SELECT 1 FROM cells WHERE status='running'")) >= 2, 120,
             "a done cell and two running at once")
        active = [json.loads(v) for (v,) in rows(store, "SELECT value FROM meta WHERE key LIKE 'active_server%' "
                                                        "AND value != ''")]
        workers = [json.loads(v)["placement"]["host_pid"] for (v,) in
                   rows(store, "SELECT server_info_json FROM servers WHERE status='ready'")]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(active) >= 2
    wait(lambda: not any(pid_alive(w) for w in workers), 30, "the workers to die with the runner")
    # the servers die with their workers (#23: PR_SET_PDEATHSIG and the watchdog), though in their own sessions
    wait(lambda: not any(pid_alive(a["pgid"]) for a in active), 30, "the servers to die with the runner")
    before = {cid: (st, att, end) for cid, st, att, end in rows(store, "SELECT cell_id, status, attempts, ended_at "
                                                                       "FROM cells")}
    done_before = {c for c, v in before.items() if v[0] == "done"}
    running_before = {c for c, v in before.items() if v[0] == "running"}

    r = cli("run", str(m), "--store", str(store), "--no-progress", "--gpus", "0-3", env=gpu_env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("left by an interrupted run") == 0  # nothing was left to stop
    assert not any(pid_alive(a["pgid"]) for a in active)
    after = {cid: (st, att, end) for cid, st, att, end in rows(store, "SELECT cell_id, status, attempts, ended_at "
                                                                      "FROM cells")}
    assert all(v[0] == "done" for v in after.values())
    for cid in done_before:
        assert after[cid] == before[cid]
    for cid in running_before:
        assert after[cid][1] == before[cid][1] + 1
    assert rows(store, "SELECT count(*) FROM meta WHERE key LIKE 'active_server%' AND value != ''") == [(0,)]


def test_a_tuple_wider_than_the_gpus_fails_with_the_reason(tmp_path: Path, tokenizer_dir: Path,
                                                          gpu_env: dict[str, str]) -> None:
    m = standin_matrix(tmp_path / "m.toml", _port_block(), tokenizer_dir, tp="[1, 4]", specs=0, concurrency="[1]")
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress", "--gpus", "0,1", env=gpu_env)
    assert r.returncode == 1
    assert rows(store, "SELECT tp, status, reason FROM cells ORDER BY tp") == [
        (1, "done", None), (4, "failed", "tp=4 needs 4 GPUs; --gpus gives 2")]


@pytest.mark.parametrize("text, want", [("0-7", tuple("01234567")), ("0,1,4", ("0", "1", "4")),
                                        ("0-2,6", ("0", "1", "2", "6"))])
def test_gpu_lists(text: str, want: tuple[str, ...]) -> None:
    assert gpus.parse_gpus(text) == want


@pytest.mark.parametrize("text", ["3-1", "0,0", "a", "0-", ""])
def test_bad_gpu_lists_are_one_line_errors(tmp_path: Path, text: str) -> None:
    with pytest.raises(UserError):
        gpus.parse_gpus(text)
    m = tmp_path / "m.toml"
    m.write_text('engine = "openai"\ncommand = ["x"]\n[server]\ntp = 1\n')
    r = cli("run", str(m), "--gpus", text, "--no-progress")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("specbench: error: --gpus")


def test_discovery_from_cuda_visible_devices_then_nvidia_smi(gpu_env: dict[str, str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", gpu_env["PATH"])  # the stand-in's 8 GPUs, not this machine's
    assert gpus.discover({"CUDA_VISIBLE_DEVICES": "2,3,5"}) == ("2", "3", "5")
    out = subprocess.run([sys.executable, "-c", "import os; from specbench.matrix import gpus; "
                          "print(gpus.discover(os.environ), len(gpus.topology() or {}))"],
                         capture_output=True, text=True, env={**gpu_env, "PYTHONPATH": str(ROOT / "src")}, check=True)
    assert out.stdout.split("\n")[0] == f"{tuple(str(i) for i in range(8))} 56"


def test_topology_picks_nvlinked_pairs() -> None:
    # two NVLink islands across the index order: {0, 2, 4, 6} and {1, 3, 5, 7}; other pairs over the SMP bus
    lines = ["\t" + "\t".join(f"GPU{i}" for i in range(8)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for i in range(8):
        links = [" X " if i == j else ("NV12" if (i - j) % 2 == 0 else "SYS") for j in range(8)]
        lines.append(f"GPU{i}\t" + "\t".join(links) + "\t0-31\t0\t\tN/A")
    cost = gpus.parse_topology("\n".join(lines))
    pool = gpus.GpuPool([str(i) for i in range(8)], cost)
    assert pool.take(2) == ("0", "2")
    assert pool.take(4) == ("1", "3", "5", "7")
    assert pool.take(4) is None  # 4, 6 left
    assert pool.take(2) == ("4", "6")
    # without a topology, neighbours by index
    plain = gpus.GpuPool([str(i) for i in range(8)])
    assert [plain.take(2) for _ in range(4)] == [("0", "1"), ("2", "3"), ("4", "5"), ("6", "7")]


def test_every_combination_stays_disjoint() -> None:
    pool = gpus.GpuPool([str(i) for i in range(8)])
    taken = [g for tp in (1, 2, 1, 4) for g in (pool.take(tp) or ())]
    assert len(taken) == len(set(taken)) == 8
    assert pool.take(1) is None
    pool.give(taken[1:3])
    assert pool.take(2) == tuple(sorted(taken[1:3]))


def test_the_default_path_does_not_import_ray() -> None:
    code = ("import sys; from specbench.matrix import runner, packing; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.stdout.strip() == "False"
