"""The memory budget one boot used, as table rows (GiB, one GPU, the lowest rank in the log). Pure.

SGLang order (research sglang-memory.md §1, §3): free before load B -> target weights -> [draft weights, 0.5.14+]
-> rest A -> slack B·(1-f) kept free by mem_fraction_static -> Mamba state pool -> KV pool -> [draft weights and draft
KV, <= 0.5.13] -> CUDA graphs -> free at the end. vLLM: total x utilization = budget -> weights, non-torch,
activation peak -> KV.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.logs.facts import LogFacts


@dataclass(frozen=True, slots=True)
class BudgetRow:
    key: str
    label: str
    gib: float | None
    source: str  # the log line (or the arithmetic over log numbers) it comes from

    def to_dict(self) -> dict[str, object]:
        return {"key": self.key, "label": self.label, "gib": self.gib, "source": self.source}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def sglang_rows(f: LogFacts) -> list[BudgetRow]:
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
        detail = []
        if f.k_size_gib is not None or f.v_size_gib is not None:
            detail.append(f"target K {f.k_size_gib} + V {f.v_size_gib}")
        if f.kv_size_gib is not None:
            detail.append(f"target {f.kv_size_gib}")
        if f.draft_k_size_gib is not None:
            detail.append(f"draft K {f.draft_k_size_gib} + V {f.draft_v_size_gib}")
        rows.append(BudgetRow("kv", f"KV cache ({f.kv_tokens:,} tokens)" if f.kv_tokens else "KV cache", kv,
                              "KV Cache is allocated: " + ", ".join(detail)))
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


def vllm_rows(f: LogFacts) -> list[BudgetRow]:
    cpu = f.device == "cpu"
    rows = [
        BudgetRow("total", "node memory (CPU backend)" if cpu else "GPU total", f.total_gpu_memory_gib,
                  "Explicitly/Auto set (K/total) GiB for KV cache" if cpu
                  else "total_gpu_memory / Free memory on device (F/T)"),
        BudgetRow("free_before_load", "free at start-up", f.avail_before_load_gib, "Free memory on device (F/T)"),
        BudgetRow("budget", f"budget (gpu_memory_utilization {f.gpu_memory_utilization})", f.budget_gib,
                  "total_gpu_memory x gpu_memory_utilization"),
        BudgetRow("weights", "weights (target + draft)", f.weights_gib, "Model loading took"),
        BudgetRow("consumed", "consumed (weights + non-torch)", f.consumed_gib, "GiB for consumed memory"),
        BudgetRow("non_torch", "non-torch memory", f.non_torch_gib, "non_torch_memory takes"),
        BudgetRow("activation", "activation peak", f.activation_peak_gib, "PyTorch activation peak memory takes"),
        BudgetRow("graph_estimate", "CUDA graph estimate", f.cuda_graph_estimate_gib, "Estimated CUDA graph memory"),
        BudgetRow("kv", "KV cache" + (f" ({f.kv_tokens:,} tokens)" if f.kv_tokens else ""), f.available_kv_gib,
                  "Available KV cache memory"),
        BudgetRow("graphs", "CUDA graphs", f.graphs_gib() if f.graphs else f.cuda_graph_actual_gib,
                  "Graph capturing finished ... took / GiB for CUDAGraph memory"),
    ]
    return [r for r in rows if r.gib is not None or r.key == "kv"]


def budget_rows(f: LogFacts) -> list[BudgetRow]:
    return vllm_rows(f) if f.engine == "vllm" else sglang_rows(f)
