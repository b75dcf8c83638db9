"""How many requests one planned launch runs at once for one workload, and which limit binds (issue 34 item 3: "the
fastest setup that fits"). Read from the plan contract's keys only (docs/contracts.md, plan keys), never by sizing
memory again:

- engine cap: `engine_cap` (the engine's own cap on running requests: SGLang `max_running_requests` after its caps,
  vLLM `--max-num-seqs`), else `max_running_requests` (stores planned before `engine_cap` existed; SGLang);
- Mamba slots: `max_mamba_cache_size` // `mamba_ratio` (requests: slots / slots one running request needs), where the
  plan states the ratio (SGLang; vLLM's hybrid pool is already inside its cap and its KV blocks);
- KV: `kv_tokens` // (prompt + output tokens of the workload): the same arithmetic as `concurrency_at_context`
  (plan/concurrency.py: SGLang's scheduler admits against the full-attention pool, `fits(c) = kv_tokens // c`) and
  the dry run's `cell_warning`, at the workload's length instead of the asked context;
- the matrix's concurrency: the largest concurrency the matrix asks of this launch at this workload.

`holds` is the least of the first three (what the launch can hold), `reachable` the least of all four (what the
matrix would run at). On a tie the first of Mamba slots, KV, engine cap, matrix concurrency is named: a cap that a
Mamba pool lowered is the Mamba pool's, and the matrix's concurrency binds only where the launch could hold more.
Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Limit = Literal["mamba", "kv", "engine_cap", "concurrency"]
LIMIT_TEXT: dict[str, str] = {"mamba": "Mamba slots", "kv": "KV tokens", "engine_cap": "engine cap",
                              "concurrency": "matrix concurrency"}
ORDER: tuple[Limit, ...] = ("mamba", "kv", "engine_cap", "concurrency")


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclass(frozen=True)
class Reach:
    """One launch's running requests at one workload, each limit in requests (None: not known / not planned)."""

    planned: bool                 # a plan with status ok
    engine_cap: int | None
    mamba: int | None             # requests the Mamba slots hold
    mamba_slots: int | None
    mamba_ratio: int | None
    kv: int | None                # requests the KV tokens hold at `length` tokens each
    kv_tokens: int | None
    length: int | None            # prompt + output tokens of one request
    asked: int | None             # the matrix's largest concurrency for this launch and workload
    holds: int | None             # min(engine cap, Mamba, KV); 0 when the plan fails
    reachable: int | None         # min(holds, asked)
    binds: Limit | None
    reason: str | None = None     # the plan failed (then holds = reachable = 0), or there is no plan
    fix: str | None = None        # the launch is the planner's nearest fix of the asked one (auto_fix): why

    @property
    def fits(self) -> bool:
        return self.reachable is not None and self.reachable >= 1

    def limits(self) -> dict[Limit, int]:
        out: dict[Limit, int] = {}
        for key, v in (("mamba", self.mamba), ("kv", self.kv), ("engine_cap", self.engine_cap),
                       ("concurrency", self.asked)):
            if v is not None:
                out[key] = v  # type: ignore[index]
        return out

    def text(self) -> str:
        """'min(engine cap 8, Mamba 45 slots / 4 = 11, KV 215,645 / 1,280 = 168, matrix c <= 8) = 8'."""
        if not self.planned:
            return self.reason or "not planned"
        parts = []
        if self.engine_cap is not None:
            parts.append(f"engine cap {self.engine_cap:,}")
        if self.mamba is not None:
            parts.append(f"Mamba {self.mamba_slots:,} slots / {self.mamba_ratio} = {self.mamba:,}")
        if self.kv is not None:
            parts.append(f"KV {self.kv_tokens:,} / {self.length:,} = {self.kv:,}")
        if self.asked is not None:
            parts.append(f"matrix c <= {self.asked:,}")
        return f"min({', '.join(parts)}) = {self.reachable:,}" if self.reachable is not None else ", ".join(parts)


def engine_cap_of(plan: Mapping[str, Any]) -> int | None:
    """`engine_cap`, else `max_running_requests` (a plan stored before `engine_cap`): as plan/concurrency.py's
    `cell_warning` reads it."""
    return _int(plan.get("engine_cap")) if plan.get("engine_cap") is not None else _int(
        plan.get("max_running_requests"))


def reach_of(plan: Mapping[str, Any] | None, length: int | None, asked: int | None) -> Reach:
    """`plan`: the plan contract (None: no planner for this engine); `length`: prompt + output tokens of one request
    (None when the workload's lengths are unknown: no KV limit); `asked`: the matrix's largest concurrency."""
    if not plan or plan.get("status") is None:
        why = (plan or {}).get("planner_error") or "no plan for this launch: its engine limits are unknown"
        return Reach(False, None, None, None, None, None, None, length, asked, None, asked, None, str(why))
    if plan.get("status") != "ok":
        why = plan.get("error") or plan.get("reason") or "the planner says it does not start"
        return Reach(False, None, None, None, None, None, _int(plan.get("kv_tokens")), length, asked, 0, 0, None,
                     f"does not start: {why}")
    cap = engine_cap_of(plan)
    slots, ratio = _int(plan.get("max_mamba_cache_size")), _int(plan.get("mamba_ratio"))
    mamba = slots // ratio if slots is not None and ratio else None
    kv_tokens = _int(plan.get("kv_tokens"))
    kv = kv_tokens // length if kv_tokens and kv_tokens > 0 and length and length > 0 else None
    memory = [v for v in (cap, mamba, kv) if v is not None]
    holds = min(memory) if memory else None
    reach = min(v for v in (holds, asked) if v is not None) if (holds is not None or asked is not None) else None
    values: dict[Limit, int | None] = {"mamba": mamba, "kv": kv, "engine_cap": cap, "concurrency": asked}
    binds = next((k for k in ORDER if values[k] is not None and values[k] == reach), None)
    return Reach(True, cap, mamba, slots if mamba is not None else None, ratio if mamba is not None else None, kv,
                 kv_tokens, length, asked, holds, reach, binds)


def request_length(client: Mapping[str, Any]) -> int | None:
    """prompt_tokens + output_tokens of a cell's client when it fixes both (a random dataset's lengths), else None:
    the `length` reach_of prices the KV limit at (as decide/fits.py::Workload.length and
    plan/concurrency.py::cell_warning read it), never a dataset's caps or a default."""
    p, o = client.get("prompt_tokens"), client.get("output_tokens")
    if isinstance(p, int) and isinstance(o, int) and not isinstance(p, bool) and not isinstance(o, bool) \
            and p > 0 and o > 0:
        return p + o
    return None
