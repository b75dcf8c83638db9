"""GPU telemetry (issue 22 item 8): sampled through the stand-in `nvidia-smi` (tests/fake_gpus.py, a real
executable on PATH printing what the real one prints on an H200 node), stored in the `gpu_samples` table and
`metrics_json.gpu_telemetry` of a real SQLite store, and drawn by the report."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fake_gpus import install
from specbench.matrix import telemetry
from specbench.matrix.cellrun import CellOutcome
from specbench.matrix.store import Store


@pytest.fixture()
def smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    env = install(tmp_path / "bin", n=2)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # NVML absent: the nvidia-smi path
    return tmp_path


def test_parse_smi_reads_the_csv_and_skips_what_it_cannot() -> None:
    text = "0, NVIDIA H200, 81234, 97, 612.31\n1, NVIDIA H200, 1, 0, [N/A]\ngarbage\n"
    a, b = telemetry.parse_smi(text, 1.5)
    assert (a.gpu, a.name, a.memory_used_mib, a.utilization_pct, a.power_w, a.t) == ("0", "NVIDIA H200", 81234.0,
                                                                                     97.0, 612.31, 1.5)
    assert b.power_w is None and b.memory_used_mib == 1.0


def test_sampler_stores_and_summarises_through_the_standin(smi: Path) -> None:
    sampler = telemetry.Sampler(gpus=[1], interval_s=0.05)
    assert sampler.start()
    assert sampler.wait_for(3, timeout_s=60)  # an event, not a sleep: the stand-in is a Python process
    store = Store(smi / "s.db")
    out = telemetry.attach(CellOutcome("done", metrics={"completed": 1}), sampler, store, "cell-1")
    store.close()
    tel = out.metrics["gpu_telemetry"]
    (g,) = tel["gpus"]  # only the slot's GPU (index 1 of the two listed)
    assert g["gpu"] == "1" and g["name"] == "NVIDIA H200" and g["samples"] >= 3
    assert (g["utilization_pct_mean"], g["power_w_mean"], g["memory_used_mib_max"]) == (87.0, 412.5, 1.0)
    con = sqlite3.connect(smi / "s.db")
    rows = con.execute("SELECT cell_id, gpu, utilization_pct, power_w FROM gpu_samples").fetchall()
    con.close()
    assert len(rows) == g["samples"] and set(rows) == {("cell-1", "1", 87.0, 412.5)}


def test_no_gpu_means_nothing_sampled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    with telemetry.sampling() as s:
        pass
    out = CellOutcome("done", metrics={"completed": 1})
    assert telemetry.attach(out, s, None, "c") is out and s.samples == []


def test_an_old_store_gains_the_table_and_the_report_draws_telemetry(tmp_path: Path) -> None:
    from specbench.report.build import report_paths
    from specbench.testing.synthetic import write_store

    path = write_store(tmp_path / "old.db", tps=(1,), labels=("ar", "dflash"), failing_server=None,
                       failing_cell=None)
    Store(path).close()  # `specbench run` resuming an older store: the new table appears, nothing else changes
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM gpu_samples").fetchone() == (0,)
    for cid, mj in con.execute("SELECT cell_id, metrics_json FROM cells").fetchall():
        m = json.loads(mj)
        m["gpu_telemetry"] = {"interval_s": 1.0, "gpus": [{"gpu": "0", "name": "NVIDIA H200", "samples": 5,
                                                           "memory_used_mib_max": 120000.0, "utilization_pct_mean":
                                                           50.0 + m["concurrency"], "power_w_mean": 400.0}]}
        con.execute("UPDATE cells SET metrics_json=? WHERE cell_id=?", (json.dumps(m), cid))
    con.commit()
    con.close()
    w = report_paths([path], tmp_path / "rep")
    names = {p.name for p in w.pngs}
    assert {"gpu_memory.png", "gpu_util.png", "gpu_power.png"} <= names
    rows = [r for t in w.report.tables.phases for r in t.rows]
    assert {r.gpu_util_mean for r in rows} == {50.0 + c for c in (1, 2, 4, 8)}
