"""vLLM's words for a boot that started."""

from __future__ import annotations

from specbench.logs.facts import LogFacts


def started_headline(f: LogFacts) -> str:
    if f.kv_tokens is None:
        return "vLLM started."
    conc = f" (max concurrency {f.max_concurrency}x at {f.max_concurrency_tokens:,} tokens)" \
        if f.max_concurrency is not None and f.max_concurrency_tokens else ""
    return f"vLLM started: KV cache of {f.kv_tokens:,} tokens{conc}."
