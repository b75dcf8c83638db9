"""The report of a real demo run: `specbench run examples/demo-tiny.toml` on the embedded CPU engine, then
`specbench report` and `specbench export` on the store it wrote. One run per module."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from paths import ROOT as REPO
from proc_helpers import free_port
from specbench.report.build import Written, report_paths
from specbench.report.export import export
from specbench.stored.read import load_store

pytestmark = pytest.mark.engine

DEMO = REPO / "examples" / "demo-tiny.toml"  # the tiny models; `make demo` runs demo.toml on a real model



@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from specbench.engines.vllm import local as vl

    venv = vl.engine_venv()
    if not vl.engine_installed(venv) or not DEMO.is_file():
        msg = f"demo needs the CPU engine at {venv} (make engine) and {DEMO}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    root = tmp_path_factory.mktemp("demo")
    matrix = root / "demo.toml"
    matrix.write_text(re.sub(r"(?m)^port = \d+", f"port = {free_port()}", DEMO.read_text()))
    store = root / "demo.sqlite"
    env = {**os.environ, "SPECBENCH_ENGINE_VENV": str(venv)}
    env.setdefault("SPECBENCH_MODELS", str(REPO / ".cache" / "models"))
    res = subprocess.run([sys.executable, "-m", "specbench", "run", str(matrix), "--store", str(store),
                          "--no-progress"], capture_output=True, text=True, timeout=1500, env=env, cwd=REPO)
    assert store.is_file(), f"specbench run wrote no store (rc {res.returncode}):\n{res.stdout}\n{res.stderr}"
    return store


@pytest.fixture(scope="module")
def demo_report(demo_store: Path) -> Written:
    return report_paths([demo_store], demo_store.parent / "report")


def test_demo_report_has_every_cell_and_real_numbers(demo_store: Path, demo_report: Written) -> None:
    store = load_store(demo_store)
    assert len(store.cells) == 6  # 3 servers x concurrency [1, 4]
    html = demo_report.html.read_text()
    md = demo_report.markdown.read_text()
    for cell in store.cells:
        assert cell.cell_id in html and cell.cell_id in md
    done = [c for c in store.cells if c.status == "done"]
    assert done, "the demo measured nothing"
    rows = {r.cell_id: r for t in demo_report.report.tables.phases for r in t.rows}
    for c in done:
        assert rows[c.cell_id].output_throughput == c.metrics["output_throughput"] > 0
    ar = {c.concurrency: c.metrics["output_throughput"] for c in done if c.is_ar}
    for c in done:
        if not c.is_ar and c.concurrency in ar and c.metric("speedup") is None:
            assert rows[c.cell_id].speedup == pytest.approx(c.metrics["output_throughput"] / ar[c.concurrency])


def test_self_draft_accepts_every_draft_token(demo_store: Path) -> None:
    """The target drafting for itself, greedy: every drafted token is accepted, 1 + 3 tokens per verify step
    (vLLM's definition, read from its counters); moved here from test_run_engine.py's first cell."""
    cells = [c for c in load_store(demo_store).cells if c.label == "self-draft"]
    assert len(cells) == 2 and all(c.status == "done" for c in cells)
    for c in cells:
        assert c.metrics["accept_length_source"] == "vllm_metrics"
        assert c.metrics["accept_length_mean"] == pytest.approx(4.0, abs=0.3), c.concurrency


def test_demo_plots_are_images_with_one_tp_panel(demo_report: Written) -> None:
    by = {p.name: p for p in demo_report.report.plots}
    assert {"throughput.png", "tpot.png", "pareto.png"} <= set(by)
    plot = by["throughput.png"]
    assert [p.title for p in plot.panels] == ["TP1"]
    with Image.open(plot.path) as im:
        px = im.convert("RGB")
        left, top, right, bottom = plot.panels[0].box
        region = px.crop((left + 2, top + 2, right - 2, bottom - 2))
        colors = region.getcolors(maxcolors=1 << 20) or []
        assert sum(n for n, (r, g, b) in colors if max(r, g, b) - min(r, g, b) > 60) > 300


def test_demo_export_matches_store(demo_store: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(export([load_store(demo_store)], "csv"))))
    con = sqlite3.connect(demo_store)
    assert {r["cell_id"] for r in rows} == {cid for (cid,) in con.execute("SELECT cell_id FROM cells")}


def test_each_server_reports_the_pool_the_planner_predicted(demo_store: Path) -> None:
    """The planner before the boot, the engine after it, for each of the demo's servers (autoregressive, a draft of
    another shape, the target drafting for itself): the store's plan and the engine's own read-back (its /metrics
    cache_config_info and its log) agree on the KV pool; the autoregressive one reports no speculative decoding and
    its pool is the whole KV space at 2,048 bytes a token (tiny-target: 4 layers x 2 (K, V) x 2 KV heads x 64, bf16).
    (This is the plain server's check; it had a boot of its own in test_engine_vllm_cpu.py.)"""
    con = sqlite3.connect(demo_store)
    try:
        servers = con.execute("SELECT settings_json, plan_json, server_info_json FROM servers").fetchall()
    finally:
        con.close()
    labels = set()
    for settings_json, plan_json, info_json in servers:
        settings, plan, info = json.loads(settings_json), json.loads(plan_json), json.loads(info_json)
        facts, cache = info["log_facts"], info["cache_config_info"]
        labels.add(settings["label"])
        assert info["version"] == "0.32.0" and info["models"][0]["max_model_len"] == 1024 == facts["max_model_len"]
        assert int(cache["kv_cache_size_tokens"]) == facts["kv_tokens"] == plan["kv_tokens"], settings["label"]
        if settings["label"] == "ar":
            assert info["spec_decode"] == {}
            assert facts["kv_tokens"] == int(cache["kv_cache_memory_bytes"]) // 2048
    assert labels == {"ar", "draft-tiny", "self-draft"}
