"""Concurrency said one way, for every engine: how many requests can run at once when each holds the asked context,
how many at a typical context, and the engine's own cap beside them (docs/contracts.md, plan keys
`engine_cap`, `concurrency_at_context`, `typical_context`, `typical_context_basis`, `concurrency_at_typical_context`,
`concurrency_summary`).

The engine package knows what one request is charged (SGLang: tokens of its KV pool; vLLM: blocks of its KV cache
groups) and passes a function `fits(context) -> requests`; this module only names the typical context, caps by the
engine and words the line. Pure.

Typical context: 1,024 prompt + 1,024 output tokens = 2,048, the default random workload of SGLang's serving
benchmark (`--random-input-len 1024 --random-output-len 1024`: sglang/benchmark/serving.py@0.5.15.post1), i.e. the
length most published throughput numbers are measured at; the asked context when that is shorter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specbench.contracts import PlanResult

TYPICAL_PROMPT_TOKENS = 1024
TYPICAL_OUTPUT_TOKENS = 1024
TYPICAL_CONTEXT = TYPICAL_PROMPT_TOKENS + TYPICAL_OUTPUT_TOKENS
TYPICAL_BASIS = (f"{TYPICAL_PROMPT_TOKENS:,} prompt + {TYPICAL_OUTPUT_TOKENS:,} output tokens, the default random "
                 "workload of SGLang's serving benchmark (sglang/benchmark/serving.py@0.5.15.post1 "
                 "--random-input-len / --random-output-len) at which most published throughput is measured")
KEYS = ("engine_cap", "concurrency_at_context", "typical_context", "typical_context_basis",
        "concurrency_at_typical_context", "concurrency_summary")


@dataclass(frozen=True)
class Concurrency:
    engine_cap: int | None             # the engine's own cap on requests running at once
    context: int                       # the asked context (tokens per request)
    at_context: int | None             # requests that run at once, each holding `context` tokens
    typical_context: int
    typical_basis: str
    at_typical: int | None

    def keys(self) -> dict[str, Any]:
        return {"engine_cap": self.engine_cap, "concurrency_at_context": self.at_context,
                "typical_context": self.typical_context, "typical_context_basis": self.typical_basis,
                "concurrency_at_typical_context": self.at_typical, "concurrency_summary": self.summary()}

    def summary(self) -> str | None:
        if self.at_context is None:
            return None
        s = f"concurrency: {self.at_context:,} requests at once at the asked {self.context:,}-token context"
        if self.typical_context != self.context:
            s += f", {self.at_typical:,} at a typical {self.typical_context:,} (1K prompt + 1K output)"
        return s + (f"; the engine's cap is {self.engine_cap:,}" if self.engine_cap is not None else "")


def concurrency(cap: int | None, context: int, fits: Callable[[int], int] | None) -> Concurrency:
    """`cap`: the engine's own limit (None when the plan fails); `fits(c)`: requests of c tokens its KV memory holds
    at once (None when no pool was sized)."""
    typical = min(TYPICAL_CONTEXT, context) if context > 0 else TYPICAL_CONTEXT
    basis = TYPICAL_BASIS if typical == TYPICAL_CONTEXT else "the asked context (shorter than 1K + 1K)"
    if cap is None or fits is None or context <= 0:
        return Concurrency(cap, context, None, typical, basis, None)
    return Concurrency(cap, context, min(cap, max(0, fits(context))), typical, basis, min(cap, max(0, fits(typical))))


def overcommit_warning(asked: int | None, c: Concurrency, kv_tokens: int, engine: str) -> str | None:
    """The warning when an asked concurrency cannot all hold the asked context at once (requests x context > KV
    tokens): the scheduler queues the rest, so the asked number is not what runs."""
    if asked is None or c.at_context is None or c.engine_cap is None or kv_tokens <= 0:
        return None
    n = min(asked, c.engine_cap)
    if n * c.context <= kv_tokens:
        return None
    typical = ("" if c.typical_context == c.context
               else f", {c.at_typical:,} at a typical {c.typical_context:,}")
    return (f"{engine} starts {n:,} requests at once but {n:,} x {c.context:,}-token context = "
            f"{n * c.context:,} tokens > {kv_tokens:,} KV tokens: only {c.at_context:,} fit at that context{typical}; "
            f"the rest wait in the queue (or are retracted and recomputed)")


def cell_warning(plan: PlanResult | None, concurrency: Any, prompt_tokens: Any, output_tokens: Any) -> str | None:
    """`run --dry-run`: a cell that asks for more requests at once than the planned server runs (its `engine_cap`),
    or more than its KV tokens hold at the cell's request length (prompt + output tokens): the rest queue, so the
    cell does not measure the concurrency it names. Reads only the plan contract's keys."""
    if plan is None or plan.status != "ok" or not isinstance(concurrency, int):
        return None
    cap, kv = plan.engine_cap or plan.max_running_requests, plan.kv_tokens
    if isinstance(cap, int) and concurrency > cap:
        return (f"concurrency {concurrency} is above the planned cap of {cap} requests at once (engine_cap): "
                f"{concurrency - cap} wait in the engine's queue")
    if isinstance(prompt_tokens, int) and isinstance(output_tokens, int) and isinstance(kv, int) and kv > 0:
        length = prompt_tokens + output_tokens
        if length > 0 and concurrency * length > kv:
            return (f"concurrency {concurrency} x {length:,} tokens per request = {concurrency * length:,} > "
                    f"{kv:,} KV tokens: about {kv // length} run at once, the rest wait")
    return None
