"""SGLang's words for a boot that started: the headline, the speculative-scratch price, the headroom left."""

from __future__ import annotations

from specbench.engines.sglang import logrules as er
from specbench.logs.facts import LogFacts


def started_headline(f: LogFacts) -> str:
    parts = []
    if f.kv_tokens is not None:
        parts.append(f"{f.kv_tokens:,} KV tokens")
    if f.max_mamba_cache_size is not None:
        parts.append(f"{f.max_mamba_cache_size} Mamba slots")
    if f.max_running_requests is not None:
        parts.append(f"up to {f.max_running_requests} running requests")
    if f.context_len is not None:
        parts.append(f"context {f.context_len:,}")
    return "Started fine" + (": " + ", ".join(parts) if parts else "") + "."


def started_notes(f: LogFacts) -> list[str]:
    """What this build costs per request and what it left unused."""
    return [s for s in (spec_scratch_sentence(f), serving_headroom(f)) if s]


# Prefill activations: about 1.5 MB per chunked-prefill token, the constant SGLang's default mem_fraction_static
# reserves (sglang/srt/server_args.py::ServerArgs._handle_gpu_memory_settings@0.5.15.post1:
# `reserved_mem += max(self.chunked_prefill_size, 2048) * 1.5` MB).
ACTIVATION_MB_PER_PREFILL_TOKEN = 1.5


def serving_headroom(f: LogFacts) -> str | None:
    """How much of what stayed free after start-up prefill activations will not need (SGLang)."""
    free = f.available_gpu_mem_gib
    cps = f.chunked_prefill_size or f.server_args.get("chunked_prefill_size")
    if free is None or not isinstance(cps, int) or cps <= 0:
        return None
    act = ACTIVATION_MB_PER_PREFILL_TOKEN * max(cps, 2048) / 1024
    spare = free - act
    if spare < 1.0:
        return None
    return (f"{free:.2f} GiB stayed free after start-up; prefill activations need roughly {act:.1f} GiB "
            f"(1.5 MB x chunked_prefill_size {cps}), so about {spare:.1f} GiB more could go to the Mamba/KV pools "
            "(raise mem_fraction_static).")


def spec_scratch_sentence(f: LogFacts) -> str | None:
    """SGLang <= 0.5.12 with a hybrid model and speculative decoding: the per-request price of max_running_requests
    (R' = R - p·mrr·D before the Mamba/KV split, mrr as requested:
    sglang/srt/model_executor/model_runner_kv_cache_mixin.py::ModelRunnerKVCacheMixin.handle_max_mamba_cache
    @0.5.12.post1)."""
    req = f.server_args.get("max_running_requests")
    d, p = er.draft_tokens(f.server_args), er.slot_size(f)
    if f.max_mamba_cache_size is None or not er.scratch_before_split(f) or not isinstance(req, int) \
            or d is None or p is None:
        return None
    each = d * p.bytes / er.GIB
    return (f"This build reserves intermediate Mamba state for every requested running request before splitting "
            f"the rest between Mamba slots and KV: {req} × {d} draft tokens × {p.mib:.1f} MiB = {req * each:.2f} GiB "
            f"now; each request more costs {each:.2f} GiB, taken from the Mamba slots and KV tokens.")
