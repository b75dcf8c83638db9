"""The H100 MoE store (tests/data/h100-moe-sglang-0.5.15.post1, issue 35): the H200 MoE matrix on the other GPU kind,
cut by the device's time after AR and EAGLE3 at simulated accept 1.5 and resumed by a later session for sim 2.5 and
3.5. Read back from the real SQLite file: the example expands to the stored cells, every one done with two repeats
of real requests, and SGLang's verify counts give each cell's simulated accept length."""

from __future__ import annotations

import json
import sqlite3

import pytest

from paths import DATA, ROOT
from predict_stores import local_matrix
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import load_matrix

STORE = DATA / "h100-moe-sglang-0.5.15.post1" / "h100-moe.db"


def test_the_store_holds_the_matrix_it_ran(tmp_path):
    spec, _ = load_matrix(local_matrix(tmp_path, ROOT / "examples" / "h100-sglang-qwen3-moe-eagle3.toml"))
    assert spec.plan.gpu == "H100"
    _, cells = expand(spec)
    con = sqlite3.connect(f"file:{STORE}?mode=ro", uri=True)
    try:
        stored = {(label, json.loads(cl)["concurrency"]): status
                  for label, cl, status in con.execute("SELECT label, client_json, status FROM cells")}
        assert set(stored) == {(c.label, c.client["concurrency"]) for c in cells}
        assert set(stored.values()) == {"done"} and len(stored) == 16
        for sim in (1.5, 2.5, 3.5):
            out, verify = con.execute(
                "SELECT SUM(r.output_tokens), SUM(r.spec_verify_ct) FROM requests r JOIN cells c USING (cell_id) "
                "WHERE c.label = ? AND r.error IS NULL", (f"eagle3-sim{sim}",)).fetchone()
            assert out / verify == pytest.approx(sim, abs=0.1)
        repeats = dict(con.execute("SELECT c.label || ' ' || json_extract(c.client_json, '$.concurrency'), "
                                   "COUNT(DISTINCT r.repeat) FROM requests r JOIN cells c USING (cell_id) "
                                   "GROUP BY c.cell_id"))
        assert len(repeats) == 16 and set(repeats.values()) == {2}
        (mode,) = con.execute("PRAGMA journal_mode").fetchone()
        assert mode == "delete"
    finally:
        con.close()
