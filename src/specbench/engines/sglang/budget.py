"""The memory budget one SGLang boot used, as table rows (GiB, one GPU, the lowest rank in the log). Pure."""

from __future__ import annotations

from specbench.contracts import BudgetRow
from specbench.logs.facts import LogFacts


def _r(x: float | None) -> float | None:
    """GiB as the budget table shows them: two decimals."""
    return None if x is None else round(x, 2)


def rows(f: LogFacts) -> list[BudgetRow]:
    rows: list[BudgetRow] = []
    before = f.avail_before_load_gib
    src_before = "Load weight begin. avail mem"
    if before is None and f.avail_after_load_gib is not None and f.weights_gib is not None:
        before, src_before = f.avail_after_load_gib + f.weights_gib, "Load weight end: avail mem + mem usage"
    rows.append(BudgetRow("free_before_load", "free before load", _r(before), src_before))
    rows.append(BudgetRow("weights", "target weights", f.weights_gib, "Load weight end. mem usage"))
    rows.append(BudgetRow("draft_weights", "draft weights", f.draft_weights_gib,
                          "2nd Load weight end. mem usage"
                          + ("" if f.draft_weights_gib is None else
                             (" (loaded before the pools were sized)" if f.draft_loaded_before_pools
                              else " (loaded after the pools were sized)"))))
    rest = f.draft_avail_after_load_gib if f.draft_loaded_before_pools else f.avail_after_load_gib
    rows.append(BudgetRow("rest", "free when the pools were sized", rest,
                          "Load weight end. avail mem (last load before the pools)"))
    frac = f.server_args.get("mem_fraction_static")
    if isinstance(frac, (int, float)) and before is not None:
        rows.append(BudgetRow("slack", f"kept free by mem_fraction_static={frac}", _r(before * (1 - frac)),
                              "free before load x (1 - mem_fraction_static)"))
    mamba = f.mamba_total_gib()
    if mamba is not None:
        parts = [("conv", f.conv_state_gib), ("ssm", f.ssm_state_gib), ("intermediate ssm", f.intermediate_ssm_state_gib),
                 ("conv window", f.intermediate_conv_window_gib)]
        detail = " + ".join(f"{name} {v:.2f}" for name, v in parts if v is not None)
        rows.append(BudgetRow("mamba", f"Mamba state ({f.max_mamba_cache_size} slots)", mamba,
                              f"Mamba Cache is allocated: {detail}"))
    kv = f.kv_total_gib()
    if kv is not None:
        kv_parts: list[str] = []
        if f.k_size_gib is not None or f.v_size_gib is not None:
            kv_parts.append(f"target K {f.k_size_gib} + V {f.v_size_gib}")
        if f.kv_size_gib is not None:
            kv_parts.append(f"target {f.kv_size_gib}")
        if f.draft_k_size_gib is not None:
            kv_parts.append(f"draft K {f.draft_k_size_gib} + V {f.draft_v_size_gib}")
        rows.append(BudgetRow("kv", f"KV cache ({f.kv_tokens:,} tokens)" if f.kv_tokens else "KV cache", kv,
                              "KV Cache is allocated: " + ", ".join(kv_parts)))
    rows.append(BudgetRow("pool_end", "free after the pools", f.draft_memory_pool_end_gib or f.memory_pool_end_gib,
                          "last Memory pool end. avail mem"))
    graphs = f.graphs_gib()
    if graphs is not None or f.graphs:
        rows.append(BudgetRow("graphs", "CUDA graphs", graphs,
                              "; ".join(f"{g.label} {g.mem_usage_gib}" for g in f.graphs) or "capture began, no end"))
    end = f.available_gpu_mem_gib
    src_end = "max_total_num_tokens=... available_gpu_mem"
    if end is None and f.graphs and f.graphs[-1].avail_after_gib is not None:
        end, src_end = f.graphs[-1].avail_after_gib, "last Capture ... avail mem"
    rows.append(BudgetRow("free_end", "free when serving", end, src_end))
    return [r for r in rows if r.gib is not None or r.key in ("free_before_load", "weights", "kv")]
