"""Throughput saturates as the known truth says: `specbench run` against the instant server's ground-truth scheduler
with a batch-dependent step (testing/instant_truth.py: a step with n requests running takes STEP_MS + PER_MS x n,
at most CAP run at once; autoregressive, 1 token per running request a step). Closed loop at concurrency c the
server runs n = min(c, CAP): TPOT = step(n), output throughput = n / step(n) (`instant_truth.step_model`).

Stated tolerances: a sleep never ends early, so the stored TPOT is at least 0.95 x the model's and the throughput at
most 1.05 x; a busy machine wakes late (a shared 2-core machine adds several ms a step), so the rest is checked against
the step the server really took at that batch width (`--truth-file`, `step_ms_by_running`): TPOT within 20 %,
throughput = n / that step within [0.7, 1.05] (a closed loop below the cap loses a round trip between waves). The over-saturation flag fires where the queue never
drains (c = 16 and 64 on a cap of 8, closed loop) and not below the cap (c = 1, 4), nor at c = 16 when a slow
arrival rate keeps fewer than CAP in flight (nothing waited at the server)."""

from __future__ import annotations

import json
import re

import pytest

from proc_helpers import free_port
from run_helpers import _matrix_head, cli_tty, make_tokenizer, rows
from specbench.testing.instant_truth import SATURATION, saturation_matrix, step_model

STEP_MS, PER_MS, CAP, OUT = (SATURATION[k] for k in ("step_ms", "per_running_ms", "cap", "output_tokens"))
AXES = "data=specbench-mini"  # the workload axis every cell sets (the default dataset), kept in the labels


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[tuple[int, object], dict], dict]:
    """Each cell's metrics by (concurrency, request_rate), and what the closed-loop server really did over its four
    cells (`closed`: c = 1, 4, 16, 64, 2 requests per unit of concurrency, at least 8; `paced`: c = 16 at 10/s,
    temperature 0.7). The run's terminal output goes to RUN_TEXT."""
    d = tmp_path_factory.mktemp("saturation")
    tok = make_tokenizer(d / "tok")
    cmd, body = saturation_matrix(str(d))
    m = d / "m.toml"
    m.write_text(_matrix_head("saturation", cmd, free_port(), tok, ready_s=30, stop_s=5) + body)
    store = d / "r.sqlite"
    r, shown = cli_tty("run", str(m), "--store", str(store))  # the progress display on, as on a terminal
    assert r.returncode == 0, shown
    cells = {(c["concurrency"], c.get("request_rate", "inf")): x for c, x in
             ((json.loads(c), json.loads(x)) for c, x in rows(store, "SELECT client_json, metrics_json FROM cells"))}
    RUN_TEXT.update(progress=shown, summary=r.stdout)
    return cells, json.loads((d / "closed.json").read_text())


RUN_TEXT: dict[str, str] = {}  # what the run showed: its progress display (stderr on a terminal) and summary


def _realized_step(truth: dict, n: int) -> float:
    """The mean step the server really took with n requests running (`step_ms_by_running`, instant_truth.py)."""
    return float(truth["step_ms_by_running"][str(n)][1])


@pytest.mark.parametrize("c", [1, 4, 16, 64])
def test_tpot_and_throughput_follow_the_step_model(run: tuple[dict, dict], c: int) -> None:
    cells, truth = run
    x, want = cells[(c, "inf")], step_model(STEP_MS, PER_MS, c, CAP)
    n = min(c, CAP)
    assert x["effective_concurrency"] == n and x["running_cap"] == CAP
    real = _realized_step(truth, n)
    assert real >= 0.97 * want["tpot_ms"]  # the server's step is the model's, plus its sleeps' lateness
    assert x["tpot_ms_mean"] >= 0.95 * want["tpot_ms"]
    assert x["tpot_ms_mean"] == pytest.approx(real, rel=0.2), (x["tpot_ms_mean"], real, want)
    thr, real_thr = x["output_throughput"], 1000.0 * n / real
    assert 0.7 * real_thr <= thr <= 1.05 * real_thr, (thr, real_thr, want)
    assert thr <= 1.05 * want["output_tokens_per_s"]


def test_throughput_saturates_at_the_cap(run: tuple[dict, dict]) -> None:
    """Above the cap the batch no longer widens: c = 16 and 64 both run 8 wide and their throughputs agree (20 %);
    from 1 to 4 and 4 to 16 the gain is the one the steps really taken give (+-25 %)."""
    cells, truth = run
    thr = {c: cells[(c, "inf")]["output_throughput"] for c in (1, 4, 16, 64)}
    real = {c: min(c, CAP) / _realized_step(truth, min(c, CAP)) for c in thr}
    assert thr[64] == pytest.approx(thr[16], rel=0.2)
    assert thr[4] / thr[1] == pytest.approx(real[4] / real[1], rel=0.25)
    assert thr[16] / thr[4] == pytest.approx(real[16] / real[4], rel=0.25)
    assert truth["max_running_seen"] == CAP


def test_oversaturation_fires_only_where_requests_waited(run: tuple[dict, dict]) -> None:
    cells, _ = run
    for c in (16, 64):
        x = cells[(c, "inf")]
        assert x["queued"] and x["oversaturated"], c
        assert "queued" in x["saturation_reason"]
    for c in (1, 4):
        x = cells[(c, "inf")]
        assert not x["queued"] and not x["oversaturated"] and x["saturation_reason"] is None, c
    slow = cells[(16, 10.0)]  # 10 requests/s of ~0.1 s each: about one in flight, never CAP
    assert slow["peak_in_flight"] < CAP
    assert not slow["oversaturated"], slow["saturation_reason"]
    assert cells[(64, "inf")]["peak_in_flight"] == 64


def test_progress_and_summary_say_the_concurrency_that_ran(run: tuple[dict, dict]) -> None:
    """Once the server is up its cap is known (8): a cell above it is labelled with what really runs, on its bar, on
    its finished line (with its throughput) and in the summary; one at or below it and the workload axes as before."""
    shown, summary = RUN_TEXT["progress"], RUN_TEXT["summary"]
    for c in (16, 64):
        assert f"closed tp=1 c={c} (runs {CAP}: cap) 24+{OUT} {AXES}" in shown, shown[-3000:]
        assert re.search(rf"cell done: closed tp=1 c={c} \(runs {CAP}: cap\) 24\+{OUT} {AXES} · [0-9.]+ tok/s, "
                         "over-saturated", shown), shown[-3000:]
        assert re.search(rf"\b{c} \(runs {CAP}: cap\)", summary), summary
    for c in (1, 4):
        assert re.search(rf"cell done: closed tp=1 c={c} 24\+{OUT} {AXES} · [0-9.]+ tok/s\s", shown), shown[-3000:]
    assert "c=1 (runs" not in shown and "c=4 (runs" not in shown
    # the paced cell: queued by its concurrency (the label says so) but never over-saturated; its axes kept
    assert re.search(rf"cell done: paced tp=1 c=16 \(runs {CAP}: cap\) 24\+{OUT} {AXES} temp=0.7 · [0-9.]+ tok/s\s",
                     shown), shown[-3000:]
