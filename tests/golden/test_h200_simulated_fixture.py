"""The H200 simulated-acceptance fixture (tests/data/h200-simulated-sglang-0.5.15.post1/, recorded 2026-12-01 with
real SGLang 0.5.15.post1): the matrices still expand to the stored ids, SGLang applied the simulated accept length,
speedup orders with it, and the engine's own failure at high concurrency is recorded with its root cause."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from paths import ROOT
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import load_matrix

DATA = ROOT / "tests" / "data" / "h200-simulated-sglang-0.5.15.post1"


def _cells(db: Path, tmp: Path) -> list[dict]:
    copy = tmp / db.name
    shutil.copy(db, copy)
    con = sqlite3.connect(copy)
    rows = con.execute("select cell_id, label, client_json, status, metrics_json, reason, server_json from cells")
    out = [{"id": r[0], "label": r[1], "client": json.loads(r[2]), "status": r[3],
            "metrics": json.loads(r[4] or "null") or {}, "reason": r[5], "server": json.loads(r[6])} for r in rows]
    con.close()
    return out


def test_the_matrices_expand_to_the_stored_cells(tmp_path: Path) -> None:
    for matrix, db in (("h200-sglang-simulated-acceptance.toml", "h200-sim.db"),
                       ("h200-sglang-eagle3.toml", "h200-eagle3.db")):
        spec, _ = load_matrix(ROOT / "examples" / matrix)
        _, cells = expand(spec)
        assert {c.cell_id for c in cells} == {c["id"] for c in _cells(DATA / db, tmp_path)}


def test_sglang_applied_the_simulated_accept_length(tmp_path: Path) -> None:
    done = [c for c in _cells(DATA / "h200-sim.db", tmp_path) + _cells(DATA / "h200-eagle3.db", tmp_path)
            if c["status"] == "done" and c["server"].get("simulated_accept_len")]
    assert len(done) == 10
    for c in done:  # SGLANG_SIMULATE_ACC_METHOD=match-expected: the mean over a cell lands near the target
        assert abs(c["metrics"]["accept_length_mean"] - c["server"]["simulated_accept_len"]) < 0.2


def test_speedup_orders_with_the_accept_length_and_decays_with_concurrency(tmp_path: Path) -> None:
    cells = _cells(DATA / "h200-sim.db", tmp_path)
    at = {(c["label"], c["client"]["concurrency"]): c["metrics"].get("speedup") for c in cells if c["status"] == "done"}
    for conc in (1, 8):
        assert at[("mtp-sim1.5", conc)] < at[("mtp-sim2.5", conc)] < at[("mtp-sim3.5", conc)]
    eagle = {c["client"]["concurrency"]: c["metrics"]["speedup"] for c in _cells(DATA / "h200-eagle3.db", tmp_path)
             if c["label"] == "eagle3-sim2.5"}
    assert eagle[1] > eagle[8] > eagle[32] > eagle[64]


def test_the_engines_own_failure_is_recorded_with_its_root_cause(tmp_path: Path) -> None:
    failed = [c for c in _cells(DATA / "h200-sim.db", tmp_path) if c["status"] == "failed"]
    assert len(failed) == 6 and all(c["client"]["concurrency"] in (32, 64) for c in failed)
    assert any("The expanded size of the tensor (393216)" in (c["reason"] or "") for c in failed)
