"""Throughput saturates as the known truth says: `specbench run` against the instant server's ground-truth scheduler
with a batch-dependent step (testing/instant_truth.py: a step with n requests running takes STEP_MS + PER_MS x n,
at most CAP run at once; autoregressive, 1 token per running request a step). Closed loop at concurrency c the
server runs n = min(c, CAP): TPOT = step(n), output throughput = n / step(n) (`instant_truth.step_model`).

Each cell is checked against what the server did while that cell ran (`--truth-file` `requests`: the server's own
times of every request, picked by the cell's [started_at, ended_at] in the store), never against an average over
the run: a busy machine's load changes from cell to cell (CI: a c=1 cell at 7.3 ms a token beside width-1 steps of
7.9 ms averaged over every cell failed the old bound). Stated tolerances: a sleep never ends early, so the server's
step is at least 0.97 x the model's (a request's steps include a few narrower ones as a wave fills and drains: at
c = 4 a mean width of 3.8 gives 0.98 x step(4) without any lateness), the stored TPOT (the client's reading) at least
0.8 x and the throughput at most 1.05 x; the stored TPOT is the server's within 20 % (a busy client reads late); the client's window holds the server's (it sends
first and reads last), so its throughput is at most 1.02 x the server's over its requests and, on a busy 2-core
machine, at least 0.8 x, unless the client says it was itself held up (`client_warning`, load/stall.py: a runner
off the CPU for 0.1-0.2 s at a time read a c=4 cell at 20.0 ms a token where the server stepped 12.0 ms, 0.63 x its
throughput; such a cell keeps only the bounds a late client cannot break). Tokens per server step (throughput x the server's step) is the batch width that ran: at
most n; above the cap the queue never drains, so at least 0.8 x CAP; below it a closed loop loses a round trip
between waves (at least 0.6 x n). The over-saturation flag fires where the queue never drains (c = 16 and 64 on a
cap of 8, closed loop) and not below the cap (c = 1, 4), nor at c = 16 when a slow arrival rate keeps fewer than
CAP in flight (nothing waited at the server)."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass

import pytest

from proc_helpers import free_port
from run_helpers import _matrix_head, cli_tty, make_tokenizer, rows
from specbench.testing.instant_truth import SATURATION, Finished, saturation_matrix, step_model

# slow: a whole `specbench run` or a process fault per test, seconds each: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

STEP_MS, PER_MS, CAP, OUT = (SATURATION[k] for k in ("step_ms", "per_running_ms", "cap", "output_tokens"))
AXES = "data=specbench-mini"  # the workload axis every cell sets (the default dataset), kept in the labels


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One `specbench run` of the saturation matrix (`closed`: c = 1, 4, 16, 64, 2 requests per unit of concurrency,
    at least 8; `paced`: c = 16 at 5/s, 32 requests, temperature 0.7), read back as a `Run`. Its terminal output goes to
    RUN_TEXT."""
    d = tmp_path_factory.mktemp("saturation")
    tok = make_tokenizer(d / "tok")
    cmd, body = saturation_matrix(str(d))
    m = d / "m.toml"
    m.write_text(_matrix_head("saturation", cmd, free_port(), tok, ready_s=30, stop_s=5) + body)
    store = d / "r.sqlite"
    r, shown = cli_tty("run", str(m), "--store", str(store))  # the progress display on, as on a terminal
    assert r.returncode == 0, shown
    table = [(json.loads(c), json.loads(x), lab, t0, t1) for c, x, lab, t0, t1 in
             rows(store, "SELECT client_json, metrics_json, label, started_at, ended_at FROM cells")]
    cells = {(c["concurrency"], c.get("request_rate", "inf")): x for c, x, *_ in table}
    truth = json.loads((d / "closed.json").read_text())
    served = [Finished(*r) for r in truth["requests"]]
    by_cell = {c["concurrency"]: Served.within(served, t0, t1) for c, _, lab, t0, t1 in table if lab == "closed"}
    RUN_TEXT.update(progress=shown, summary=r.stdout)
    return Run(cells, by_cell, int(truth["max_running_seen"]))


@dataclass(frozen=True)
class Served:
    """What the server did for one cell's requests (its own clock): how many, their tokens, the span from the first
    one's arrival to the last one's end, and the mean step after each one's first token (its TPOT, lateness and all)."""
    requests: int
    tokens: int
    span_s: float
    step_ms: float

    @classmethod
    def within(cls, served: list[Finished], t0: float, t1: float) -> Served:
        mine = [r for r in served if t0 <= r.submitted <= t1]
        assert mine, (t0, t1)
        tpot = [(r.done - r.first) / (r.tokens - 1) for r in mine]
        return cls(len(mine), sum(r.tokens for r in mine), max(r.done for r in mine) - min(r.submitted for r in mine),
                   1000.0 * statistics.fmean(tpot))

    @property
    def throughput(self) -> float:
        return self.tokens / self.span_s


@dataclass(frozen=True)
class Run:
    """The `run` fixture's: each cell's metrics by (concurrency, request_rate), what the closed-loop server did in
    each of its cells by concurrency, and the widest batch it ever ran."""
    cells: dict[tuple[int, object], dict]
    served: dict[int, Served]
    widest: int


RUN_TEXT: dict[str, str] = {}  # what the run showed: its progress display (stderr on a terminal) and summary


@pytest.mark.parametrize("c", [1, 4, 16, 64])
def test_tpot_and_throughput_follow_the_step_model(run: Run, c: int) -> None:
    x, want, srv = run.cells[(c, "inf")], step_model(STEP_MS, PER_MS, c, CAP), run.served[c]
    assert x["effective_concurrency"] == min(c, CAP) and x["running_cap"] == CAP
    assert srv.requests == x["completed"] and srv.tokens == x["total_output_tokens"]  # the cell's, and only those
    assert srv.step_ms >= 0.97 * want["tpot_ms"]  # the server's step is the model's, plus its sleeps' lateness
    # the stored TPOT is the client's reading: a first token read late (a busy client, below the stall detector's
    # threshold) shortens it (seen under load: 8.0 ms against a 9.0 ms step at c = 4); the server's step above keeps
    # the model's 0.97
    assert x["tpot_ms_mean"] >= 0.8 * want["tpot_ms"]
    thr = x["output_throughput"]
    assert thr <= 1.02 * srv.throughput and thr <= 1.05 * want["output_tokens_per_s"], (thr, srv, want)
    if x["client_warning"] is None:  # a client that was never held up reads what the server did
        # rel 0.25: `make test` runs the vLLM engine boots beside this on 2 cores; a client delayed below the stall
        # detector's threshold still reads up to ~21 % long (seen: 18.6 ms against the server's 15.4)
        assert x["tpot_ms_mean"] == pytest.approx(srv.step_ms, rel=0.25), (x["tpot_ms_mean"], srv, want)
        assert thr >= 0.8 * srv.throughput, (thr, srv, want, x["client_stalled_share"])


def test_throughput_saturates_at_the_cap(run: Run) -> None:
    """Tokens per step the server took (throughput x its step in that cell) is the batch width that ran: 1 and 4 below
    the cap (a closed loop's round trips between waves cost up to 40 %), CAP at c = 16 and 64 (the queue keeps the
    batch full), so the throughput stops growing at the cap however long the server's steps were in each cell."""
    width = {c: run.cells[(c, "inf")]["output_throughput"] * run.served[c].step_ms / 1000.0 for c in (1, 4, 16, 64)}
    trusted = {c for c in width if run.cells[(c, "inf")]["client_warning"] is None}  # see the module's docstring
    for c in width:
        low = 0.6 * c if c < CAP else 0.75 * CAP  # a busy 2-core host: 6.3 of 8 seen at c = 16 beside engine boots
        assert width[c] <= 1.05 * min(c, CAP) and (c not in trusted or width[c] >= low), (width, trusted)
    if {16, 64} <= trusted:
        assert width[64] == pytest.approx(width[16], rel=0.15), width
    assert run.widest == CAP  # and no step ever ran wider than the cap


def test_oversaturation_fires_only_where_requests_waited(run: Run) -> None:
    cells = run.cells
    for c in (16, 64):
        x = cells[(c, "inf")]
        assert x["queued"] and x["oversaturated"], c
        assert "queued" in x["saturation_reason"]
    for c in (1, 4):
        x = cells[(c, "inf")]
        assert not x["queued"] and not x["oversaturated"] and x["saturation_reason"] is None, c
    slow = cells[(16, 5.0)]  # 5 requests/s of ~0.1 s each: about one in flight, never CAP
    assert slow["peak_in_flight"] < CAP
    assert not slow["oversaturated"], slow["saturation_reason"]
    assert cells[(64, "inf")]["peak_in_flight"] == 64


def test_progress_and_summary_say_the_concurrency_that_ran(run: Run) -> None:
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
