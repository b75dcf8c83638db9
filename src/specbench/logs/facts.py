"""What a log says, as data: the frozen `LogFacts` and its parts.

Key names and units follow the plan contract (docs/contracts.md): GiB where the engine
prints "GB" (SGLang's GB is GiB: `memory_pool.py` `GB = 1024**3`), token counts as ints, and every number
exactly as the log printed it (no re-derivation). Values a log does not contain are None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class GraphCapture:
    """One CUDA-graph capture as logged (SGLang `Capture ... cuda graph end`, vLLM `Graph capturing finished`)."""

    label: str  # e.g. "cuda graph", "piecewise CUDA graph", "target verify CUDA graph", "vllm"
    mem_usage_gib: float | None = None
    avail_before_gib: float | None = None
    avail_after_gib: float | None = None
    elapsed_s: float | None = None
    batch_sizes: tuple[int, ...] = ()
    line: int = 0


@dataclass(frozen=True, slots=True)
class EngineError:
    """An exception or error line the engine printed (last line of a traceback, or a bare `XxxError: ...`)."""

    message: str
    line: int


@dataclass(frozen=True)
class LogFacts:
    """Everything one engine boot (plus any runtime lines after it) reported. All fields optional."""

    engine: str | None = None  # "sglang" | "vllm"
    engine_version: str | None = None  # only when the log prints it
    device: str | None = None  # "gpu", "cpu", "xpu" ... when the log says (vLLM `CPU KV cache size`)
    # --- weights (SGLang `Load weight begin/end`, vLLM `Model loading took`) ---
    memory_baseline_gib: float | None = None  # SGLang `Memory baseline taken. mem usage=`
    avail_before_load_gib: float | None = None  # target `Load weight begin. avail mem=`
    avail_after_load_gib: float | None = None  # target `Load weight end. ... avail mem=`
    weights_gib: float | None = None  # target `Load weight end. ... mem usage=`
    draft_avail_before_load_gib: float | None = None
    draft_avail_after_load_gib: float | None = None
    draft_weights_gib: float | None = None
    model_class: str | None = None  # `type=` of the target load line
    model_dtype: str | None = None
    weight_quant: str | None = None  # the bare quant token SGLang prints between type= and avail mem=
    # --- hybrid state (SGLang `Mamba Cache is allocated.`) ---
    max_mamba_cache_size: int | None = None
    conv_state_gib: float | None = None
    ssm_state_gib: float | None = None
    intermediate_ssm_state_gib: float | None = None
    intermediate_conv_window_gib: float | None = None
    # --- KV (SGLang `KV Cache is allocated.`; the second such line on a rank is the draft's) ---
    kv_dtype: str | None = None
    kv_tokens: int | None = None
    k_size_gib: float | None = None
    v_size_gib: float | None = None
    kv_size_gib: float | None = None  # single-tensor pools (MLA) print `KV size:`; SWA pools their total
    swa_kv_tokens: int | None = None  # `SWAKVPool mem usage: X GB, swa size: S, full size: N`
    draft_kv_tokens: int | None = None
    draft_k_size_gib: float | None = None
    draft_v_size_gib: float | None = None
    draft_loaded_before_pools: bool | None = None  # 0.5.14+: draft weights resident when the pool is sized
    memory_pool_end_gib: float | None = None  # target `Memory pool end. avail mem=`
    draft_memory_pool_end_gib: float | None = None
    # --- final summary line `max_total_num_tokens=..., ... available_gpu_mem=` ---
    max_total_num_tokens: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    available_gpu_mem_gib: float | None = None
    # --- caps and warnings the engine printed ---
    mamba_cap_requests: int | None = None  # `max_running_requests is capped to N by the mamba state cache`
    state_slots_per_request: int | None = None  # `(..., N state slots per request)`
    mrr_reduced_from: int | None = None  # `max_running_requests was reduced from the requested A to B`
    kv_pool_fewer_than_context: int | None = None  # `KV pool holds N tokens, fewer than --context-length M`
    graphs: tuple[GraphCapture, ...] = ()
    # --- runtime (SGLang `Decode batch ...`, vLLM `SpecDecoding metrics`) ---
    accept_lengths: tuple[float, ...] = ()
    gen_throughputs: tuple[float, ...] = ()
    running_requests: tuple[int, ...] = ()
    mamba_num: tuple[int, ...] = ()
    acceptance_rates_pct: tuple[float, ...] = ()
    # --- vLLM budget lines ---
    total_gpu_memory_gib: float | None = None
    gpu_memory_utilization: float | None = None
    budget_gib: float | None = None
    non_torch_gib: float | None = None
    activation_peak_gib: float | None = None
    available_kv_gib: float | None = None  # `Available KV cache memory:` / `the rest ... reserved for KV Cache is`
    gpu_blocks: int | None = None
    cpu_blocks: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    mamba_cache_blocks: int | None = None  # from the `max_num_seqs (N) exceeds available Mamba cache blocks (M)` error
    max_num_seqs: int | None = None
    cuda_graph_estimate_gib: float | None = None
    consumed_gib: float | None = None  # >= 0.27 summary: weights + non-torch
    cuda_graph_actual_gib: float | None = None  # summary / `CUDA graph pool memory: X GiB (actual)`
    attention_block_size: int | None = None  # hybrids: `Setting attention block size to N tokens ...`
    mamba_cache_mode: str | None = None  # `Mamba cache mode is set to 'align' ...`
    # --- the launch ---
    server_args: dict[str, Any] = field(default_factory=dict)
    ready: bool = False  # the engine said it is serving (summary line, "ready to roll", uvicorn up, ...)
    errors: tuple[EngineError, ...] = ()
    ranks: tuple[int, ...] = ()  # TP ranks seen
    boots: int = 1  # boots found in the file; facts are for the last one
    model_config: str | None = None  # not from the log: the config the user named (`doctor --model-config`)
    lines: int = 0  # cleaned records in this boot

    def mamba_total_gib(self) -> float | None:
        """Sum of the four Mamba-pool tensors the engine printed (None when no Mamba line)."""
        parts = [self.conv_state_gib, self.ssm_state_gib, self.intermediate_ssm_state_gib,
                 self.intermediate_conv_window_gib]
        if all(p is None for p in parts):
            return None
        return round(sum(p for p in parts if p is not None), 2)

    def kv_total_gib(self) -> float | None:
        """Target plus draft KV tensors as printed (K+V, or the single `KV size`)."""
        parts = [self.k_size_gib, self.v_size_gib, self.kv_size_gib, self.draft_k_size_gib, self.draft_v_size_gib]
        if all(p is None for p in parts):
            return None
        return round(sum(p for p in parts if p is not None), 2)

    def graphs_gib(self) -> float | None:
        vals = [g.mem_usage_gib for g in self.graphs if g.mem_usage_gib is not None]
        return round(sum(vals), 2) if vals else None

    def vllm_non_kv_gib(self) -> float | None:
        """vLLM memory that is not KV inside the budget: C + P (>= 0.27 summary) or W + N + P (older); the summary
        line of vllm v1/worker/gpu_worker.py::_compile_or_warm_up_model (>= 0.27: `K = R - C - P`)."""
        if self.consumed_gib is not None and self.activation_peak_gib is not None:
            return round(self.consumed_gib + self.activation_peak_gib, 2)
        w, n, a = self.weights_gib, self.non_torch_gib, self.activation_peak_gib
        if w is not None and n is not None and a is not None:
            return round(w + n + a, 2)
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in the contract's key names (tuples become lists)."""
        d = asdict(self)
        d["graphs"] = [asdict(g) for g in self.graphs]
        d["errors"] = [asdict(e) for e in self.errors]
        return d
