"""Two SGLang boots side by side (the doctor's `--diff`): the pool budget each got and the change each differing
argument predicts for it.

Observed pool budget = Mamba main state (K+1 slots × p) + KV tokens × bytes per token (target + draft); this is the
part of the budget that SGLang splits after the speculative scratch is taken
(`KVCacheConfigurator._handle_max_mamba_cache` in mem_cache/kv_cache_configurator.py@0.5.23;
`handle_max_mamba_cache` in model_runner_kv_cache_mixin.py@0.5.12.post1). Not pure: `logrules.slot_size` reads the
model's config.json when one resolves.
"""

from __future__ import annotations

from typing import Any

from specbench.engines.sglang import logrules as er
from specbench.logs.candidates import Candidate, PoolChange
from specbench.logs.facts import LogFacts


def _kv_bytes_per_token(*facts: LogFacts) -> tuple[float | None, str]:
    """Bytes per KV token slot (all K/V tensors of target and draft) from the log with the most KV lines."""
    best: tuple[float, str] | None = None
    for f in facts:
        total = f.kv_total_gib()
        if total is None or not f.kv_tokens:
            continue
        has_draft = f.draft_k_size_gib is not None
        # K/V buffers have N + page_size rows (MHATokenToKVPool._create_buffers_normal@0.5.23)
        per = total * er.GIB / (f.kv_tokens + 1)
        label = "target + draft" if has_draft else "target only"
        if best is None or has_draft:
            best = (per, label)
    return (best[0], best[1]) if best else (None, "")


def pool_budget_gib(f: LogFacts, p_bytes: float | None, kv_per_token: float | None) -> float | None:
    if f.max_mamba_cache_size is None or p_bytes is None or f.kv_tokens is None or kv_per_token is None:
        return None
    return ((f.max_mamba_cache_size + 1) * p_bytes + f.kv_tokens * kv_per_token) / er.GIB


def pool_change(lf: LogFacts, rf: LogFacts) -> PoolChange:
    p = er.slot_size(lf) or er.slot_size(rf)
    per_tok, per_tok_src = _kv_bytes_per_token(lf, rf)
    lb = pool_budget_gib(lf, p.bytes if p else None, per_tok)
    rb = pool_budget_gib(rf, p.bytes if p else None, per_tok)
    if lb is None or rb is None or p is None or per_tok is None:
        return PoolChange(None, "")
    return PoolChange(round(rb - lb, 2), f"Mamba slots x {p.mib:.1f} MiB + KV tokens x {per_tok:,.0f} B, {per_tok_src}")


def candidate(lf: LogFacts, rf: LogFacts, key: str, va: Any, vb: Any) -> Candidate | None:
    """An SGLang argument whose change moves the pool budget, with its predicted change (GiB) when modelled; None for
    an argument SGLang's pools do not depend on."""
    args = lf.server_args
    if key == "max_running_requests" and isinstance(va, int) and isinstance(vb, int):
        p, d = er.slot_size(lf) or er.slot_size(rf), er.draft_tokens(lf)
        if d is not None and p is not None and lf.max_mamba_cache_size is not None and er.scratch_before_split(lf):
            delta = (vb - va) * d * p.bytes / er.GIB
            grew = "grew" if vb > va else "shrank"
            return Candidate(key, -delta, (
                f"max_running_requests {va} -> {vb} {grew} the speculative intermediate state reservation by "
                f"{abs(vb - va)} x {d} draft tokens x {p.mib:.1f} MiB = {abs(delta):.2f} GiB "
                f"(SGLang <=0.5.12 reserves p·D per requested request before the Mamba/KV split)"))
        return Candidate(key, None, f"max_running_requests {va} -> {vb}")
    if key == "mem_fraction_static" and isinstance(va, (int, float)) and isinstance(vb, (int, float)):
        b = lf.avail_before_load_gib
        slack = (vb - va) * b if b is not None else None
        return Candidate(key, slack, f"mem_fraction_static {va} -> {vb} moves the slack B·(1−f) by "
                                     + (f"{abs(slack):.2f} GiB" if slack is not None else "B·Δf"))
    if key == "speculative_num_draft_tokens" and isinstance(va, int) and isinstance(vb, int):
        p = er.slot_size(lf) or er.slot_size(rf)
        if p is None:
            return None
        mrr = args.get("max_running_requests")
        if isinstance(mrr, int) and er.scratch_before_split(lf):
            delta = -mrr * (vb - va) * p.bytes / er.GIB
            return Candidate(key, delta, f"speculative_num_draft_tokens {va} -> {vb} changes the intermediate "
                                         f"state reservation by {mrr} x {vb - va} x {p.mib:.1f} MiB")
        return Candidate(key, None, f"speculative_num_draft_tokens {va} -> {vb}")
    if key in ("mamba_full_memory_ratio", "max_mamba_cache_size", "mamba_ssm_dtype", "kv_cache_dtype",
               "context_length", "max_total_tokens", "page_size", "disable_radix_cache", "mamba_scheduler_strategy",
               "mamba_radix_cache_strategy", "speculative_algorithm"):
        return Candidate(key, None, f"{key} {va} -> {vb}")
    return None


def failure_sentence(side: str, f: LogFacts, kind: str | None) -> str | None:
    """Why the assertion fired on that side: K Mamba slots // ρ per request = 0."""
    if kind != "max_running_requests_zero" or f.max_mamba_cache_size is None:
        return None
    rho, _ = er.slots_per_request(f)
    if not rho:
        return None
    return (f"On the {side}, {f.max_mamba_cache_size} Mamba slots with {rho} slots per request give "
            f"max_running_requests = {f.max_mamba_cache_size} // {rho} = 0, hence the assertion.")
