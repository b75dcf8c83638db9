"""`specbench run` against the real local engine (vLLM's CPU build on the tiny models), one boot per module.

The server is the target drafting for itself (acceptance 1.0 by construction). The first cell runs to
the end: prompts counted with the model's own tokenizer and chat template and clamped under the context
length must be exactly what the engine counts. `specbench run` is SIGKILLed during the second cell; the
re-run keeps the first and re-runs the second. During the third cell the engine is killed: that cell must
be `failed` with the whole server log and a diagnosis. A separate launch with a 10 s readiness limit must
time out cleanly and leave no engine process behind.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine_boot import engine_venv_or_skip
from proc_helpers import free_port, pid_alive
from specbench.engines.vllm.launch import models_dir
from specbench.matrix.identity import group_pids

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.engine


def _rows(store: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    if not store.exists():
        return []
    conn = sqlite3.connect(store, timeout=30)
    try:
        return list(conn.execute(sql, params))
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def _wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _spawn(matrix: Path, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _running(store: Path, concurrency: int) -> list[tuple[Any, ...]]:
    return _rows(store, "SELECT cell_id, ended_at FROM cells WHERE status='running' AND "
                        "json_extract(client_json, '$.concurrency') = ?", concurrency)


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs of one matrix (cells at concurrency 1, 2, 4 on one self-draft server):
    run 1 is SIGKILLed while the second cell runs (the engine is left behind); run 2 resumes (stops the
    left-over engine, boots again) and its engine is killed during the third cell."""
    engine_venv_or_skip()  # skips locally without the engine; fails under CI, where make test installs it
    if not (models_dir() / "tiny-target" / "config.json").is_file():
        pytest.skip("tiny models not built: run `make models`")
    tmp = tmp_path_factory.mktemp("engine")
    port = free_port()
    matrix = tmp / "m.toml"
    matrix.write_text(f"""
name = "engine-test"
engine = "local"
model = "tiny-target"
port = {port}
[timeouts]
ready_s = 400
request_s = 120
[server]
tp = 1
context_length = 512
[[server.spec]]
label = "self-draft"
algorithm = "draft_model"
draft_model = "tiny-target"
num_draft_tokens = 3
[client]
concurrency = [1, 2, 4]
prompt_tokens = 500        # with 32 output tokens: clamped to 480 under the 512-token context
output_tokens = 32
num_requests = 16
warmup_requests = 1
""")
    store = tmp / "r.sqlite"
    first = _spawn(matrix, store)
    try:
        _wait(lambda: _running(store, 2), 500, "the second cell of run 1")
        pgid1 = json.loads(_rows(store, "SELECT value FROM meta WHERE key='active_server'")[0][0])["pgid"]
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    after_kill = {cid: (st, att, end) for cid, st, att, end in
                  _rows(store, "SELECT cell_id, status, attempts, ended_at FROM cells")}
    # the engine dies with its killed runner (the watchdog, matrix/watchdog.py): waited for, not slept for
    deadline = time.monotonic() + 60
    while (pid_alive(pgid1) or group_pids(pgid1)) and time.monotonic() < deadline:
        time.sleep(0.1)
    # the leader and every process of its group: vLLM's EngineCore (retitled by setproctitle, matrix/lifecycle.py::
    # NO_TITLE_OVER_ENVIRON) once outlived its API server here
    engine_left = pid_alive(pgid1) or bool(group_pids(pgid1))
    second = _spawn(matrix, store)
    try:
        third = _wait(lambda: _running(store, 4), 500, "the third cell of run 2")
        pgid2 = json.loads(_rows(store, "SELECT value FROM meta WHERE key='active_server'")[0][0])["pgid"]
        time.sleep(0.3)
        os.killpg(pgid2, signal.SIGKILL)
        out, err = second.communicate(timeout=300)
    finally:
        if second.poll() is None:
            second.kill()
    return {"store": store, "third": third[0][0], "rc": second.returncode, "stdout": out, "stderr": err,
            "after_kill": after_kill, "engine_left": engine_left, "pgid1": pgid1}



def test_sigkill_of_the_runner_then_resume_loses_no_cell_and_reruns_none(engine_run: dict[str, Any]) -> None:
    store = engine_run["store"]
    before = engine_run["after_kill"]
    done = [cid for cid, v in before.items() if v[0] == "done"]
    running = [cid for cid, v in before.items() if v[0] == "running"]
    assert len(done) == 1 and len(running) == 1
    assert not engine_run["engine_left"]  # the engine died with the killed runner (matrix/watchdog.py)...
    assert "left by an interrupted run" not in engine_run["stderr"]  # ...so the next run had nothing to stop
    assert not pid_alive(engine_run["pgid1"])
    now = {cid: (st, att, end) for cid, st, att, end in
           _rows(store, "SELECT cell_id, status, attempts, ended_at FROM cells")}
    assert now[done[0]] == before[done[0]]  # kept, not re-run
    assert now[running[0]][:2] == ("done", 2)  # interrupted, re-run once
    assert len(list((store.parent / "r-logs").glob("*.log"))) == 2  # two boots


def test_first_cell_done_with_exact_clamped_prompts_and_accept_length(engine_run: dict[str, Any]) -> None:
    store = engine_run["store"]
    (cid, status, metrics, clamp), = _rows(
        store, "SELECT cell_id, status, metrics_json, clamp_json FROM cells "
               "WHERE json_extract(client_json, '$.concurrency') = 1")
    assert status == "done", engine_run["stderr"]
    clamp = json.loads(clamp)
    assert clamp["clamped"] and clamp["context_len"] == 512
    assert (clamp["prompt_tokens"], clamp["output_tokens"]) == (480, 32)
    # the engine's own usage.prompt_tokens equals our count with the model's tokenizer + chat template
    counts = _rows(store, "SELECT prompt_tokens, output_tokens, error FROM requests WHERE cell_id=?", cid)
    assert len(counts) == 16
    assert {(p, e) for p, _, e in counts} == {(480, None)}
    # at most the 32 asked for (a random-weight model may still emit a generation_config stop token)
    assert all(1 <= o <= 32 for _, o, _ in counts)
    m = json.loads(metrics)
    assert m["completed"] == 16 and m["output_throughput"] > 0
    # self-draft: every drafted token accepted, 3 per step -> mean accept length 1 + 3 = 4 (vLLM's definition)
    assert m["accept_length_source"] == "vllm_metrics"
    assert m["accept_length_mean"] == pytest.approx(4.0, abs=0.3)
    info = json.loads(_rows(store, "SELECT server_info_json FROM servers")[0][0])
    assert info["models"][0]["max_model_len"] == 512
    assert info["cache_config_info"]


def test_engine_killed_mid_cell_is_failed_with_whole_log(engine_run: dict[str, Any]) -> None:
    store = engine_run["store"]
    assert engine_run["rc"] == 1
    status, reason, log_text, diag = _rows(
        store, "SELECT status, reason, log_text, diagnosis_json FROM cells WHERE cell_id=?", engine_run["third"])[0]
    assert status == "failed"
    assert "server exited" in reason
    log_path = _rows(store, "SELECT log_path FROM servers")[0][0]
    assert log_path.endswith("-boot2.log")
    assert log_text == Path(log_path).read_text()
    assert "vllm" in log_text.lower()
    assert json.loads(diag)["status"] in ("started", "failed", "unknown")
    assert _rows(store, "SELECT status FROM servers") == [("failed",)]


def test_engine_that_is_not_ready_in_time_times_out_and_leaves_nothing(tmp_path: Path) -> None:
    engine_venv_or_skip()  # skips locally without the engine; fails under CI, where make test installs it
    if not (models_dir() / "tiny-target" / "config.json").is_file():
        pytest.skip("tiny models not built: run `make models`")
    port = free_port()
    matrix = tmp_path / "m.toml"
    matrix.write_text(f"""
engine = "local"
model = "tiny-target"
port = {port}
[timeouts]
ready_s = 5            # vLLM CPU needs 20-40 s to boot (28 s to /health idle, 2 cores, one process)
stop_s = 5
[client]
concurrency = 1
""")
    store = tmp_path / "r.sqlite"
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                        "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    (status, reason, log_text), = _rows(store, "SELECT status, reason, log_text FROM cells")
    assert status == "failed" and "not ready after 5 s" in reason
    assert log_text == Path(_rows(store, "SELECT log_path FROM servers")[0][0]).read_text()  # all of it
    needle = f"--port\0{port}".encode()
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and needle in _cmdline(p)]
    assert left == []


def _cmdline(p: Path) -> bytes:
    try:
        return p.joinpath("cmdline").read_bytes()
    except OSError:
        return b""
