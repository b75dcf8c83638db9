"""A dry run's rows as typed values (docs/contracts.md, "dry-run rows"): what `specbench run --dry-run --json`
prints per cell, what `predict` reads and the matrix's "fastest setup that fits" table builds on. Written by
matrix/preflight.py::dry_run; read by predict/, decide/ and report/ below and beside it."""

from __future__ import annotations

from typing import Any, TypedDict


class PlanLimits(TypedDict):
    """A dry-run row's `plan_limits` (LIMIT_KEYS, in that order; docs/contracts.md): null where the plan lacks one."""

    status: str | None
    error: str | None
    engine_cap: int | None
    max_running_requests: int | None
    requested_max_running_requests: int | None
    kv_tokens: int | None
    max_mamba_cache_size: int | None
    mamba_ratio: float | None
    planner_error: str | None


class DryRunRow(TypedDict):
    """One cell of `specbench run --dry-run --json` (docs/contracts.md, dry-run rows): the launch the cell would run
    on, the planner's verdict and limits, and the warnings the dry run prints beside it."""

    cell: str
    server_id: str
    phase: int
    label: str
    server: dict[str, Any]
    client: dict[str, Any]
    verdict: str
    plan_status: str | None
    reason: str | None
    fix: dict[str, Any] | None
    notes: list[str]
    command: list[str]
    env: dict[str, str]
    max_running_requests_planned: int | None
    effective_concurrency_planned: int | None
    concurrency_warning: str | None
    expected_load_s: float | None
    duration_warning: str | None
    plan_limits: PlanLimits | None
    plan_limits_asked: PlanLimits | None
    repeat_policy: dict[str, Any]
    aa_of: Any
    prompts_warning: str | None


class PredictedRow(DryRunRow):
    """A dry-run row with the step-cost model's prediction of its cell (`run --dry-run --json`, predict/
    plan_matrix.py::with_predictions): Predicted.as_dict, or {"error": why} for a cell it cannot predict."""

    predicted: dict[str, Any]
