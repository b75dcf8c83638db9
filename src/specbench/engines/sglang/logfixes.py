"""The fix an SGLang failure's own numbers give (the doctor puts it before the planner's): the Mamba slots one
request needs when the state cache is too small.

The failure is printed as `max_running_requests is capped to 0 by the mamba state cache
(max_mamba_cache_size=K, R state slots per request)` or `... state cache is too small to serve any requests.
max_mamba_cache_size=K, mamba_ratio=R, resulting max_num_reqs=0` (mem_cache/kv_cache_configurator.py::
KVCacheConfigurator.resolve_max_num_reqs@0.5.23: max_num_reqs = min(requested, K // R) must be > 0): K must reach
R per requested request."""

from __future__ import annotations

import re

from specbench.engines.base import FixJson
from specbench.logs.facts import LogFacts
from specbench.logs.failures import Failure

_SLOTS = re.compile(r"max_mamba_cache_size=(\d+), (?:(\d+) state slots per request|mamba_ratio=(\d+))")


def failure_fixes(f: LogFacts, fail: Failure) -> list[FixJson]:
    if fail.kind != "mamba_state_cache_too_small":
        return []
    m = _SLOTS.search(fail.context or fail.message)
    if not m:
        return []
    k, rho = int(m.group(1)), int(m.group(2) or m.group(3))
    asked = f.server_args.get("max_running_requests")
    req = asked if isinstance(asked, int) and asked > 0 else 1
    return [{"change": {"--max-mamba-cache-size": req * rho}, "source": "log",
             "result": {"status": "ok", "error": None, "kv_tokens": None, "max_running_requests": req},
             "why": f"{req} request{'s' if req > 1 else ''} x {rho} state slots each (the pool has {k}): "
                    f"{req * rho} // {rho} = {req}; the slots take memory from the KV pool (or give it more with "
                    "--mamba-full-memory-ratio / --mem-fraction-static)"}]
