"""`specbench export`: every cell, flattened metrics, CSV and JSON that read back to the store's values."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.errors import UserError
from specbench.report.export import BASE_COLUMNS, export
from specbench.stored.read import load_store
from specbench.testing.synthetic import write_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("exp") / "run.db", tps=(1, 4))


def _store_metrics(path: Path) -> dict[str, dict]:
    con = sqlite3.connect(path)
    return {cid: json.loads(m) if m else {} for cid, m in con.execute("SELECT cell_id, metrics_json FROM cells")}


def test_json_round_trip(store_path: Path) -> None:
    recs = json.loads(export([load_store(store_path)], "json"))
    metrics = _store_metrics(store_path)
    assert {r["cell_id"] for r in recs} == set(metrics)
    for r in recs:
        for key, value in metrics[r["cell_id"]].items():
            assert r[f"metrics.{key}"] == value  # floats, lists (accept_lengths) and nulls keep their values
        assert r["client.prompt_tokens"] == 1024
    ar = {(r["tp"], r["concurrency"]): r["metrics.output_throughput"] for r in recs if r["label"] == "ar"}
    for r in recs:
        if r["speedup_source"] == "computed":
            assert r["speedup_vs_ar"] == pytest.approx(r["metrics.output_throughput"] / ar[(r["tp"], r["concurrency"])])


def test_csv_round_trip(store_path: Path) -> None:
    text = export([load_store(store_path)], "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    metrics = _store_metrics(store_path)
    assert len(rows) == len(metrics)
    header = text.splitlines()[0].split(",")
    assert header[: len(BASE_COLUMNS)] == list(BASE_COLUMNS)
    for row in rows:
        m = metrics[row["cell_id"]]
        if not m:
            assert row["metrics.output_throughput"] == ""
            continue
        assert float(row["metrics.output_throughput"]) == m["output_throughput"]  # repr() floats are exact
        assert float(row["metrics.tpot_ms_p99"]) == m["tpot_ms_p99"]
        assert json.loads(row["metrics.accept_lengths"]) == m["accept_lengths"]
    statuses = {row["status"] for row in rows}
    assert statuses == {"done", "failed", "skipped"}


def test_unknown_format_is_a_user_error(store_path: Path) -> None:
    with pytest.raises(UserError, match="csv, json"):
        export([load_store(store_path)], "xlsx")


def test_cli_export_to_file_and_stdout(store_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "cells.json"
    res = subprocess.run([sys.executable, "-m", "specbench", "export", str(store_path), "--format", "json",
                          "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert len(json.loads(out.read_text())) == 40
    res = subprocess.run([sys.executable, "-m", "specbench", "export", str(store_path), "--format", "csv"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 41
    res = subprocess.run([sys.executable, "-m", "specbench", "export", str(store_path), "--format", "xml"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
