"""Stored metrics no run writes: a `done` cell whose numbers cannot be (issue 37 item 8).

A done cell measured at least one completed request (matrix/cellrun.py: a cell with none is `failed`), and every
throughput, duration and latency it stores is a count over time, so >= 0; a speculative cell's mean accept length
counts the bonus token, so >= 1. A store that says otherwise was damaged or edited: the report and the export show
the cell as `damaged` (load.py), its reason naming the value, and none of its numbers, rather than a throughput of
-120 tok/s or a speedup over zero requests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

DAMAGED = "damaged"
NON_NEGATIVE = ("output_throughput", "request_throughput", "total_token_throughput", "goodput", "duration_s",
                "failed")
LATENCY = re.compile(r"^(ttft|tpot|itl|e2e)_ms_")


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def impossible(status: str, metrics: Mapping[str, Any]) -> str | None:
    """What no run writes in a done cell's metrics, in words (None: nothing impossible, or not a done cell)."""
    if status != "done":
        return None
    completed = _number(metrics.get("completed"))
    if completed is not None and completed <= 0:
        return f"completed = {metrics.get('completed')} requests on a done cell"
    for key, value in metrics.items():
        v = _number(value)
        if v is not None and v < 0 and (key in NON_NEGATIVE or LATENCY.match(key)):
            return f"{key} = {value} < 0"
    accept = _number(metrics.get("accept_length_mean"))
    if accept is not None and accept < 1:
        return f"accept_length_mean = {metrics.get('accept_length_mean')} < 1 (it counts the bonus token)"
    return None
