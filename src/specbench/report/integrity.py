"""What one cell's numbers rest on, as the report shows it (issue 34 item 4): the concurrency asked against what
ran, the waves, over-saturation, the prefix-cache reset, client stalls, early stops, failed requests, simulated
acceptance, and the warnings a decision must carry beside the cell's name.

Every value is read from the cell's stored keys (docs/contracts.md "Measurement truth", written by
matrix/cellrun.py::truth_metrics and load/integrity.py); a store written before a key existed shows it unknown
(None), except the waves, which its client settings give (`requests / effective concurrency`).

What warns (`Integrity.warnings`, each a short phrase):
- fewer than MIN_WAVES waves at c > 1: the cell measures the burst of its first prefills as much as decoding;
- effective concurrency below the asked one (the server's running cap): the cell ran another width than it says;
- a running cap other than its AR baseline's (`cap_differs_from_baseline`): the speedup compares other widths;
- one wave's first tokens several times another's in a closed loop that did not queue (`wave_ttft_jump`);
- over-saturation (requests queued at the server; in a rate cell also TTFT growth). A closed loop at c <= cap that
  a store written before the closed-loop rule (load/integrity.py::saturation) flagged on TTFT growth alone is read
  again by that rule here: not over-saturated;
- the prefix cache not emptied before the cell because the reset failed (a server that offers no reset route is
  stated in the integrity table, not warned: each repeat sends other prompts, matrix/cellrun.py::repeat_prompts);
- the client stalled (load/stall.py: its latencies and throughput measure the load generator);
- early stops, failed requests, a cycled dataset, a stream sent in bursts, a cap check that was not reached;
- random-token prompts with a real drafter (the acceptance is not the workload's; load/prompt_checks.py).
Simulated acceptance is stated (`simulated`), not warned: it is a method, named in the series' notes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specbench.load.prompt_checks import random_prompts_warning
from specbench.load.speedup import is_rate_cell
from specbench.matrix.cellrun import no_reset_route
from specbench.stored.records import CellRecord, first_repeat_in_send_order

MIN_WAVES = 3.0  # the floor: under 3 waves a closed-loop cell measures its synchronized prefills
# One wave's mean first-token time this many times another's, and at least JUMP_S more, in a closed loop that did not
# queue: a batch shape the server met for the first time (a kernel compiling or autotuning), or a stall outside it.
# Measured: the H100 hybrid store's AR and MTP cells at c = 2, 2,048 tokens (0.32-0.39 s in their first wave, 1.32 /
# 1.35 s in their second, both prompts prefilled together; their speedups read 0.90-0.95x where c = 1 and c = 4 read
# 0.69-0.77x: tests/data/h100-hybrid-sglang-0.5.15.post1); a cold first wave of a boot ran ~2.8x and 0.38 s
# slower (predict/observe.py::_steady), under both bounds.
JUMP_RATIO = 3.0
JUMP_S = 0.5


@dataclass(frozen=True)
class Integrity:
    """One cell's integrity, read from its stored keys."""

    asked: int | None  # the concurrency the matrix asked
    effective: int | None  # min(asked, running cap)
    cap: int | None  # the server's running cap
    cap_source: str | None
    observed: int | None  # the most requests the client saw generating at once
    cap_check: str | None  # agrees | not_reached | exceeded
    waves: float | None  # measured requests / effective concurrency
    oversaturated: bool | None
    saturation_reason: str | None
    ttft_growth: float | None
    cache_reset: bool | None  # the prefix cache was emptied before the measured run
    cache_reset_how: str | None
    stalled_share: float | None  # the client's stalled share of the measured window
    early_stops: int | None
    failed: int | None
    simulated: float | None  # the engine's simulated accept length
    closed_loop: bool = True
    warnings: tuple[str, ...] = ()

    @property
    def concurrency_text(self) -> str:
        """'16', or '16 (runs 8: cap)' where the cap held it lower."""
        if self.asked is None:
            return "–"
        if self.effective is not None and self.effective < self.asked:
            return f"{self.asked} (runs {self.effective}: cap)"
        return str(self.asked)


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _waves(cell: CellRecord, effective: int | None) -> float | None:
    """The stored `waves`, else the measured requests of one repeat (num_requests, raised to requests_per_concurrency x
    concurrency: matrix/cellrun.py::request_count) over the effective concurrency."""
    stored = _float(cell.metrics.get("waves"))
    if stored is not None:
        return stored
    c = cell.client
    n = _int(c.get("num_requests"))
    if n is None or not effective:
        return None
    k = _int(c.get("requests_per_concurrency"))
    conc = _int(c.get("concurrency"))
    if k and conc:
        n = max(n, k * conc)
    return n / effective


def _saturation(m: Mapping[str, Any], closed: bool, asked: int | None, cap: int | None) -> tuple[bool | None, str | None]:
    """The stored flag, read again by the closed-loop rule (module docstring) where it fired on TTFT growth alone."""
    flag, reason = m.get("oversaturated"), m.get("saturation_reason")
    if not isinstance(flag, bool):
        return None, None
    reason = reason if isinstance(reason, str) else None
    if flag and closed and not (asked is not None and cap is not None and asked > cap) and reason \
            and "queued" not in reason:
        return False, None
    return flag, reason


def integrity(cell: CellRecord) -> Integrity:
    """The cell's integrity, with the warning of load/prompt_checks.py when its prompts are random tokens with a
    real drafter."""
    m = cell.metrics
    random_prompts = random_prompts_warning(cell.client, cell.server)
    asked = cell.concurrency
    cap = _int(m.get("running_cap"))
    effective = _int(m.get("effective_concurrency"))
    if effective is None and asked is not None:
        effective = min(asked, cap) if cap is not None else asked
    closed = not is_rate_cell(cell.client)
    over, why = _saturation(m, closed, asked, cap)
    reset = m.get("prefix_cache_reset")
    reset_ok = reset.get("reset") if isinstance(reset, Mapping) and isinstance(reset.get("reset"), bool) else None
    how = reset.get("how") if isinstance(reset, Mapping) and isinstance(reset.get("how"), str) else None
    out = Integrity(
        asked=asked, effective=effective, cap=cap, cap_source=m.get("running_cap_source") or None,
        observed=_int(m.get("observed_concurrency")), cap_check=m.get("cap_check") or None,
        waves=_waves(cell, effective), oversaturated=over, saturation_reason=why,
        ttft_growth=_float(m.get("ttft_growth")), cache_reset=reset_ok, cache_reset_how=how,
        stalled_share=_float(m.get("client_stalled_share")) if isinstance(m.get("client_warning"), str) else None,
        early_stops=_int(m.get("early_stops")), failed=_int(m.get("failed")), simulated=cell.simulated_accept_len,
        closed_loop=closed)
    return _with_warnings(out, cell, random_prompts)


def wave_ttft_jump(cell: CellRecord, effective: int | None) -> tuple[float, float] | None:
    """(lowest, highest) mean TTFT over the complete waves of the cell's first repeat (its requests in send order,
    `effective` at a time), where the highest is JUMP_RATIO times the lowest and JUMP_S more; None otherwise, and
    for a cell without two complete waves or without its request rows."""
    if not effective or effective < 1:
        return None
    reqs = [r for r in cell.requests if r.ttft_s is not None and r.ok]
    if not reqs:
        return None
    mine = first_repeat_in_send_order(reqs)
    waves = [mine[i:i + effective] for i in range(0, len(mine) - effective + 1, effective)]
    if len(waves) < 2:
        return None
    means = [sum(r.ttft_s or 0.0 for r in w) / len(w) for w in waves]
    lo, hi = min(means), max(means)
    return (lo, hi) if hi >= JUMP_RATIO * lo and hi - lo >= JUMP_S else None


def _with_warnings(i: Integrity, cell: CellRecord, random_prompts: str | None) -> Integrity:
    m = cell.metrics
    w: list[str] = []
    if i.asked is not None and i.asked > 1 and i.closed_loop and i.waves is not None and i.waves < MIN_WAVES:
        w.append(f"{i.waves:.1f} waves at c={i.asked} (under {MIN_WAVES:g})")
    if i.asked is not None and i.effective is not None and i.effective < i.asked:
        w.append(f"ran {i.effective} at once, not {i.asked} (running cap {i.cap})")
    if m.get("cap_differs_from_baseline") is True:
        w.append(f"running cap {i.cap} against the AR baseline's {m.get('baseline_running_cap')}: other widths")
    if i.oversaturated:
        w.append(f"over-saturated ({i.saturation_reason})" if i.saturation_reason else "over-saturated")
    jump = wave_ttft_jump(cell, i.effective) if i.closed_loop and not i.oversaturated else None
    if jump is not None:
        w.append(f"one wave's first tokens took {jump[1]:.2f} s against {jump[0]:.2f} s in another (a batch shape "
                 "met for the first time, or a stall): not the steady state")
    if i.cache_reset is False and not no_reset_route(i.cache_reset_how):  # a reset that failed; none offered: stated
        w.append(f"prefix cache not emptied before the cell ({i.cache_reset_how})" if i.cache_reset_how
                 else "prefix cache not emptied before the cell")
    if i.stalled_share is not None:
        w.append(f"load generator stalled {100 * i.stalled_share:.0f}% of the time")
    if i.early_stops:
        w.append(f"{i.early_stops} requests stopped before their max_tokens")
    if i.failed:
        w.append(f"{i.failed} requests failed")
    if i.cap_check == "not_reached":
        w.append(f"at most {i.observed} generated at once against a cap of {i.cap}")
    if isinstance(m.get("dataset_warning"), str):
        w.append("the dataset cycles: a prefix cache can serve repeated prompts")
    if isinstance(m.get("stream_warning"), str):
        w.append("stream sent in bursts: TTFT/TPOT measure delivery")
    if random_prompts:
        w.append(random_prompts)
    return Integrity(**{**i.__dict__, "warnings": tuple(w)})
