"""The H100 hybrid store (tests/data/h100-hybrid-sglang-0.5.15.post1, issue 35): Qwen3.6-27B (Gated DeltaNet) with
AR, its own MTP layer (simulated accept 2.5) and the DFlash drafter at 16 and 8 tokens. Read back from the real SQLite
file and server logs: the example expands to the stored cells, all done; SGLang's verify counts give each
configuration's accept length; the planner's Mamba slots and caps are what each boot logged; replayed from its log,
the MTP boot (logged as EAGLE with no draft path) is planned on the target's own MTP layers, not on the matrix's
DFlash drafter; and the predictions written before the run held every measured speedup."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from paths import DATA, ROOT
from run_helpers import cli as sb
from specbench.matrix.expansion import expand
from specbench.matrix.toml_load import load_matrix

HERE = DATA / "h100-hybrid-sglang-0.5.15.post1"
STORE = HERE / "h100-hybrid.db"


@pytest.fixture(scope="module")
def con():
    c = sqlite3.connect(f"file:{STORE}?mode=ro", uri=True)
    yield c
    c.close()


def test_the_store_holds_the_matrix_it_ran(con):
    spec, _ = load_matrix(ROOT / "examples" / "h100-sglang-qwen36-27b-hybrid.toml")
    _, cells = expand(spec)
    stored = {cid: status for cid, status in con.execute("SELECT cell_id, status FROM cells")}
    assert set(stored) == {c.cell_id for c in cells} and set(stored.values()) == {"done"} and len(stored) == 24
    acc = dict(con.execute(
        "SELECT c.label, 1.0 * SUM(r.output_tokens) / SUM(r.spec_verify_ct) FROM requests r JOIN cells c "
        "USING (cell_id) WHERE r.error IS NULL AND c.label != 'ar' GROUP BY c.label"))
    assert acc["mtp-sim2.5"] == pytest.approx(2.5, abs=0.1)
    assert acc["dflash16"] == pytest.approx(1.0, abs=0.05) and acc["dflash8"] == pytest.approx(1.0, abs=0.05)
    (mode,) = con.execute("PRAGMA journal_mode").fetchone()
    assert mode == "delete"


def _logged(text: str, pattern: str) -> int:
    m = re.search(pattern, text)
    assert m, pattern
    return int(m.group(1))


def test_planned_mamba_slots_and_caps_are_what_each_boot_logged(con):
    for sid, plan_json, log in con.execute("SELECT server_id, plan_json, log_text FROM servers"):
        plan = json.loads(plan_json)
        assert plan["max_mamba_cache_size"] == _logged(log, r"max_mamba_cache_size: (\d+)"), sid
        assert plan["max_running_requests"] == _logged(log, r"max_running_requests=(\d+), context_len"), sid
        kv = _logged(log, r"#tokens: (\d+)")
        assert abs(plan["kv_tokens"] / kv - 1) < 0.035, (sid, plan["kv_tokens"], kv)


def test_the_mtp_boot_replays_on_the_targets_own_layers():
    log = (HERE / "srv-9e9eff7d9178-boot1.log").read_text()
    assert "speculative_algorithm='EAGLE'" in log and "speculative_draft_model_path=None" in log
    r = sb("plan", "--from-log", str(HERE / "srv-9e9eff7d9178-boot1.log"), "--model-config",
           "Qwen/Qwen3.6-27B-bf16-derived", "--draft-config", "specforge/qwen3.6-27b-dflash", "--gpu", "H100",
           "--engine-version", "0.5.15.post1", "--no-fixes", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "ok" and doc["draft_model"] is None
    assert any("is not used" in n and "own MTP layers" in n for n in doc["notes"])
    assert doc["max_mamba_cache_size"] == 29 and doc["max_running_requests"] == 5
    assert doc["kv_tokens"] == pytest.approx(_logged(log, r"#tokens: (\d+)"), rel=0.005)


def test_the_predictions_written_before_held_every_speedup(con):
    meas = {}
    for cid, label, client, metrics in con.execute("SELECT cell_id, label, client_json, metrics_json FROM cells"):
        cl = json.loads(client)
        meas[cid] = (label, cl["concurrency"], cl["prompt_tokens"], json.loads(metrics)["output_throughput"])
    ar = {(c, p): t for label, c, p, t in meas.values() if label == "ar"}
    checked = 0
    for name, labels in (("prediction-shipped-hybrid.json", {"mtp-sim2.5"}),
                         ("prediction-shipped-hybrid-al1.json", {"dflash16", "dflash8"})):
        for p in json.loads((HERE / name).read_text())["cells"]:
            if p["label"] in labels:
                label, c, prompt, tput = meas[p["cell"]]
                assert p["calibration_state"] == "extrapolated"
                assert p["speedup_lo"] <= tput / ar[(c, prompt)] <= p["speedup_hi"], (label, c, prompt)
                checked += 1
    assert checked == 18
