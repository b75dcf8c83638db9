"""Two vLLM boots side by side (the doctor's `--diff`): the KV memory each reported and what a changed
`--gpu-memory-utilization` predicts for it (budget = total x utilization: vllm/v1/worker/utils.py::request_memory
@0.32.0)."""

from __future__ import annotations

from typing import Any

from specbench.logs.candidates import Candidate, PoolChange
from specbench.logs.facts import LogFacts


def pool_change(lf: LogFacts, rf: LogFacts) -> PoolChange:
    if lf.available_kv_gib is None or rf.available_kv_gib is None:
        return PoolChange(None, "")
    return PoolChange(round(rf.available_kv_gib - lf.available_kv_gib, 2), "the KV memory each log reports")


def candidate(lf: LogFacts, rf: LogFacts, key: str, va: Any, vb: Any) -> Candidate | None:
    """A vLLM argument whose change moves the KV budget, with its predicted change (GiB) when modelled."""
    if key == "gpu_memory_utilization" and isinstance(va, (int, float)) and isinstance(vb, (int, float)):
        total = lf.total_gpu_memory_gib
        delta = (vb - va) * total if total is not None else None
        return Candidate(key, delta, f"gpu_memory_utilization {va} -> {vb} moves vLLM's budget by "
                                     + (f"{abs(delta):.2f} GiB" if delta is not None else "Δu x total"))
    if key in ("kv_cache_dtype", "max_model_len", "max_num_seqs", "gpu_memory_utilization"):
        return Candidate(key, None, f"{key} {va} -> {vb}")
    return None


def failure_sentence(side: str, f: LogFacts, kind: str | None) -> str | None:
    return None
