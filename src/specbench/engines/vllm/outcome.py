"""The frozen values a vLLM plan passes between its stages and to its readers: `Context` (everything besides the
launch command that a plan depends on) and `VllmPlan` (one plan's outcome, engines/vllm/plan.py::plan_once)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from specbench.engines.vllm.common import Version
from specbench.engines.vllm.gpu_fit import BudgetTerm
from specbench.engines.vllm.layout import Setup
from specbench.specs.gpu import GpuSpec


@dataclass(frozen=True)
class Context:
    """Everything besides the launch command that a plan depends on."""

    version_text: str
    version: Version
    device: str                      # cuda | cpu
    gpu: GpuSpec | None
    total_bytes: int | None          # GPU: T; CPU: node total (if known)
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    non_kv_gib: float | None = None
    free_at_start_gib: float | None = None   # GPU: measured F0 (--avail-before-load-gib)
    # CPU: the machine's features vLLM sizes by (vllm_cpu.CpuIsa); context_for reads them (pin or this machine)
    avx512_bf16: bool = True
    amx_tile: bool = False
    cpu_isa_source: str = "default: AVX512-BF16, no AMX"
    version_warning: str | None = None  # a release newer than the newest rule set (versions.rule_set_for)
    total_source: str = ""              # GPU: where T comes from (gpu_fit.py::vllm_total_bytes)


class VllmBudget(TypedDict, total=False):
    """The plan contract's `budget` (plan.py::_cpu_budget, _gpu_budget), keys in the order they are written: the CPU
    KV space has `kv_cache_memory_bytes` and `source` only; a GPU budget has every key, `terms` last."""

    total_gib: float
    total_source: str
    gpu_memory_utilization: float
    requested_gib: float
    free_at_start_gib_estimate: float
    weights_gib: float
    weights_source: str
    non_kv_gib: float
    non_kv_measured: bool
    cuda_graph_gib: float
    activation_gib: float | None
    kv_cache_memory_bytes: int | None
    available_kv_gib: str
    source: str
    terms: list[BudgetTerm]


class CommonFields(TypedDict):
    """The VllmPlan keywords every outcome fills the same way, from the plan's start stage
    (plan_start.py::_Start.common)."""

    setup: Setup
    u: float
    weights_bytes: int
    draft_weights_bytes: int
    block_size: int
    mamba_layers: int


@dataclass(frozen=True)
class VllmPlan:
    status: str
    error: str | None
    error_kind: str | None
    setup: Setup
    u: float
    kv_budget_bytes: int | None
    weights_bytes: int
    draft_weights_bytes: int
    num_blocks: int | None
    blocks_per_request: int | None
    max_concurrency: float | None
    kv_tokens: int | None
    max_running_requests: int | None
    max_model_len: int
    estimated_max_model_len: int | None
    block_size: int
    bytes_per_block: int | None
    group_size: int | None
    groups: tuple[dict, ...]
    mamba_page: int | None
    mamba_page_padded: int | None
    conv_bytes: int | None
    ssm_bytes: int | None
    mamba_layers: int
    budget: VllmBudget
    log_lines: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())
    # requests of c tokens the pool holds at once: num_blocks // blocks one such request is charged (pool.py); None
    # when no pool was sized
    fits: Callable[[int], int] | None = field(default=None, compare=False)
