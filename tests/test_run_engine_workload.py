"""#14 on the real local engine (vLLM's CPU build, the tiny target with itself as draft): a matrix with a dataset
file, a category axis, sampling settings and `--repeats 3` runs end to end, the store holds per-request categories
and repeats, and the report shows per-category results with intervals."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine_boot import engine_venv_or_skip
from proc_helpers import free_port
from specbench.engines.vllm.launch import models_dir

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.engine


def test_dataset_categories_sampling_and_repeats_on_the_local_engine(tmp_path: Path) -> None:
    engine_venv_or_skip()  # skips locally without the engine; fails under CI, where make test installs it
    if not (models_dir() / "tiny-target" / "config.json").is_file():
        pytest.skip("tiny models not built: run `make models`")
    data = tmp_path / "prompts.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in (
        [{"prompt": f"Write a short note about apples number {i}.", "category": "chat"} for i in range(6)]
        + [{"prompt": f"def add_{i}(a, b):\n    return", "category": "code"} for i in range(6)])) + "\n")
    matrix = tmp_path / "m.toml"
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
[[server.spec]]
label = "ar"
[[server.spec]]
label = "self-draft"
algorithm = "draft_model"
draft_model = "tiny-target"
num_draft_tokens = 3
[client]
concurrency = 2
dataset = "{data}"
category = ["chat", "code"]
prompt_len = "data"
output_tokens = 24
num_requests = 4
warmup_requests = 1
temperature = 0.7
seed = 7
""")
    store = tmp_path / "r.sqlite"
    run = subprocess.run([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                          "--repeats", "3", "--no-progress"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    con = sqlite3.connect(store)
    try:
        cells = con.execute("SELECT label, status, client_json, metrics_json FROM cells").fetchall()
        cats = {r[0] for r in con.execute("SELECT DISTINCT category FROM requests")}
        reps = {r[0] for r in con.execute("SELECT DISTINCT repeat FROM requests")}
    finally:
        con.close()
    assert len(cells) == 4 and all(status == "done" for _, status, _, _ in cells)
    assert cats == {"chat", "code"} and reps == {0, 1, 2}
    for label, _, client, metrics in cells:
        c, m = json.loads(client), json.loads(metrics)
        assert c["temperature"] == 0.7 and c["repeats"] == 3
        assert m["spread"]["repeats"] == 3 and m["spread"]["metrics"]["output_throughput"]["ci95"]
        if label == "self-draft":
            assert m["accept_length_mean"] >= 1.0 and m["speedup"] is not None
    rep = subprocess.run([sys.executable, "-m", "specbench", "report", str(store), "--out", str(tmp_path / "rep")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    section = md.split("## Per category", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| self-draft")]
    assert {r.split("|")[4].strip() for r in rows} == {"chat", "code"}  # one speculative row per category
    assert all("[" in r.split("|")[-2] for r in rows)  # its speedup with the 95% interval over the repeats
