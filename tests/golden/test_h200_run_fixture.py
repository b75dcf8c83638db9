"""`specbench run` against real SGLang 0.5.15.post1 on the lent H200 (issue 7, item 3), kept as a fixture.

tests/data/h200-run-sglang-0.5.15.post1/ holds what the device run wrote: the SQLite store (`h200.db`), both servers'
whole logs, the report it rendered there, and the run's console output. Matrix: examples/h200-sglang-ar-vs-mtp.toml
(Qwen3.6-27B dummy weights, --skip-tokenizer-init, token ids to the native /generate; AR vs MTP x concurrency 1, 4).
CI has no GPU: these tests read the store and logs, and render the report again from the store."""

from __future__ import annotations

import json
import shutil
import sqlite3
import struct
from pathlib import Path

from paths import DATA
from specbench.contracts_inputs import PlanOptions
from specbench.doctor.doctor import diagnose_file
from specbench.plan.api import plan_command

RUN = DATA / "h200-run-sglang-0.5.15.post1"


def _db(tmp_path: Path) -> Path:
    p = tmp_path / "h200.db"  # copy: opening a store may write (WAL); the fixture stays untouched
    shutil.copy(RUN / "h200.db", p)
    return p


def test_store_holds_every_cell_done_with_speculative_fields(tmp_path):
    con = sqlite3.connect(_db(tmp_path))
    cells = con.execute("select label, status, metrics_json from cells").fetchall()
    assert sorted(c[0] for c in cells) == ["ar", "ar", "mtp", "mtp"]
    assert all(c[1] == "done" for c in cells)
    for label, _, mj in cells:
        m = json.loads(mj)
        assert m["completed"] == 8 and m["failed"] == 0 and m["output_throughput"] > 0
        if label == "mtp":
            assert m["accept_length_mean"] >= 1.0 and m["speedup"] is not None
        else:
            assert m["accept_length_mean"] is None
    # per-request SGLang meta_info: spec_verify_ct only for the MTP server's requests
    n, with_ct = con.execute("select count(*), sum(spec_verify_ct is not null) from requests").fetchone()
    assert (n, with_ct) == (32, 16)
    # effective arguments read back from /get_server_info
    for (info,) in con.execute("select server_info_json from servers"):
        si = json.loads(info)
        assert si["source"] == "/get_server_info" and si["info"]["skip_tokenizer_init"] is True


def test_server_logs_are_diagnosed_and_planned(tmp_path):
    con = sqlite3.connect(_db(tmp_path))
    for sid, cmd in con.execute("select server_id, command_json from servers"):
        log = RUN / f"{sid}-boot1.log"
        d = diagnose_file(log).to_json()
        f = d["facts"]
        assert d["status"] == "started", d["failure"]
        r = plan_command(json.loads(cmd), PlanOptions(
            engine_version="0.5.15.post1", gpu="h200", model_config="Qwen/Qwen3.6-27B-bf16-derived",
            avail_before_load_gib=f["avail_before_load_gib"], weights_gib=f["weights_gib"],
            draft_weights_gib=f["draft_weights_gib"], fixes=False))
        assert r["status"] == "ok"
        assert abs(r["kv_tokens"] - f["kv_tokens"]) <= 0.02 * f["kv_tokens"]
        assert r["max_mamba_cache_size"] == f["max_mamba_cache_size"]
        assert r["max_running_requests"] == f["max_running_requests"]


def _png_size(p: Path) -> tuple[int, int]:
    b = p.read_bytes()
    assert b[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", b[16:24])


def test_report_renders_from_the_device_store(tmp_path):
    from typer.testing import CliRunner

    from specbench.cli import app

    out = tmp_path / "report"
    db = _db(tmp_path)
    res = CliRunner().invoke(app, ["report", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output
    html = (out / "report.html").read_text()
    con = sqlite3.connect(db)
    for (cid,) in con.execute("select cell_id from cells"):
        assert cid in html
    for png in ("throughput.png", "tpot.png", "speedup.png", "pareto.png", "accept_length.png", "memory.png"):
        w, h = _png_size(out / png)
        assert w > 200 and h > 100
    # the report the device itself rendered is kept beside the store
    assert (RUN / "report" / "report.md").read_text().count("cell-") >= 4
