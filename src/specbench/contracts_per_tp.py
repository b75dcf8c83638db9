"""The per-TP table of `specbench plan --json` (`per_tp`) as types: one row per TP size, each engine's own shape
(SGLang's nearest configurations, vLLM's with SGLang-shaped aliases of its knobs), and the row type per engine that
reads a stored plan's rows back (`TP_ROW_TYPES`, contracts.py::PlanResult.from_json). Pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, ClassVar


@dataclass(frozen=True)
class SglangTpRow:
    """One row of SGLang's nearest-configurations table: per TP, the largest/smallest value of each knob that
    still starts with the rest of the launch as given (engines/sglang/fixes.py::Solver.row)."""

    tp: int
    error: str | None  # why this TP cannot be planned at all (e.g. heads not divisible); the knobs are then null
    max_running_requests: int | None
    min_mem_fraction_static: float | None
    max_context_length: int | None
    max_draft_tokens: int | None
    status_as_requested: str | None  # "ok" | "fails": the launch as given at this TP

    # (key, the column a person reads) in table order, after TP and "as requested"
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("max_running_requests", "max --max-running-requests"),
        ("min_mem_fraction_static", "min --mem-fraction-static"),
        ("max_context_length", "max --context-length"),
        ("max_draft_tokens", "max draft tokens"),
    )

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SglangTpRow:
        return cls(**{f.name: d[f.name] for f in fields(cls)})

    def to_json(self) -> dict[str, Any]:
        return {"tp": self.tp, "error": self.error, "max_running_requests": self.max_running_requests,
                "min_mem_fraction_static": self.min_mem_fraction_static,
                "max_context_length": self.max_context_length, "max_draft_tokens": self.max_draft_tokens,
                "status_as_requested": self.status_as_requested}


@dataclass(frozen=True)
class VllmTpRow:
    """One row of vLLM's nearest-configurations table (engines/vllm/plan.py::per_tp_fixes). A TP that cannot be
    planned is `{"tp", "error"}` only. A planned row also carries SGLang-shaped aliases of its knobs
    (`max_running_requests` = `max_num_seqs`, `min_mem_fraction_static` = `min_gpu_memory_utilization`,
    `max_context_length` = `max_model_len`, `max_draft_tokens` = null): derived here, never stored twice."""

    tp: int
    error: str | None
    status_as_requested: str | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    min_gpu_memory_utilization: float | None = None
    min_cpu_kvcache_space_gib: int | None = None

    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("max_num_seqs", "max --max-num-seqs"),
        ("max_model_len", "max --max-model-len"),
        ("min_gpu_memory_utilization", "min --gpu-memory-utilization"),
    )
    CPU_COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("max_num_seqs", "max --max-num-seqs"),
        ("max_model_len", "max --max-model-len"),
        ("min_cpu_kvcache_space_gib", "min VLLM_CPU_KVCACHE_SPACE GiB"),
    )

    def _aliases(self) -> dict[str, Any]:
        return {"max_running_requests": self.max_num_seqs, "min_mem_fraction_static": self.min_gpu_memory_utilization,
                "max_context_length": self.max_model_len, "max_draft_tokens": None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> VllmTpRow:
        if d.get("error") is not None:
            return cls(tp=d["tp"], error=d["error"])
        row = cls(**{f.name: d[f.name] for f in fields(cls)})
        for k, v in row._aliases().items():
            if d[k] != v:
                raise ValueError(f"vLLM per_tp row for TP{row.tp}: {k}={d[k]!r} is not its alias value {v!r}")
        return row

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"tp": self.tp, "error": self.error}
        return {"tp": self.tp, "error": None, "status_as_requested": self.status_as_requested,
                "max_num_seqs": self.max_num_seqs, "max_model_len": self.max_model_len,
                "min_gpu_memory_utilization": self.min_gpu_memory_utilization,
                "min_cpu_kvcache_space_gib": self.min_cpu_kvcache_space_gib, **self._aliases()}


TpRow = SglangTpRow | VllmTpRow
TP_ROW_TYPES: Mapping[str, type[SglangTpRow] | type[VllmTpRow]] = MappingProxyType({"sglang": SglangTpRow, "vllm": VllmTpRow})
