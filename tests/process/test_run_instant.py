"""`specbench run` as a real subprocess against real servers (the instant server, never-ready and dying
processes) and a real SQLite store: end to end, a server killed mid-cell, SIGKILL of the runner and
resume, readiness timeout, planner preflight (dry run of the incident, a skipped tuple)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paths import ROOT
from proc_helpers import free_port, pid_alive
from run_helpers import _matrix_head, make_tokenizer, served
from run_helpers import cli as _cli
from run_helpers import rows as _rows
from run_helpers import wait as _wait

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

INCIDENT = ROOT / "examples" / "qwen36-27b-dflash-ddtree.toml"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real tokenizer (trained with `tokenizers`, ChatML template) like the tiny models'."""
    return make_tokenizer(tmp_path_factory.mktemp("tok"))



def _matrix(path: Path, port: int, tok: Path, *, itl_ms: float = 0.0, ready_s: float = 30,
            command: list[str] | None = None, concurrency: str = "[1, 2]", num_requests: int = 6,
            client_extra: str = "", ar_only: bool = False) -> Path:
    cmd = command or [sys.executable, "-m", "specbench.testing.instant_server", "--burst", "1",
                      "--itl-ms", str(itl_ms)]
    path.write_text(_matrix_head("t", cmd, port, tok, ready_s=ready_s, stop_s=5) + f"""
[server]
tp = 1

[[server.spec]]
label = "ar"

{"" if ar_only else SPEC3}
[client]
concurrency = {concurrency}
prompt_tokens = 24
output_tokens = 16
num_requests = {num_requests}
warmup_requests = 1
{client_extra}
""")
    return path


SPEC3 = """
[[server.spec]]
label = "spec3"
algorithm = "draft_model"
flags = { "--accept-length" = 3 }
"""





def test_end_to_end_then_resume_keeps_everything(tmp_path: Path, tokenizer_dir: Path) -> None:
    m = _matrix(tmp_path / "m.toml", free_port(), tokenizer_dir)
    store = tmp_path / "r.sqlite"
    r = _cli("run", str(m), "--store", str(store), "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["label"], x["concurrency"], x["status"]) for x in rows] == [
        ("ar", 1, "done"), ("ar", 2, "done"), ("spec3", 1, "done"), ("spec3", 2, "done")]
    for x in rows:
        assert x["output_throughput"] > 0 and x["ttft_ms_p50"] is not None and x["tpot_ms_p99"] is not None
        if x["label"] == "ar":
            assert x["accept_length_mean"] is None and x["speedup"] is None
        else:
            # instant server: 16 tokens in verify steps of 3 (3,3,3,3,3,1): 6 steps, 10 accepted drafts;
            # vLLM's mean accept length 1 + accepted/drafts = 16/6
            assert x["accept_length_mean"] == pytest.approx(16 / 6)
            assert x["speedup"] is not None and x["speedup"] > 0
    cells = _rows(store, "SELECT cell_id, status, attempts, clamp_json, metrics_json FROM cells")
    for cid, status, attempts, clamp, metrics in cells:
        assert (status, attempts) == ("done", 1)
        server_json = json.loads(_rows(store, "SELECT server_json FROM cells WHERE cell_id=?", cid)[0][0])
        assert server_json["effective"]["models"][0]["id"] == "instant"  # read back from the running server
        assert json.loads(clamp)["prompt_tokens"] == 24
        assert json.loads(metrics)["completed"] == 6
        assert len(_rows(store, "SELECT idx FROM requests WHERE cell_id=?", cid)) == 6
    servers = _rows(store, "SELECT status, verdict, command_json, server_info_json, log_text FROM servers")
    assert [s[:2] for s in servers] == [("stopped", "launch")] * 2
    assert all("READY" in s[4] for s in servers)
    assert all(json.loads(s[3])["models"][0]["id"] == "instant" for s in servers)
    assert "--accept-length" in json.loads(servers[1][2])

    again = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert again.returncode == 0, again.stderr
    assert "ran 0 cells" in again.stdout and "4 kept" in again.stdout
    assert _rows(store, "SELECT DISTINCT attempts FROM cells") == [(1,)]


def test_server_killed_mid_cell_is_failed_with_its_whole_log(tmp_path: Path, tokenizer_dir: Path) -> None:
    # 6 requests x 16 tokens x 40 ms per token at concurrency 1: each cell takes about 4 s
    m = _matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, itl_ms=40, concurrency="[1]")
    store = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        cid = _wait(lambda: _rows(store, "SELECT cell_id FROM cells WHERE status='running' AND label='ar'"),
                    60, "the first cell to run")[0][0]
        active = _wait(lambda: (_rows(store, "SELECT value FROM meta WHERE key='active_server'") or [("",)])[0][0],
                       30, "the server's process group")
        time.sleep(0.5)  # requests in flight
        os.killpg(json.loads(active)["pgid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    status, reason, log_text, diag, server_id = _rows(
        store, "SELECT status, reason, log_text, diagnosis_json, server_id FROM cells WHERE cell_id=?", cid)[0]
    assert status == "failed"
    assert "server exited" in reason
    log_path = _rows(store, "SELECT log_path FROM servers WHERE server_id=?", server_id)[0][0]
    assert log_text == Path(log_path).read_text()  # the whole log, not a prefix
    assert "READY" in log_text
    assert json.loads(diag)["status"] in ("failed", "unknown", "started")
    # the speculative server booted afterwards and its cell finished
    assert _rows(store, "SELECT status FROM cells WHERE label='spec3'") == [("done",)]
    assert _rows(store, "SELECT status FROM servers WHERE server_id=?", server_id) == [("failed",)]
    # --retry-failed re-runs exactly the failed cell
    r = _cli("run", str(m), "--store", str(store), "--no-progress", "--retry-failed")
    assert r.returncode == 0, r.stderr
    assert _rows(store, "SELECT status, attempts FROM cells WHERE cell_id=?", cid) == [("done", 2)]
    assert _rows(store, "SELECT attempts FROM cells WHERE label='spec3'") == [(1,)]


@pytest.mark.busy  # its signals with every core busy (make test's busy pass)
def test_sigkill_of_the_runner_loses_no_finished_cell_and_reruns_none(tmp_path: Path, tokenizer_dir: Path) -> None:
    m = _matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, itl_ms=15, num_requests=6)
    store = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # kill once two cells are done and a third is running
        _wait(lambda: len(_rows(store, "SELECT 1 FROM cells WHERE status='done'")) >= 2
              and _rows(store, "SELECT 1 FROM cells WHERE status='running'"), 120, "two done cells and a running one")
        orphan = json.loads(_rows(store, "SELECT value FROM meta WHERE key='active_server'")[0][0])["pgid"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = {cid: (st, att, end) for cid, st, att, end in
              _rows(store, "SELECT cell_id, status, attempts, ended_at FROM cells")}
    done_before = {cid for cid, v in before.items() if v[0] == "done"}
    running_before = {cid for cid, v in before.items() if v[0] == "running"}
    assert len(done_before) >= 2 and len(running_before) == 1
    # the server dies with the runner (#23: PR_SET_PDEATHSIG and the watchdog), though it runs in its own session
    _wait(lambda: not pid_alive(orphan), 30, "the server to die with its runner")

    r = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "left by an interrupted run" not in r.stderr  # nothing was left to stop
    assert not pid_alive(orphan)
    after = {cid: (st, att, end) for cid, st, att, end in
             _rows(store, "SELECT cell_id, status, attempts, ended_at FROM cells")}
    assert all(v[0] == "done" for v in after.values())
    for cid in done_before:  # kept as they were: not re-run
        assert after[cid] == before[cid]
    for cid in running_before:  # interrupted: run again
        assert after[cid][1] == 2
    assert f"ran {len(after) - len(done_before)} cells" in r.stdout


def test_server_that_never_becomes_ready_times_out_cleanly(tmp_path: Path, tokenizer_dir: Path) -> None:
    marker = f"never-ready-{os.getpid()}-{time.time_ns()}"
    code = f"import time; print('loading weights {marker}', flush=True); time.sleep(600)"
    m = _matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, ready_s=2,
                command=[sys.executable, "-c", code], concurrency="[1]")
    store = tmp_path / "r.sqlite"
    t0 = time.monotonic()
    r = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert time.monotonic() - t0 < 90
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    cells = _rows(store, "SELECT status, reason, log_text FROM cells")
    assert len(cells) == 2
    for status, reason, log_text in cells:
        assert status == "failed"
        assert "not ready after 2 s" in reason
        assert f"loading weights {marker}" in log_text
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit()
            and marker.encode() in _read(p / "cmdline")]
    assert left == []


def _read(p: Path) -> bytes:
    try:
        return p.read_bytes()
    except OSError:
        return b""


def test_incident_dry_run_json_launches_nothing_that_would_fail() -> None:
    r = _cli("run", "--dry-run", "--json", str(INCIDENT))
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 3 * 5 * 4 * 2  # tp x (ar, dflash, 3 ddtree budgets) x concurrency x prompt length
    assert len({x["cell"] for x in rows}) == len(rows)
    for x in rows:
        assert set(x) >= {"cell", "server", "client", "verdict", "plan_status", "command"}
        assert x["verdict"] in ("launch", "fixed", "skipped")
        assert x["plan_status"] in ("ok", "fails")
        assert all(isinstance(w, str) for w in x["command"])
        assert x["command"][x["command"].index("--tp-size") + 1] == str(x["server"]["tp"])
        if x["verdict"] in ("launch", "fixed"):
            assert x["plan_status"] != "fails", x
        if x["verdict"] == "fixed":
            assert x["fix"]
        if x["server"]["algorithm"] == "ar":
            assert "SGLANG_ENABLE_SPEC_V2" not in x["env"]
            assert not any(w.startswith("--speculative") for w in x["command"])
    assert _cli("run", "--dry-run", str(INCIDENT)).returncode == 0


def test_a_tuple_the_planner_rejects_is_skipped_not_launched(tmp_path: Path) -> None:
    m = tmp_path / "m.toml"
    # 27B BF16 weights (~51 GiB) under mem_fraction_static 0.3 of a 96 GB card: cannot start
    m.write_text(f"""
engine = "sglang"
command = ["{sys.executable}", "-c", "print('launched')", "--model-path", "Qwen/Qwen3.6-27B"]
port = {free_port()}
[plan]
model_config = "Qwen/Qwen3.6-27B-bf16-derived"
gpu = "RTX PRO 6000 Blackwell"
[server]
tp = 1
mem_fraction_static = 0.3
[client]
concurrency = 1
""")
    store = tmp_path / "r.sqlite"
    r = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    (status, reason), = _rows(store, "SELECT status, reason FROM cells")
    assert status == "skipped" and reason.startswith("planner:")
    assert _rows(store, "SELECT verdict, status, log_path FROM servers") == [("skipped", "skipped", None)]


def test_bad_matrix_is_one_line_and_exit_2(tmp_path: Path) -> None:
    m = tmp_path / "bad.toml"
    m.write_text('engine = "vllm"\ncommand = ["vllm", "serve", "x"]\n[server]\ntp = 0\n')
    r = _cli("run", str(m), "--dry-run")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"specbench: error: {m}:4: server.tp: tp must be >= 1, got 0"]


@pytest.mark.busy  # its signals with every core busy (make test's busy pass)
def test_ctrl_c_stops_the_server_and_the_cell_reruns_next_time(tmp_path: Path, tokenizer_dir: Path) -> None:
    # 1 warm-up + 10 requests of 16 tokens at 40 ms per token: the measured phase lasts ~6.5 s; the signal goes
    # when the server has finished the warm-up and the first measured request (a sign the cell is under way, read
    # from the server, not a guess at timing), so ~9 requests (~5.8 s) are still to come however loaded the machine
    port = free_port()
    m = _matrix(tmp_path / "m.toml", port, tokenizer_dir, itl_ms=40, concurrency="[1]", num_requests=10)
    store = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        cid = _wait(lambda: _rows(store, "SELECT cell_id FROM cells WHERE status='running'"), 60, "a running cell")[0][0]
        pgid = json.loads(_wait(lambda: (_rows(store, "SELECT value FROM meta WHERE key='active_server'")
                                         or [("",)])[0][0], 30, "the server"))["pgid"]
        _wait(lambda: served(port) >= 2, 60, "the warm-up and a first measured request")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("specbench: interrupted; finished cells are kept in")
    assert not pid_alive(pgid)  # the server was stopped, not left behind
    assert _rows(store, "SELECT status, reason FROM cells WHERE cell_id=?", cid) == [
        ("running", "interrupted (Ctrl-C); re-run next time")]
    r = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert _rows(store, "SELECT status, attempts FROM cells WHERE cell_id=?", cid) == [("done", 2)]


def test_auto_fix_launches_the_nearest_working_configuration(tmp_path: Path) -> None:
    m = tmp_path / "m.toml"
    m.write_text("""
engine = "sglang"
command = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B"]
auto_fix = true
[plan]
model_config = "Qwen/Qwen3.6-27B-bf16-derived"
gpu = "RTX PRO 6000 Blackwell"
[server]
tp = 1
mem_fraction_static = 0.3
[client]
concurrency = 1
""")
    r = _cli("run", "--dry-run", "--json", str(m))
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["verdict"] == "fixed" and row["plan_status"] == "ok"
    new = row["server"]["mem_fraction_static"]
    assert new > 0.3 and row["fix"] == {"--mem-fraction-static": new}
    assert row["command"][row["command"].index("--mem-fraction-static") + 1] == str(new)
    assert "0.3" in row["reason"]  # the planner's reason for the original value is kept


def test_poisson_rate_and_goodput(tmp_path: Path, tokenizer_dir: Path) -> None:
    m = _matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, concurrency="[4]", num_requests=20,
                client_extra="request_rate = 50.0\nslo_ttft_ms = 10000.0", ar_only=True)
    store = tmp_path / "r.sqlite"
    r = _cli("run", str(m), "--store", str(store), "--no-progress")
    assert r.returncode == 0, r.stderr
    (metrics,), = _rows(store, "SELECT metrics_json FROM cells")
    m_ = json.loads(metrics)
    assert m_["request_rate"] == 50.0 and m_["completed"] == 20
    # 20 Poisson arrivals at 50/s take about 0.4 s; every request meets a 10 s TTFT SLO
    assert m_["duration_s"] > 0.1
    assert m_["goodput"] == pytest.approx(m_["request_throughput"])


def test_one_runner_per_store(tmp_path: Path, tokenizer_dir: Path) -> None:
    m = _matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, itl_ms=40, concurrency="[1]")
    store = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(lambda: _rows(store, "SELECT 1 FROM cells WHERE status='running'"), 60, "a running cell")
        r = _cli("run", str(m), "--store", str(store), "--no-progress")
        assert r.returncode == 2
        assert r.stderr.strip() == f"specbench: error: {store}: another `specbench run` is using this store"
    finally:
        proc.kill()
        proc.wait(timeout=30)
    r = _cli("run", str(m), "--store", str(store), "--no-progress")  # SIGKILL released the lock
    assert r.returncode == 0, r.stderr


def test_generate_api_with_token_ids_and_meta_info_accept_length(tmp_path: Path, tokenizer_dir: Path) -> None:
    """SGLang's native /generate (what --skip-tokenizer-init servers take): token-id prompts, accept length
    per request from meta_info (completion_tokens / spec_verify_ct)."""
    m = _matrix(tmp_path / "m.toml", free_port(), tokenizer_dir, concurrency="[2]")
    m.write_text(m.read_text().replace('tokenizer = ', 'api = "generate"\ntokenizer = '))
    store = tmp_path / "r.sqlite"
    r = _cli("run", str(m), "--store", str(store), "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    rows = {x["label"]: x for x in json.loads(r.stdout)}
    assert rows["ar"]["accept_length_mean"] is None
    assert rows["spec3"]["accept_length_mean"] == pytest.approx(16 / 6)  # 16 tokens in 6 verify steps
    (metrics, cid), = _rows(store, "SELECT metrics_json, cell_id FROM cells WHERE label='spec3'")
    assert json.loads(metrics)["accept_length_source"] == "sglang_meta_info"
    reqs = _rows(store, "SELECT spec_verify_ct, accept_len, output_tokens FROM requests WHERE cell_id=?", cid)
    assert {(v, o) for v, _, o in reqs} == {(6, 16)}
