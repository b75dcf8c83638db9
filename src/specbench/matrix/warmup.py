"""How many warm-up requests a cell sends before its measured ones.

The asked `warmup_requests`, raised to one full wave (the cell's concurrency) the first time a boot runs that
concurrency in a closed loop, so that the batch shapes the cell measures have run once before it is timed. Measured
(tests/data/h100-context-sglang-0.5.15.post1/, SGLang 0.5.15.post1, H100, warm-up 2 requests): the first wave of the
first cell at c = 16 or 32 on an EAGLE3 server was cold, e.g. the chain at c = 16 with 512-token prompts had its
slowest first token at 0.586 s in wave 1 and 0.206 s in wave 2 (AR 0.206 / 0.215), the tree of topk 8 decoded wave 1
in 1.52 s and wave 2 in 1.00 s; the cells after it at the same concurrency were alike in both waves. Two warm-up
requests at concurrency 16 never run a batch of 16. A rate (Poisson) cell keeps the asked count: its batch is not
the concurrency. `warmup_requests = 0` stays 0 (the user asked for none). No I/O: the boot's set of warmed
concurrencies is handed in (the cell context's cache) and updated.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableSet
from typing import Any

from specbench.load.schedule import is_closed_loop


def warmup_prompts(client: Mapping[str, Any]) -> int:
    """Warm-up prompts to build for a cell: enough for a full wave should this boot not have run its concurrency."""
    asked = int(client.get("warmup_requests") or 0)
    if asked <= 0 or not is_closed_loop(client.get("request_rate")):
        return asked
    return max(asked, int(client.get("concurrency") or 1))


def warmup_count(client: Mapping[str, Any], warmed: MutableSet[int]) -> int:
    """Warm-up requests for this cell's first repeat on a boot; `warmed` holds the concurrencies this boot has warmed
    with a full wave (updated here)."""
    asked = int(client.get("warmup_requests") or 0)
    if asked <= 0 or not is_closed_loop(client.get("request_rate")):
        return asked
    c = int(client.get("concurrency") or 1)
    if c in warmed:
        return asked
    warmed.add(c)
    return max(asked, c)
