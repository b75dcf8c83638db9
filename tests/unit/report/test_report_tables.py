"""Pure parts of the report: loading tolerance, speedup, series names, summaries, Pareto frontier, diagnosis lines."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from paths import DATA, ROOT
from specbench.errors import UserError
from specbench.report.compare import load_stores, unique_labels
from specbench.report.plot_pareto import pareto_front
from specbench.report.tables import build_tables, one_line, safe_name, summarize
from specbench.stored.read import load_store
from specbench.stored.schema import SCHEMA
from specbench.testing.synthetic import write_store


def _columns(ddl: str) -> dict[str, list[str]]:
    con = sqlite3.connect(":memory:")
    con.executescript(ddl.replace("IF NOT EXISTS ", ""))
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")] for t in tables}


def test_synthetic_schema_matches_docs_and_the_writer(tmp_path: Path) -> None:
    """docs/structures.md == matrix/store.py SCHEMA (the one owner) == what the synthetic writer and the runner's
    Store create; the report reads the owner's columns."""
    from specbench.matrix import store as store_mod
    from specbench.stored import read as report_load

    docs = ROOT / "docs" / "structures.md"
    block = re.search(r"```sql\n(.*?)```", docs.read_text(), re.S)
    assert block is not None
    assert _columns(SCHEMA) == _columns(block.group(1))
    con = sqlite3.connect(write_store(tmp_path / "synthetic.db"))
    written = {t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
               for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert written == _columns(SCHEMA)
    store_mod.Store(tmp_path / "runner.db").close()
    assert _columns(SCHEMA) == {t: list(c) for t, c in store_mod.COLUMNS.items()}
    for table, cols in (("servers", report_load.SERVER_COLUMNS), ("cells", report_load.CELL_COLUMNS),
                        ("requests", report_load.REQUEST_COLUMNS)):
        assert set(cols) <= set(store_mod.COLUMNS[table])


def test_speedup_is_throughput_over_ar_at_same_tp_and_concurrency(tmp_path: Path) -> None:
    store = load_store(write_store(tmp_path / "s.db"))
    tables = build_tables([store])
    cells = {c.cell_id: c for c in store.cells}
    rows = {r.cell_id: r for t in tables.phases for r in t.rows}
    row = rows["cell-tp4-ddtree-b8-c2"]
    want = (cells["cell-tp4-ddtree-b8-c2"].metrics["output_throughput"]
            / cells["cell-tp4-ar-c2"].metrics["output_throughput"])
    assert row.speedup == pytest.approx(want)
    assert row.speedup_source == "computed"
    assert rows["cell-tp4-ar-c2"].speedup_source == "baseline"
    assert rows["cell-tp1-ddtree-b16-c1"].speedup is None  # skipped: its server failed


def test_a_stored_speedup_that_is_not_the_throughputs_ratio_is_recomputed_and_named(tmp_path: Path) -> None:
    """Issue 34: the speedup shown is the pooled estimate its interval is centred on. A stored value that disagrees
    with the cells' own throughputs (an older estimator, an edit) is not shown as the measurement: the ratio is,
    and the note names the stored value. A stored value that agrees (to its 4 decimals) is the store's."""
    path = write_store(tmp_path / "s.db")
    con = sqlite3.connect(path)
    m = json.loads(con.execute("SELECT metrics_json FROM cells WHERE cell_id='cell-tp1-dflash-c1'").fetchone()[0])
    ar = json.loads(con.execute("SELECT metrics_json FROM cells WHERE cell_id='cell-tp1-ar-c1'").fetchone()[0])
    m["speedup"] = 9.5
    con.execute("UPDATE cells SET metrics_json=? WHERE cell_id='cell-tp1-dflash-c1'", (json.dumps(m),))
    m2 = json.loads(con.execute("SELECT metrics_json FROM cells WHERE cell_id='cell-tp1-dflash-c2'").fetchone()[0])
    ar2 = json.loads(con.execute("SELECT metrics_json FROM cells WHERE cell_id='cell-tp1-ar-c2'").fetchone()[0])
    m2["speedup"] = round(m2["output_throughput"] / ar2["output_throughput"], 4)
    con.execute("UPDATE cells SET metrics_json=? WHERE cell_id='cell-tp1-dflash-c2'", (json.dumps(m2),))
    con.commit()
    con.close()
    rows = {r.cell_id: r for t in build_tables([load_store(path)]).phases for r in t.rows}
    edited = rows["cell-tp1-dflash-c1"]
    assert edited.speedup == pytest.approx(m["output_throughput"] / ar["output_throughput"])
    assert edited.speedup_source == "recomputed" and "stored speedup 9.5000" in edited.note
    kept = rows["cell-tp1-dflash-c2"]
    assert kept.speedup_source == "store" and "stored speedup" not in kept.note
    assert kept.speedup == pytest.approx(m2["speedup"], abs=1e-4)


def test_best_per_point_picks_the_fastest_done_cell(tmp_path: Path) -> None:
    store = load_store(write_store(tmp_path / "s.db"))
    tables = build_tables([store])
    for b in tables.best:
        done = [c for c in store.cells if c.tp == b.tp and c.concurrency == b.concurrency and c.status == "done"]
        assert b.output_throughput == max(c.metrics["output_throughput"] for c in done)
    assert {(b.tp, b.concurrency) for b in tables.best} == {(tp, c) for tp in (1, 4, 8) for c in (1, 2, 4, 8)}


def test_summary_states(tmp_path: Path) -> None:
    assert summarize([load_store(write_store(tmp_path / "p.db"))]).state == "partial"
    full = write_store(tmp_path / "c.db", failing_server=None, failing_cell=None)
    assert summarize([load_store(full)]).state == "complete"
    empty = tmp_path / "e.db"
    sqlite3.connect(empty).executescript(SCHEMA)
    s = summarize([load_store(empty)])
    assert s.state == "empty" and "no cells" in s.headline
    failed = write_store(tmp_path / "f.db", tps=(1,), labels=("ddtree-b16",), failing_server=(1, "ddtree-b16"))
    s = summarize([load_store(failed)])
    assert s.state == "all-failed" and "nothing was measured" in s.headline


def test_old_store_without_tables_or_columns_reads_with_warnings(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE cells (cell_id TEXT, tp INTEGER, label TEXT, status TEXT, metrics_json TEXT)")
    con.execute("INSERT INTO cells VALUES ('c1', 1, 'ar', 'done', ?)", (json.dumps({"output_throughput": 10.0}),))
    con.execute("INSERT INTO cells VALUES ('c2', 1, 'dflash', 'done', 'not json')")
    con.commit()
    con.close()
    store = load_store(path)
    assert [c.cell_id for c in store.cells] == ["c1", "c2"]
    assert store.cells[1].metrics == {}
    assert any("servers" in w for w in store.warnings)
    assert any("not JSON" in w for w in store.warnings)
    tables = build_tables([store])
    assert tables.summary.state == "complete"


def test_missing_and_non_sqlite_files_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such results store"):
        load_store(tmp_path / "nope.db")
    bad = tmp_path / "bad.db"
    bad.write_text("this is a log, not a store\n")
    with pytest.raises(UserError, match="not an SQLite"):
        load_store(bad)
    with pytest.raises(UserError, match="not a file"):
        load_store(tmp_path)


def test_series_name_shows_settings_that_vary_within_a_label(tmp_path: Path) -> None:
    path = write_store(tmp_path / "s.db", tps=(1,), labels=("ar", "dflash"), failing_server=None, failing_cell=None)
    con = sqlite3.connect(path)
    for cid, client in con.execute("SELECT cell_id, client_json FROM cells WHERE cell_id LIKE '%-c1'").fetchall():
        c = json.loads(client)
        c["prompt_tokens"] = 8192
        con.execute("UPDATE cells SET client_json=? WHERE cell_id=?", (json.dumps(c), cid))
    con.commit()
    con.close()
    tables = build_tables([load_store(path)])
    series = {r.cell_id: r.series for t in tables.phases for r in t.rows}
    assert series["cell-tp1-dflash-c1"] == "dflash [in=8192]"
    assert series["cell-tp1-dflash-c2"] == "dflash [in=1024]"
    rows = {r.cell_id: r for t in tables.phases for r in t.rows}
    # c1 now has its own workload; its AR baseline is the AR cell with the same prompt length
    assert rows["cell-tp1-dflash-c1"].ar_throughput == rows["cell-tp1-ar-c1"].output_throughput


def test_compare_labels_and_series(tmp_path: Path) -> None:
    a = write_store(tmp_path / "x" / "run.db", tps=(1,), failing_server=None, failing_cell=None)
    b = write_store(tmp_path / "y" / "run.db", tps=(1,), failing_server=None, failing_cell=None, engine="vllm",
                    engine_version="0.11.0", seed=3)
    assert unique_labels([a, b]) == ["x/run", "y/run"]
    stores = load_stores([a, b])
    tables = build_tables(stores)
    names = {r.series for t in tables.phases for r in t.rows}
    assert "x/run: dflash" in names and "y/run: dflash" in names
    # speedups compare within a store only
    rows = {(r.store, r.cell_id): r for t in tables.phases for r in t.rows}
    r = rows[("y/run", "cell-tp1-dflash-c4")]
    assert r.ar_throughput == rows[("y/run", "cell-tp1-ar-c4")].output_throughput


def test_pareto_front() -> None:
    pts = [(1.0, 10.0), (2.0, 8.0), (1.5, 7.0), (3.0, 2.0), (2.0, 9.0), (0.5, 10.0)]
    front = pareto_front(pts)
    assert sorted(pts[i] for i in front) == [(1.0, 10.0), (2.0, 9.0), (3.0, 2.0)]
    for i, p in enumerate(pts):  # every point off the front is beaten on both axes by one on it
        if i not in front:
            assert any(pts[j][0] >= p[0] and pts[j][1] >= p[1] for j in front)


def test_one_line_diagnosis() -> None:
    diag = {"failure": {"kind": "no_request_slots", "message": "AssertionError: max_running_request is zero\nmore"},
            "explanation": "max_mamba_cache_size is 2.\nSecond line."}
    assert one_line(diag) == "no_request_slots: AssertionError: max_running_request is zero — max_mamba_cache_size is 2."
    assert one_line(None, "server failed to start") == "server failed to start"
    assert one_line(None, None) == "no diagnosis recorded"
    assert "\n" not in one_line("x" * 1000) and len(one_line("x" * 1000)) == 240


def test_safe_name() -> None:
    assert safe_name("cell-abc123") == "cell-abc123"
    assert safe_name("a/../b c:d") == "a_.._b_c_d"


def test_memory_rows_read_the_real_planner_contract(tmp_path: Path) -> None:
    """servers.plan_json as `specbench run` stores it: the planner's own dict for the incident's TP1 DFlash server."""
    api = pytest.importorskip("specbench.plan.api")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "nvidia/Qwen3.6-27B-NVFP4", "--tp", "1",
            "--mem-fraction-static", "0.75", "--context-length", "32768", "--speculative-algorithm", "DFLASH",
            "--speculative-draft-model-path", "z-lab/Qwen3.6-27B-DFlash", "--speculative-num-draft-tokens", "16",
            "--mamba-scheduler-strategy", "extra_buffer"]
    opts = api.PlanOptions(model_config="Qwen/Qwen3.6-27B-bf16-derived", draft_config="specforge/qwen3.6-27b-dflash",
                           gpu="RTX PRO 6000 Blackwell", engine_version="0.5.12", fixes=False)
    plans = {mrr: api.plan_command(argv + ["--max-running-requests", str(mrr)], opts) for mrr in (4, 8)}
    path = write_store(tmp_path / "s.db", tps=(1,), labels=("dflash", "ddtree-b16"), failing_server=None)
    con = sqlite3.connect(path)
    con.execute("UPDATE servers SET plan_json=? WHERE server_id='srv-tp1-dflash'", (json.dumps(plans[4]),))
    con.execute("UPDATE servers SET plan_json=? WHERE server_id='srv-tp1-ddtree-b16'", (json.dumps(plans[8]),))
    con.commit()
    con.close()
    rows = {m.server_id: m for m in build_tables([load_store(path)]).memory}
    ok, fails = rows["srv-tp1-dflash"], rows["srv-tp1-ddtree-b16"]
    p = plans[4]
    assert ok.plan_status == p["status"] == "ok" and fails.plan_status == plans[8]["status"]
    assert ok.weights == p["weights_gib"] and ok.draft == p["draft_weights_gib"]
    # the KV cache of the target and of the drafter (SGLang allocates the drafter's KV pool beside the target's: the
    # plan's "KV cache" row); before the plan's typed `memory` the report left the drafter's K and V out
    assert p["draft_k_size_gib"] and ok.kv == pytest.approx(p["k_size_gib"] + p["v_size_gib"] + 2 * p["draft_k_size_gib"])
    assert ok.kv == p["memory"]["kv_gib"] and ok.weights == p["memory"]["weights_gib"]
    assert ok.mamba == pytest.approx(sum(p[k] or 0 for k in ("conv_state_gib", "ssm_state_gib",
                                                             "intermediate_ssm_state_gib",
                                                             "intermediate_conv_window_gib") if k in p),
                                       abs=0.01)  # the split sums the unrounded pools, the keys are rounded
    assert ok.total == p["gpu_total_gib"]
    assert sum(v for _, v in ok.parts) == pytest.approx(ok.total)
    assert ok.max_running_requests == p["max_running_requests"] and ok.kv_tokens == p["kv_tokens"]


def test_best_when_ar_wins_names_the_fastest_speculative_config(tmp_path: Path) -> None:
    path = write_store(tmp_path / "s.db", tps=(1,), labels=("ar", "dflash", "ddtree-b4"), concurrencies=(1,),
                       failing_server=None, failing_cell=None)
    con = sqlite3.connect(path)
    for cid, tput in (("cell-tp1-ar-c1", 100.0), ("cell-tp1-dflash-c1", 60.0), ("cell-tp1-ddtree-b4-c1", 80.0)):
        m = json.loads(con.execute("SELECT metrics_json FROM cells WHERE cell_id=?", (cid,)).fetchone()[0])
        m["output_throughput"] = tput
        con.execute("UPDATE cells SET metrics_json=? WHERE cell_id=?", (json.dumps(m), cid))
    con.commit()
    con.close()
    (best,) = build_tables([load_store(path)]).best
    assert best.series == "ar" and best.is_baseline and best.speedup_text == "1.00× (AR is fastest)"
    assert best.best_spec == "ddtree-b4" and best.best_spec_speedup == pytest.approx(0.8)
    assert best.best_spec_text == "ddtree-b4 0.80×"


def test_real_h200_store_speedups_and_memory(tmp_path: Path) -> None:
    """The store `specbench run` wrote on a real H200 (tests/data/h200-run-sglang-0.5.15.post1): AR vs MTP."""
    import shutil

    src = DATA / "h200-run-sglang-0.5.15.post1" / "h200.db"
    if not src.is_file():
        pytest.skip("the H200 run fixture is not in this checkout")
    db = tmp_path / "h200.db"
    shutil.copy(src, db)
    store = load_store(db)
    tables = build_tables([store])
    rows = {(r.label, r.concurrency): r for t in tables.phases for r in t.rows}
    for c in (1, 4):
        mtp, ar = rows[("mtp", c)], rows[("ar", c)]
        # the runner stored it (matrix/runner.py fill_speedups, 4 decimals): the report shows that value
        assert mtp.speedup_source == "store"
        assert mtp.speedup == pytest.approx(mtp.output_throughput / ar.output_throughput, abs=1e-4)
        assert mtp.speedup < 1.0  # random MTP weights: drafts are rejected, the draft work only costs
        assert mtp.accept_length == pytest.approx(1.02, abs=0.01)
    assert {b.series for b in tables.best} == {"ar"} and all(b.best_spec == "mtp" for b in tables.best)
    cells = {c.cell_id: c for c in store.cells}
    for r in rows.values():  # per-request accept lengths (requests.accept_len from spec_verify_ct) are read
        assert (len(cells[r.cell_id].accept_lengths) > 0) == (r.label == "mtp")
    mem = {m.series: m for m in tables.memory}
    assert mem["mtp"].draft and mem["mtp"].draft > 0 and not mem["ar"].draft
    assert mem["ar"].total == mem["mtp"].total and mem["ar"].headroom and mem["ar"].headroom > 0
