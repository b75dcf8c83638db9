"""The memory budget one vLLM boot used, as table rows (GiB, one GPU, the lowest rank in the log). Pure."""

from __future__ import annotations

from specbench.contracts import BudgetRow
from specbench.logs.facts import LogFacts


def rows(f: LogFacts) -> list[BudgetRow]:
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
