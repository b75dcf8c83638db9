"""`specbench run` against the real local engine (vLLM's CPU build on the tiny models), one boot per module.

The boot serves the target drafting for itself (acceptance 1.0 by construction). The first cell runs to
the end: prompts counted with the model's own tokenizer and chat template and clamped under the context
length must be exactly what the engine counts. During the second cell the engine is killed: that cell
must be `failed` with the whole server log and a diagnosis.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specbench.engines import vllm_local
from specbench.matrix.adapters import models_dir

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


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not vllm_local.engine_installed(vllm_local.engine_venv()):
        pytest.skip("local engine not installed: run `make engine`")
    if not (models_dir() / "tiny-target" / "config.json").is_file():
        pytest.skip("tiny models not built: run `make models`")
    tmp = tmp_path_factory.mktemp("engine")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
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
concurrency = [1, 4]
prompt_tokens = 500        # with 32 output tokens: clamped to 480 under the 512-token context
output_tokens = 32
num_requests = 16
warmup_requests = 1
""")
    store = tmp / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        second = _wait(lambda: _rows(store, "SELECT cell_id FROM cells WHERE status='running' AND "
                                            "json_extract(client_json, '$.concurrency') = 4"), 500, "the second cell")
        pgid = json.loads(_rows(store, "SELECT value FROM meta WHERE key='active_server'")[0][0])["pgid"]
        time.sleep(0.3)
        os.killpg(pgid, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return {"store": store, "second": second[0][0], "rc": proc.returncode, "stdout": out, "stderr": err}


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
        store, "SELECT status, reason, log_text, diagnosis_json FROM cells WHERE cell_id=?", engine_run["second"])[0]
    assert status == "failed"
    assert "server exited" in reason
    log_path = _rows(store, "SELECT log_path FROM servers")[0][0]
    assert log_text == Path(log_path).read_text()
    assert "vllm" in log_text.lower()
    assert json.loads(diag)["status"] in ("started", "failed", "unknown")
    assert _rows(store, "SELECT status FROM servers") == [("failed",)]
