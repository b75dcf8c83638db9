"""The load generator notices when it was itself held up (load/stall.py): a client off the CPU stamps every read late,
so its TTFT/TPOT/throughput describe the client, and the cell says so in `client_warning` instead of passing them
off as the server's.

- the watch sees a blocked event loop (a lower bound only: a blocking sleep is never shorter than asked);
- the metrics' rule: a warning above 5 % of the measured time stalled, none at or below, the numbers in its text;
- end to end: `specbench run` against the instant server's ground-truth scheduler, the runner SIGSTOPped for 0.8 s
  while its cell is measured: the cell's metrics and the run's summary carry the warning, the stall at least 0.7 s.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proc_helpers import free_port
from run_helpers import ROOT, _matrix_head, make_tokenizer, rows, wait
from specbench.load.stall import STALLED_SHARE_MAX, Stalls, StallWatch, client_stall_metrics


def test_the_watch_sees_a_blocked_event_loop() -> None:
    async def blocked() -> Stalls:
        watch = StallWatch()
        watch.start()
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # a callback that holds the loop, as a process off the CPU does
        await asyncio.sleep(0.05)
        return await watch.stop()

    got = asyncio.run(blocked())
    assert got.longest_s >= 0.25 and got.total_s >= got.longest_s, got


def test_a_cell_warns_only_above_the_stalled_share() -> None:
    over = client_stall_metrics(Stalls(0.2, 0.3), 2.0)  # 15 %
    assert over["client_stalled_share"] == 0.15 and over["client_stall_ms_max"] == 200.0
    assert isinstance(over["client_warning"], str)
    assert "300 ms of 2000 ms" in over["client_warning"] and "longest 200 ms" in over["client_warning"]
    at = client_stall_metrics(Stalls(0.05, STALLED_SHARE_MAX * 2.0), 2.0)
    assert at["client_warning"] is None
    assert client_stall_metrics(Stalls(), 1.0) == {"client_stall_ms_max": 0.0, "client_stalled_share": 0.0,
                                                   "client_warning": None}
    assert Stalls(0.1, 0.2).merged(Stalls(0.3, 0.3)) == Stalls(0.3, 0.5)


OUT = 48


def test_a_runner_stopped_mid_cell_says_its_numbers_measure_the_client(tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    cmd = [sys.executable, "-m", "specbench.testing.instant_server", "--step-ms", "10", "--truth-file", str(truth)]
    m = tmp_path / "m.toml"
    m.write_text(_matrix_head("stall", cmd, free_port(), make_tokenizer(tmp_path / "tok"), ready_s=30, stop_s=5)
                 + f"""
[[server.spec]]
label = "ar"

[client]
concurrency = 1
prompt_tokens = 16
output_tokens = {OUT}
num_requests = 6
warmup_requests = 0
""")
    store = tmp_path / "r.sqlite"
    runner = subprocess.Popen([sys.executable, "-m", "specbench", "run", str(m), "--store", str(store),
                               "--no-progress"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # two measured requests finished at the server (the readiness probe asks fewer tokens): the cell is mid-way
        wait(lambda: truth.is_file() and sum(r[0] == OUT for r in json.loads(truth.read_text())["requests"]) >= 2,
             60, "the cell's second request")
        os.kill(runner.pid, signal.SIGSTOP)
        time.sleep(0.8)
        os.kill(runner.pid, signal.SIGCONT)
        out, err = runner.communicate(timeout=120)
    finally:
        if runner.poll() is None:
            os.kill(runner.pid, signal.SIGCONT)
            runner.kill()
    assert runner.returncode == 0, err
    (status, mj), = rows(store, "SELECT status, metrics_json FROM cells")
    metrics = json.loads(mj)
    assert status == "done" and metrics["completed"] == 6
    assert metrics["client_stall_ms_max"] >= 700, metrics["client_stall_ms_max"]
    assert metrics["client_stalled_share"] > STALLED_SHARE_MAX
    assert "held off its event loop" in metrics["client_warning"]
    assert f"note: ar tp=1 c=1: {metrics['client_warning']}" in " ".join(out.split()), out


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() (asyncio.run's Ctrl-C is a cancel) is 3.11+")
def test_a_cancel_of_the_load_that_lands_while_the_stall_watch_stops_is_not_absorbed() -> None:
    """asyncio.run answers a Ctrl-C by cancelling the load's task; landing while `StallWatch.stop()` awaited its own
    cancelled watch, it was swallowed there, the load returned normally and the run went on. It propagates now."""
    async def load() -> str:
        watch = StallWatch()
        watch.start()
        await asyncio.sleep(0)
        me = asyncio.current_task()
        assert me is not None
        asyncio.get_running_loop().call_soon(me.cancel)  # runs while stop() awaits the cancelled watch
        await watch.stop()
        return "absorbed"

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(load())


def test_the_stall_watch_still_stops_quietly_when_only_it_is_cancelled() -> None:
    async def load() -> float:
        watch = StallWatch()
        watch.start()
        await asyncio.sleep(0.01)
        return (await watch.stop()).total_s

    assert asyncio.run(load()) >= 0.0
