"""One `specbench run` on the real local engine (vLLM's CPU build, the tiny target, autoregressive and with itself as
draft), two boots for the module, two kinds of check on its store:

- #14: a matrix with a dataset file, a category axis, sampling settings and `--repeats 3` runs end to end, the store
  holds per-request categories and repeats, and the report shows per-category results with intervals;
- count, don't trust (#22): the client asks `return_token_ids` (engines/vllm/launch.py::VllmServer.count_body),
  counts the ids vLLM streams and finds them equal to vLLM's usage; the running cap (--max-num-seqs 2, below the
  concurrency of 4) is read from vLLM's own log and the concurrency that ran is 2; the served model passes the check.

(The truth checks had a run and a boot of their own, test_truth_engine.py; they read this run's store now.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine_boot import engine_venv_or_skip
from proc_helpers import free_port
from run_helpers import rows
from specbench.engines.vllm.launch import models_dir

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.engine

CAP, CONCURRENCY, REQUESTS, REPEATS, OUTPUT = 2, 4, 4, 3, 16


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run's store and its report folder."""
    engine_venv_or_skip()  # skips locally without the engine; fails under CI, where make test installs it
    if not (models_dir() / "tiny-target" / "config.json").is_file():
        pytest.skip("tiny models not built: run `make models`")
    tmp = tmp_path_factory.mktemp("workload")
    data = tmp / "prompts.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in (
        [{"prompt": f"Write a short note about apples number {i}.", "category": "chat"} for i in range(6)]
        + [{"prompt": f"def add_{i}(a, b):\n    return", "category": "code"} for i in range(6)])) + "\n")
    matrix = tmp / "m.toml"
    matrix.write_text(f"""
name = "engine-workload"
engine = "local"
model = "tiny-target"
port = {free_port()}
[timeouts]
ready_s = 400
request_s = 120
[server]
tp = 1
context_length = 512
max_running_requests = {CAP}
[[server.spec]]
label = "ar"
[[server.spec]]
label = "self-draft"
algorithm = "draft_model"
draft_model = "tiny-target"
num_draft_tokens = 3
[client]
concurrency = {CONCURRENCY}
dataset = "{data}"
category = ["chat", "code"]
prompt_len = "data"
output_tokens = {OUTPUT}
num_requests = {REQUESTS}
warmup_requests = 1
temperature = 0.7
seed = 7
""")
    store = tmp / "r.sqlite"
    run = subprocess.run([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                          "--repeats", str(REPEATS), "--no-progress"], capture_output=True, text=True, timeout=900,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return {"store": store, "report": tmp / "rep"}


def test_dataset_categories_sampling_and_repeats_on_the_local_engine(workload: dict[str, Any]) -> None:
    store, out = workload["store"], workload["report"]
    cells = rows(store, "SELECT label, status, client_json, metrics_json FROM cells")
    cats = {r[0] for r in rows(store, "SELECT DISTINCT category FROM requests")}
    reps = {r[0] for r in rows(store, "SELECT DISTINCT repeat FROM requests")}
    assert len(cells) == 4 and all(status == "done" for _, status, _, _ in cells)
    assert cats == {"chat", "code"} and reps == set(range(REPEATS))
    for label, _, client, metrics in cells:
        c, m = json.loads(client), json.loads(metrics)
        assert c["temperature"] == 0.7 and c["repeats"] == REPEATS
        assert m["spread"]["repeats"] == REPEATS and m["spread"]["metrics"]["output_throughput"]["ci95"]
        if label == "self-draft":
            assert m["accept_length_mean"] >= 1.0 and m["speedup"] is not None
    rep = subprocess.run([sys.executable, "-m", "specbench", "report", str(store), "--out", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr
    md = (out / "report.md").read_text()
    section = md.split("## Per category", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| self-draft")]
    assert {r.split("|")[4].strip() for r in lines} == {"chat", "code"}  # one speculative row per category
    assert all("[" in r.split("|")[-2] for r in lines)  # its speedup with the 95% interval over the repeats


def test_vllm_streams_token_ids_that_agree_with_its_usage(workload: dict[str, Any]) -> None:
    store = workload["store"]
    measured = REQUESTS * REPEATS  # every repeat's requests, pooled; the warm-up is not measured
    for label, status, reason, metrics_json in rows(store, "SELECT label, status, reason, metrics_json FROM cells"):
        assert status == "done", (label, reason)
        x = json.loads(metrics_json)
        assert x["count_sources"] == {"token_ids": measured}, label
        assert x["total_output_tokens"] == measured * OUTPUT == x["server_output_tokens_total"], label
        assert x["running_cap"] == CAP and x["running_cap_source"].startswith("log:"), label  # --max-num-seqs 2
        assert x["effective_concurrency"] == CAP and x["queued"] is True, label
        assert x["prefix_cache_reset"]["how"].startswith("/reset_prefix_cache"), label
    reqs = rows(store, "SELECT output_tokens, server_output_tokens, counted_tokens, count_source FROM requests")
    assert len(reqs) == 4 * measured
    assert set(reqs) == {(OUTPUT, OUTPUT, OUTPUT, "token_ids")}
