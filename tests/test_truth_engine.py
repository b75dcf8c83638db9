"""Count, don't trust, on the real engine (vLLM's CPU build, the embedded default): the client asks
`return_token_ids` (engines/vllm/launch.py::VllmServer.count_body), counts the ids vLLM streams and finds them equal
to vLLM's usage; the running cap is read from vLLM's own log; the served model passes the check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine_boot import engine_venv_or_skip
from proc_helpers import free_port
from run_helpers import cli, rows
from specbench.engines.vllm.launch import models_dir

pytestmark = pytest.mark.engine


def test_vllm_streams_token_ids_that_agree_with_its_usage(tmp_path: Path) -> None:
    engine_venv_or_skip()
    if not (models_dir() / "tiny-target" / "config.json").is_file():
        pytest.skip("tiny models not built: run `make models`")
    m = tmp_path / "m.toml"
    m.write_text(f"""
name = "truth-engine"
engine = "local"
model = "tiny-target"
port = {free_port()}
[timeouts]
ready_s = 400
request_s = 120
[server]
tp = 1
context_length = 512
max_running_requests = 2
[client]
concurrency = [4]
prompt_tokens = 32
output_tokens = 16
num_requests = 8
warmup_requests = 1
""")
    store = tmp_path / "r.sqlite"
    r = cli("run", str(m), "--store", str(store), "--no-progress", timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    (status, reason, metrics_json), = rows(store, "SELECT status, reason, metrics_json FROM cells")
    assert status == "done", reason
    x = json.loads(metrics_json)
    assert x["count_sources"] == {"token_ids": 8}
    assert x["total_output_tokens"] == 8 * 16 == x["server_output_tokens_total"]
    assert x["running_cap"] == 2 and x["running_cap_source"].startswith("log:")  # --max-num-seqs 2
    assert x["effective_concurrency"] == 2 and x["queued"] is True
    assert x["prefix_cache_reset"]["how"].startswith("/reset_prefix_cache")
    reqs = rows(store, "SELECT output_tokens, server_output_tokens, counted_tokens, count_source FROM requests")
    assert set(reqs) == {(16, 16, 16, "token_ids")}
