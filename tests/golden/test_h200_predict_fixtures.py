"""The H200 stores recorded for the step-cost model (issue 25): what their READMEs say they hold, read back from the
real SQLite files: the matrix expands to the stored cells (label x concurrency), every cell is done with two repeats of real requests,
SGLang's verify counts give the simulated accept lengths, each server's whole log is kept beside the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from paths import ROOT
from predict_stores import local_matrix
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import load_matrix

CASES = [("h200-sglang-qwen3-moe-eagle3.toml", "h200-moe-sglang-0.5.15.post1/h200-moe.db"),
         ("h200-sglang-qwen3-8b-eagle3.toml", "h200-dense8b-sglang-0.5.15.post1/h200-dense8b.db")]


@pytest.mark.parametrize("example,store", CASES, ids=[c[0] for c in CASES])
def test_store_holds_the_matrix(tmp_path, example, store):
    spec, _ = load_matrix(local_matrix(tmp_path, ROOT / "examples" / example))
    _, cells = expand(spec)
    db = ROOT / "tests" / "data" / store
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        # the cell ids hash the drafter's folder (/tmp/models/... on the device, a temporary one here): compare
        # what each cell ran instead
        stored = {(label, json.loads(cl)["concurrency"]): status
                  for label, cl, status in con.execute("SELECT label, client_json, status FROM cells")}
        assert set(stored) == {(c.label, c.client["concurrency"]) for c in cells} == {
            (lab, conc) for lab in ("ar", "eagle3-sim1.5", "eagle3-sim2.5", "eagle3-sim3.5") for conc in (1, 4, 16, 32)}
        assert set(stored.values()) == {"done"}
        for label, want in (("eagle3-sim1.5", 1.5), ("eagle3-sim2.5", 2.5), ("eagle3-sim3.5", 3.5)):
            out, verify = con.execute(
                "SELECT SUM(r.output_tokens), SUM(r.spec_verify_ct) FROM requests r JOIN cells c USING (cell_id) "
                "WHERE c.label = ? AND r.error IS NULL", (label,)).fetchone()
            assert out / verify == pytest.approx(want, abs=0.06)
        repeats = {r for (r,) in con.execute("SELECT DISTINCT repeat FROM requests")}
        assert repeats == {0, 1}
        logs = [Path(p).name for (p,) in con.execute("SELECT log_path FROM servers")]
    finally:
        con.close()
    assert len(logs) == 4 and all((db.parent / name).is_file() for name in logs)
