"""A vLLM plan as the plan contract (docs/contracts.md): the JSON keys (`contract`), the one-sentence reason
(`plan_reason`) and the memory-plan rows a renderer shows (`plan_budget_rows`)."""

from __future__ import annotations

from collections.abc import Mapping

from specbench.contracts import GIB, MemorySplit
from specbench.engines.vllm.common import format_gib
from specbench.engines.vllm.outcome import Context, VllmBudget, VllmPlan


def _gib(b: int | None, nd: int = 3) -> float | None:
    return None if b is None else round(b / GIB, nd)


def contract(p: VllmPlan, ctx: Context) -> dict[str, object]:
    """The plan contract's keys (docs/contracts.md) in the order they are written; plan.py adds the rest."""
    hybrid = p.mamba_layers > 0
    per_req_conv = p.conv_bytes * p.mamba_layers if (hybrid and p.conv_bytes) else None
    per_req_ssm = p.ssm_bytes * p.mamba_layers if (hybrid and p.ssm_bytes) else None
    s = p.setup
    half = None
    if not hybrid and p.num_blocks and p.bytes_per_block and all(g["kind"] in ("full", "sliding") for g in p.groups):
        half = round(p.num_blocks * p.bytes_per_block / 2 / GIB, 2)
    return {
        "status": p.status, "error": p.error, "engine": "vllm", "engine_version": ctx.version_text,
        "device": ctx.device,
        "mem_fraction_static": p.u, "gpu_memory_utilization": p.u,
        "weights_gib": _gib(p.weights_bytes), "draft_weights_gib": _gib(p.draft_weights_bytes),
        "kv_tokens": p.kv_tokens,
        # vLLM logs no K/V sizes; for an attention-only, non-MLA pool K and V are each half of num_blocks x B
        "k_size_gib": half, "v_size_gib": half,
        # Mamba keys: vLLM keeps Mamba state in the shared block pool; every block can hold one state per layer of
        # its group, so the Mamba cache blocks (the number its max_num_seqs check prints) are num_blocks.
        "max_mamba_cache_size": p.num_blocks if hybrid else None,
        "conv_state_gib": _gib(per_req_conv, 6), "ssm_state_gib": _gib(per_req_ssm, 6),
        "intermediate_ssm_state_gib": None if not hybrid else 0.0,
        "max_running_requests": p.max_running_requests,
        "max_concurrency": round(p.max_concurrency, 4) if p.max_concurrency is not None else None,
        "max_concurrency_printed": f"{p.max_concurrency:.2f}x" if p.max_concurrency is not None else None,
        "num_blocks": p.num_blocks, "block_size": p.block_size, "bytes_per_block": p.bytes_per_block,
        "blocks_per_request": p.blocks_per_request, "group_size": p.group_size, "kv_cache_groups": list(p.groups),
        "kv_cache_memory_bytes": p.kv_budget_bytes, "available_kv_gib": _gib(p.kv_budget_bytes, 2),
        "kv_pool_gib": _gib(p.num_blocks * p.bytes_per_block if p.num_blocks and p.bytes_per_block else None),
        "max_model_len": p.max_model_len, "estimated_max_model_len": p.estimated_max_model_len,
        "max_num_seqs": s.max_num_seqs, "max_num_batched_tokens": s.max_num_batched_tokens,
        "mamba_cache_mode": s.mamba_mode if hybrid else None,
        "mamba_page_size": p.mamba_page, "mamba_page_size_padded": p.mamba_page_padded,
        "conv_state_bytes_per_layer": p.conv_bytes, "ssm_state_bytes_per_layer": p.ssm_bytes,
        "ssm_state_dtype": s.ssm_dtype if hybrid else None, "kv_dtype_bytes": s.kv_dtype_bytes,
        "num_speculative_tokens": s.k, "speculative_method": s.spec_method,
        "prefix_caching": s.prefix_caching, "error_kind": p.error_kind,
        "budget": p.budget, "log_lines": list(p.log_lines), "warnings": list(p.warnings),
        # the state of a hybrid lives in the block pool (vllm/v1/kv_cache_interface.py@0.32.0): no state outside it
        "memory": MemorySplit(_gib(p.weights_bytes), _gib(p.draft_weights_bytes), None,
                              _gib(p.num_blocks * p.bytes_per_block) if p.num_blocks and p.bytes_per_block
                              else _gib(p.kv_budget_bytes, 2), _total_gib(p.budget)).to_json(),
    }


def _total_gib(budget: VllmBudget) -> float | None:
    v = budget.get("total_gib")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def plan_reason(p: VllmPlan, ctx: Context) -> str:
    where = "CPU KV space" if ctx.device == "cpu" else "KV budget"
    K = format_gib(p.kv_budget_bytes) if p.kv_budget_bytes is not None else "?"
    if p.status == "ok":
        s = (f"Starts: {where} {K} GiB = {p.num_blocks:,} blocks of {p.bytes_per_block:,} B (block size "
             f"{p.block_size}); a {p.max_model_len:,}-token request takes {p.blocks_per_request} blocks, so vLLM "
             f"prints {p.kv_tokens:,} tokens and {p.max_concurrency:.2f}x; max_running_requests="
             f"{p.max_running_requests} (max_num_seqs {p.setup.max_num_seqs}).")
        return s
    if p.error_kind == "mamba_blocks":
        return (f"The pool has {p.num_blocks} blocks and every running request pins one Mamba block, but "
                f"max_num_seqs is {p.setup.max_num_seqs}; vLLM 0.20+ refuses to capture FULL CUDA graphs then. "
                f"Lower --max-num-seqs, raise --gpu-memory-utilization, or use --enforce-eager.")
    if p.error_kind == "max_model_len":
        return (f"One {p.max_model_len:,}-token request does not fit the {where} of {K} GiB"
                + (f"; the longest that fits is {p.estimated_max_model_len:,}." if p.estimated_max_model_len
                   else "."))
    if p.error_kind == "no_memory":
        return f"Nothing is left for KV blocks ({where} {K} GiB is not more than one block)."
    return p.error or "fails"


def _gib_of(v: object) -> float | None:
    """A GiB number of the plan contract (None where the plan has none)."""
    return v if isinstance(v, (int, float)) else None


def plan_budget_rows(r: Mapping[str, object]) -> list[tuple[str, float | None, str]]:
    """The memory plan as (item, GiB, where it comes from) rows, for a renderer."""
    budget = r.get("budget")
    b: Mapping[str, object] = budget if isinstance(budget, Mapping) else {}
    rows: list[tuple[str, float | None, str]] = []
    if r.get("device") == "cpu":
        rows.append(("KV space K", _gib_of(r.get("available_kv_gib")), str(b.get("source", ""))))
    else:
        rows.append(("device total T (as vLLM sees it)", _gib_of(b.get("total_gib")),
                     str(b.get("total_source") or "GPU catalog / --gpu-mem-gib")))
        rows.append(("requested R = ceil(T·u)", _gib_of(b.get("requested_gib")),
                     f"gpu_memory_utilization={r.get('gpu_memory_utilization')}"))
        rows.append(("weights (target + draft)", _gib_of(b.get("weights_gib")), str(b.get("weights_source", ""))))
        rows.append(("non-KV (activation + non-torch + CUDA graphs)", _gib_of(b.get("non_kv_gib")),
                     str(b.get("source", ""))))
        if b.get("activation_gib") is not None:
            rows.append(("  of which activation peak", _gib_of(b.get("activation_gib")),
                         "profile forward or dummy sampler, the larger (engines/vllm/gpu_fit.py)"))
            rows.append(("  of which CUDA graphs", _gib_of(b.get("cuda_graph_gib")),
                         "graphs captured x the per-graph price (engines/vllm/gpu_fit.py)"))
        rows.append(("KV budget K = R - weights - non-KV", _gib_of(r.get("available_kv_gib")),
                     "Available KV cache memory"))
    if r.get("num_blocks") is not None:
        rows.append(("KV pool (num_blocks x bytes per block)", _gib_of(r.get("kv_pool_gib")),
                     f"{r['num_blocks']:,} x {r.get('bytes_per_block'):,} B, block size {r.get('block_size')}"))
    return rows
