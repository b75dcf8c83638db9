"""The planner's one entry point: a pasted launch command + options -> the JSON contract (a dict).

Used by `specbench plan`, `specbench doctor` (fixes from measured values), the runner's preflight and the
benchmarks. The engine is the one named (`--engine`) or the one that recognises the command
(`specbench.engines.base.engine_for_command`); its package plans it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from specbench.engines.argv import split_command
from specbench.engines.base import engine, engine_for_command
from specbench.specs.gpu import GpuSpec, custom_gpu, find_gpu

DEFAULT_GPU = "H200"


@dataclass(frozen=True)
class PlanOptions:
    model_config: str | None = None
    draft_config: str | None = None
    gpu: str | None = None
    gpu_mem_gib: float | None = None
    engine: str | None = None
    engine_version: str | None = None
    avail_before_load_gib: float | None = None
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    non_kv_gib: float | None = None
    fixes: bool = True
    tp_sizes: tuple[int, ...] = (1, 2, 4, 8)


def detect_engine(argv: list[str]) -> str:
    """The name of the engine that recognises the command (after any leading VAR=value words)."""
    return engine_for_command(argv).name


def resolve_gpu(opts: PlanOptions) -> GpuSpec:
    if opts.gpu_mem_gib is not None:
        return custom_gpu(opts.gpu_mem_gib)
    return find_gpu(opts.gpu or DEFAULT_GPU)


def plan_command(argv: list[str] | str, opts: PlanOptions = PlanOptions()) -> dict[str, Any]:
    return plan_command_full(argv, opts)[0]


def plan_command_full(argv: list[str] | str, opts: PlanOptions = PlanOptions()) -> tuple[dict[str, Any], list[Any]]:
    """Plan and (if opts.fixes) the per-TP table. Returns (contract dict, rows)."""
    args_list = split_command(argv)
    eng = engine(opts.engine) if opts.engine else engine_for_command(args_list)
    return eng.plan(args_list, opts)


def env_gpu_default() -> str:
    return os.environ.get("SPECBENCH_GPU", DEFAULT_GPU)
