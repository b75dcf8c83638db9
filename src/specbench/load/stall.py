"""Was the load generator itself held up? A watch on the client's own event loop over the measured window.

Every time the client stamps (load/stream.py: one `perf_counter()` per socket read) it is the event loop that runs;
when the process is off the CPU (a busy machine: other processes on 2 cores) or a callback blocks the loop, reads
wait in the kernel and are stamped late: TTFT, TPOT and ITL stretch and the throughput falls, although the server
generated on time (seen against the instant server's own times, tests/process/test_truth_saturation.py: a c=4 cell read
20.0 ms a token where the server had stepped 12.0 ms, after pauses of 110-210 ms between the client's reads).

The watch sleeps PERIOD_S at a time and measures how late each wake-up is. A wake-up later than LATE_S is a stall
(an idle loop wakes within ~1 ms; a stall of tens of ms is the process not running); the stalls' sum over the
measured time is the share of it during which no read could be stamped on time. A cell whose share exceeds
STALLED_SHARE_MAX says so (`client_warning`): its latencies and throughput measure the client, not the server.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

# 40 wake-ups a second. At 10 ms (100 a second) the client spent 10 % more CPU per token at c=64 against a 5 ms-step
# server (benchmarks/stall_watch_overhead.py, RESULTS.md 2026-12-03); a stall is measured from its wake-up's due
# time, so a longer period undercounts each stall by at most one period.
PERIOD_S = 0.025
LATE_S = 0.020  # a wake-up this late is a stall: far above an idle loop's lateness (< 1 ms)
STALLED_SHARE_MAX = 0.05  # the share of a cell's measured time stalled that the cell still reports without a warning


@dataclass(frozen=True)
class Stalls:
    """The stalls of one measured window: the longest, and their sum (both in seconds)."""

    longest_s: float = 0.0
    total_s: float = 0.0

    def merged(self, other: Stalls) -> Stalls:
        return Stalls(max(self.longest_s, other.longest_s), self.total_s + other.total_s)


class StallWatch:
    """Started before the first measured send, stopped after the last completion: `stop()` gives the `Stalls`."""

    def __init__(self) -> None:
        self._longest = 0.0
        self._total = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(PERIOD_S)
            late = time.perf_counter() - t0 - PERIOD_S
            if late > LATE_S:
                self._longest = max(self._longest, late)
                self._total += late

    async def stop(self) -> Stalls:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                cancelling = getattr(asyncio.current_task(), "cancelling", None)  # Python >= 3.11
                if cancelling is not None and cancelling():  # this task was cancelled too (asyncio.run's answer to
                    raise                                     # a Ctrl-C): never absorbed here
        return Stalls(self._longest, self._total)


def client_stall_metrics(stalls: Stalls, duration_s: float) -> dict[str, object]:
    """metrics_json's `client_stall_ms_max`, `client_stalled_share` (the stalls' sum / the measured time) and
    `client_warning` (None unless that share is above STALLED_SHARE_MAX)."""
    share = stalls.total_s / duration_s if duration_s > 0 else 0.0
    warn = None
    if share > STALLED_SHARE_MAX:
        warn = (f"the load generator was held off its event loop for {1000 * stalls.total_s:.0f} ms of "
                f"{1000 * duration_s:.0f} ms measured ({100 * share:.0f} %, longest {1000 * stalls.longest_s:.0f} ms): "
                "its TTFT/TPOT/ITL are late and its throughput low by up to that; rerun on a quieter machine")
    return {"client_stall_ms_max": 1000.0 * stalls.longest_s, "client_stalled_share": share, "client_warning": warn}
