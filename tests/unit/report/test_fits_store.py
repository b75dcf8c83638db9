"""The fastest setup that fits, from the real H200 stores of tests/data (issue 34 item 3): each row's limits are the
planner's plan stored for that server (servers.plan_json), read here with plain sqlite3 beside the table; its
throughput is a done cell's stored output_throughput at the concurrency the server reaches, or the nearest below
(marked), or the step-cost model's prediction there. The Qwen3.5 MTP servers of the simulated-acceptance store ran 24
wide against AR's 47 (their Mamba slots: tests/data/h200-simulated-sglang-0.5.15.post1/README.md); their cells at
c = 32 and 64 failed, so their throughput is the c = 8 cell's, below what they reach."""

from __future__ import annotations

import json
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import pytest

from paths import DATA
from specbench.decide.fits import FitRow
from specbench.report.fits import fit_rows
from specbench.report.fits_render import fits_html, fits_markdown
from specbench.stored.read import load_store

SIM = DATA / "h200-simulated-sglang-0.5.15.post1" / "h200-sim.db"
EAGLE3 = DATA / "h200-simulated-sglang-0.5.15.post1" / "h200-eagle3.db"
DENSE = DATA / "h200-dense8b-sglang-0.5.15.post1" / "h200-dense8b.db"
MOE = DATA / "h200-moe-sglang-0.5.15.post1" / "h200-moe.db"
RUN = DATA / "h200-run-sglang-0.5.15.post1" / "h200.db"
STORES = (SIM, EAGLE3, DENSE, MOE, RUN)


def _sql(path: Path, query: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _plans(path: Path) -> dict[str, dict]:
    """label -> the planner's stored plan of its server."""
    return {json.loads(s)["label"]: json.loads(p) for s, p in _sql(path, "SELECT settings_json, plan_json FROM servers")}


def _throughputs(path: Path) -> dict[tuple[str, int], float]:
    """(label, concurrency) -> the stored output_throughput of the done cells."""
    out = {}
    for label, client, metrics, status in _sql(path, "SELECT label, client_json, metrics_json, status FROM cells"):
        if status == "done":
            out[(label, json.loads(client)["concurrency"])] = json.loads(metrics)["output_throughput"]
    return out


@pytest.fixture(scope="module")
def rows() -> dict[Path, tuple[FitRow, ...]]:
    return {p: fit_rows([load_store(p)]) for p in STORES}


def by_label(rows: tuple[FitRow, ...]) -> dict[str, FitRow]:
    return {r.setup.label: r for r in rows}


def test_mtp_reaches_its_mamba_slots_and_ar_its_own(rows):
    plans = _plans(SIM)
    got = by_label(rows[SIM])
    for label, row in got.items():
        plan = plans[label]
        mamba = plan["max_mamba_cache_size"] // plan["mamba_ratio"]
        assert row.setup.reach.mamba == mamba and row.setup.reach.engine_cap == plan["max_running_requests"]
        assert row.setup.reach.reachable == mamba == plan["max_running_requests"]
        assert row.setup.reach.binds == "mamba"
        assert row.setup.reach.kv == plan["kv_tokens"] // (512 + 128)
    assert got["ar"].setup.reach.reachable == 47
    assert {got[k].setup.reach.reachable for k in got if k != "ar"} == {24}


def test_the_throughput_is_the_cell_that_ran_at_the_reach_else_the_nearest_below(rows):
    stored = _throughputs(SIM)
    got = by_label(rows[SIM])
    ar = got["ar"].throughput
    # the c = 64 cell ran 47 at once (the cap; the rest queued): it is the measurement at 47, not the c = 32 one
    assert ar.basis == "measured" and ar.at == 47 and ar.tok_s == stored[("ar", 64)]
    assert "asked 64, ran 47" in ar.note
    for label in ("mtp-sim1.5", "mtp-sim2.5", "mtp-sim3.5"):
        t = got[label].throughput
        assert t.basis == "measured_below" and t.at == 8 and t.tok_s == stored[(label, 8)]
        p = t.predicted_at_reach
        # the store's MTP cells ran at c <= 8: at 24 the model is outside its calibration, and says so (issue 35)
        assert p is not None and p.batch == 24 and p.calibration_state == "extrapolated"
        # ... and that batch 24 was measured by other classes (the H100 and H200 EAGLE3 stores ran 1-64): moved
        assert p.outside == ("batch 24, speculative cells calibrated 1-8 in this class; measured by the calibration's "
                             "other classes (H100, H200), moved here by the roofline",)
        assert p.tok_s_lo < p.tok_s < p.tok_s_hi
        assert "below the 24 it reaches" in t.note
    assert got["mtp-sim2.5"].per_request == pytest.approx(stored[("mtp-sim2.5", 8)] / 8)


def test_the_fastest_per_gpu_is_the_highest_per_gpu_row_that_fits_in_every_store(rows):
    for path, table in rows.items():
        eligible = [r for r in table if r.setup.reach.fits and r.per_gpu]
        best = [r for r in table if r.best]
        assert len(best) == 1, path
        assert best[0].per_gpu == max(r.per_gpu for r in eligible), path
        # what it ranks is the stored throughput itself (TP 1 everywhere here: per GPU = the cell's tok/s)
        if best[0].throughput.basis == "measured":
            stored = _throughputs(path)
            assert best[0].per_gpu in stored.values()
    assert by_label(rows[SIM])["ar"].best
    assert by_label(rows[DENSE])["eagle3-sim3.5"].best  # 3,651 tok/s at 32 against AR's 3,275
    assert by_label(rows[DENSE])["eagle3-sim3.5"].throughput.tok_s == _throughputs(DENSE)[("eagle3-sim3.5", 32)]


def test_an_open_row_is_one_whose_prediction_cannot_rule_it_out(rows):
    best = next(r for r in rows[SIM] if r.best).per_gpu
    for r in rows[SIM]:
        p = r.throughput.predicted_at_reach
        expect = p is not None and p.tok_s_hi is not None and p.tok_s_hi >= best * 0.97
        assert r.open == expect
    md = "\n".join(fits_markdown(rows[SIM]))
    for r in rows[SIM]:
        assert (f"open: TP 1 · {r.setup.label} was measured at 8" in md) == r.open


def test_the_matrix_concurrency_binds_where_the_server_holds_more(rows):
    plans = _plans(RUN)
    for label, row in by_label(rows[RUN]).items():
        reach = row.setup.reach
        assert reach.asked == 4 and reach.engine_cap == plans[label]["max_running_requests"] == 8
        assert reach.binds == "concurrency" and reach.reachable == 4
    dense_plans = _plans(DENSE)
    for label, row in by_label(rows[DENSE]).items():
        assert row.setup.reach.engine_cap == dense_plans[label]["max_running_requests"] == 32
        assert row.setup.reach.binds == "engine_cap" and row.setup.reach.mamba is None


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        self._in = tag == "td"

    def handle_endtag(self, tag):
        self._in = False if tag == "td" else self._in

    def handle_data(self, data):
        if self._in and self.rows:
            self.rows[-1].append(data)


def test_two_stores_render_one_table_per_workload_with_the_stored_numbers():
    table = fit_rows([load_store(SIM), load_store(EAGLE3)])
    assert len({r.workload for r in table}) == 2  # two models: never ranked in one table
    assert sum(r.best for r in table) == 2
    parser = _Cells()
    parser.feed(fits_html(table))
    body = [r for r in parser.rows if r]
    assert len(body) == len(table)
    eagle = _throughputs(EAGLE3)
    ar = next(r for r in body if r[1].startswith("ar") and r[8] == f"{eagle[('ar', 64)]:,.1f}")
    assert ar[1].endswith("★")  # Llama-3.1-8B AR at 64: the fastest per GPU of its workload


def test_a_launch_with_no_done_cell_at_or_below_its_reach_is_predicted_there():
    """The same real store with one server's done cells left out (as if every cell of it had failed): its row is the
    step-cost model's at the 24 it reaches, calibrated on H200 SGLang 0.5.15 (the shipped calibration), with an
    interval; without the model it is none, and says why."""
    from dataclasses import replace

    store = load_store(SIM)
    cut = replace(store, cells=tuple(c for c in store.cells if not (c.label == "mtp-sim2.5" and c.status == "done")))
    row = by_label(fit_rows([cut]))["mtp-sim2.5"]
    t = row.throughput
    assert t.basis == "predicted" and t.at == row.setup.reach.reachable == 24
    assert t.calibration == "extrapolated" and "batch 24" in t.note  # its model's MTP cells ran at c <= 8
    assert t.interval is not None and t.interval[0] < t.tok_s < t.interval[1]
    assert row.per_request == pytest.approx(t.tok_s / 24) and not t.ceiling
    # with its cells gone, its accept length is the simulated 2.5, not the 2.55 its cells measured (what the full
    # store's below-reach row predicts with): a shorter accept length, fewer tokens a step, a slower prediction
    full = by_label(fit_rows([store]))["mtp-sim2.5"].throughput.predicted_at_reach
    assert full is not None and full.accept_len is not None and full.accept_len > 2.5
    assert full.batch == 24 and full.tok_s is not None and t.tok_s < full.tok_s
    none = by_label(fit_rows([cut], predict=False))["mtp-sim2.5"].throughput
    assert none.basis == "none" and none.tok_s is None and "no prediction" in none.note


def test_a_server_the_planner_rejected_is_a_row_that_does_not_start(tmp_path: Path):
    """A real `specbench run` whose only server the planner rejects (27B BF16 weights under mem_fraction_static 0.3
    of a 96 GB card): nothing is launched, the store keeps the failing plan, and the row says it does not start."""
    import subprocess
    import sys

    from proc_helpers import free_port

    m = tmp_path / "m.toml"
    m.write_text(f"""
engine = "sglang"
command = ["{sys.executable}", "-c", "print('launched')", "--model-path", "Qwen/Qwen3.6-27B"]
port = {free_port()}
[plan]
model_config = "Qwen/Qwen3.6-27B-bf16-derived"
gpu = "RTX PRO 6000 Blackwell"
[server]
tp = 1
mem_fraction_static = 0.3
[client]
concurrency = [1, 4]
""")
    store = tmp_path / "r.sqlite"
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (plan_json,) = _sql(store, "SELECT plan_json FROM servers")[0]
    plan = json.loads(plan_json)
    assert plan["status"] == "fails"
    (row,) = fit_rows([load_store(store)])
    reach = row.setup.reach
    assert (reach.holds, reach.reachable, reach.fits, row.best) == (0, 0, False, False)
    assert reach.reason == f"does not start: {plan['error']}" and reach.asked == 4
    assert row.throughput.basis == "none" and row.throughput.note == reach.reason
    md = "\n".join(fits_markdown([row]))
    assert "does not start" in md and "Fastest per GPU that fits: none" in md
