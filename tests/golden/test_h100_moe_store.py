"""The H100 MoE store (tests/data/h100-moe-sglang-0.5.15.post1, issue 35): the H200 MoE matrix on the other GPU kind,
cut by the device's time after AR and EAGLE3 at simulated accept 1.5. Read back from the real SQLite file: the
example expands to the stored cells, the finished ones hold two repeats of real requests, SGLang's verify counts give
the simulated accept length, and the cells the deadline cut are pending (a later run resumes them), never done."""

from __future__ import annotations

import json
import sqlite3

import pytest

from paths import DATA, ROOT
from predict_stores import local_matrix
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import load_matrix

STORE = DATA / "h100-moe-sglang-0.5.15.post1" / "h100-moe-8of16.db"


def test_the_store_holds_the_matrix_it_ran_and_what_the_deadline_cut(tmp_path):
    spec, _ = load_matrix(local_matrix(tmp_path, ROOT / "examples" / "h100-sglang-qwen3-moe-eagle3.toml"))
    assert spec.plan.gpu == "H100"
    _, cells = expand(spec)
    con = sqlite3.connect(f"file:{STORE}?mode=ro", uri=True)
    try:
        stored = {(label, json.loads(cl)["concurrency"]): status
                  for label, cl, status in con.execute("SELECT label, client_json, status FROM cells")}
        assert set(stored) == {(c.label, c.client["concurrency"]) for c in cells}
        done = {k for k, s in stored.items() if s == "done"}
        assert done == {(lab, c) for lab in ("ar", "eagle3-sim1.5") for c in (1, 4, 16, 32)}
        assert {s for k, s in stored.items() if k not in done} == {"pending"}
        out, verify = con.execute(
            "SELECT SUM(r.output_tokens), SUM(r.spec_verify_ct) FROM requests r JOIN cells c USING (cell_id) "
            "WHERE c.label = 'eagle3-sim1.5' AND r.error IS NULL").fetchone()
        assert out / verify == pytest.approx(1.5, abs=0.06)
        repeats = dict(con.execute("SELECT c.label || ' ' || json_extract(c.client_json, '$.concurrency'), "
                                   "COUNT(DISTINCT r.repeat) FROM requests r JOIN cells c USING (cell_id) "
                                   "GROUP BY c.cell_id"))
        assert len(repeats) == 8 and set(repeats.values()) == {2}
        (mode,) = con.execute("PRAGMA journal_mode").fetchone()
        assert mode == "delete"
    finally:
        con.close()
