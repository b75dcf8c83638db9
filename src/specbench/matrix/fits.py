"""The fastest setup that fits for a matrix before anything runs (issue 34 item 3): the dry run's rows (planned:
each launch's limits, `plan_limits`) -> one setup per launch and workload (`setups_from_dry_run`) -> decide/fits.py's
rows, each launch predicted by the step-cost model at the concurrency it reaches (predict/plan_matrix.py::predict_spec,
the same calibration, accept lengths and [plan] table as `specbench predict`). What `specbench predict` prints under its cell table and carries in `--json` as `fits`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from specbench.decide.fits import FitRow, Setup, Workload, _int, build, row_at, workload_of
from specbench.errors import UserError
from specbench.load import speedup as speedups
from specbench.matrix.adapters import command_model
from specbench.matrix.schema import MatrixSpec
from specbench.plan.reach import Limit, Reach, reach_of
from specbench.predict.calibration import Calibration
from specbench.predict.matrix import Predicted


def section_of(spec: MatrixSpec, rows: Sequence[Mapping[str, Any]]) -> str:
    """'<model> · <GPU>' as the report names a section: the launch command's model, the [plan] GPU."""
    model = next((m for r in rows if (m := command_model(r.get("command") or ()))), None)
    return f"{model or spec.plan.model_config_ or 'model ?'} · {spec.plan.gpu or 'GPU ?'}"


def matrix_fits(spec: MatrixSpec, rows: Sequence[Mapping[str, Any]], calibration: Calibration | None,
                accept_len: float | None = None, measured: Mapping[str, float] | None = None) -> tuple[FitRow, ...]:
    """`rows`: matrix/preflight.py::dry_run's; `calibration` None: planned limits only, no prediction."""
    from specbench.predict.plan_matrix import predict_spec

    by_cell = {str(r.get("cell")): r for r in rows}

    def predict(setup: Setup, at: int) -> Predicted | None:
        row = by_cell.get(setup.cell_id)
        if row is None or calibration is None:
            return None
        try:
            return predict_spec(spec, [row_at(row, at)], calibration, accept_len, measured)[0]
        except UserError as exc:
            raise ValueError(str(exc)) from None
    return build(setups_from_dry_run(rows, section_of(spec, rows)), predict if calibration is not None else None)


def setups_from_dry_run(rows: Sequence[Mapping[str, Any]], section: str) -> list[Setup]:
    """One setup per launch (server_id) and closed-loop workload of the dry run's rows: the planned limits
    (`plan_limits`, docs/contracts.md), the largest concurrency the matrix asks of it there, and for a launch the
    planner fixed (`plan_limits_asked`) what made the asked one fail. Rate workloads (request_rate set) have no
    reachable concurrency: left out."""
    groups: dict[tuple[str, Workload], list[Mapping[str, Any]]] = {}
    for row in rows:
        client = row.get("client") or {}
        if speedups.is_rate_cell(client):
            continue
        groups.setdefault((str(row.get("server_id")), workload_of(section, client)), []).append(row)
    out = []
    for (sid, w), group in groups.items():
        asked = max((_int((g.get("client") or {}).get("concurrency")) or 0) for g in group) or None
        top = max(group, key=lambda g: _int((g.get("client") or {}).get("concurrency")) or 0)
        reach = reach_of(top.get("plan_limits"), w.length, asked)
        if top.get("verdict") == "fixed":
            reach = _fixed(reach, top.get("plan_limits_asked"), top.get("reason"), w.length)
        server = top.get("server") or {}
        out.append(Setup(w, _int(server.get("tp")) or 1, str(top.get("label")), sid, str(top.get("cell")), reach,
                         str(top.get("verdict")) if top.get("verdict") else None))
    return out


def _fixed(reach: Reach, asked_plan: Mapping[str, Any] | None, reason: Any, length: int | None) -> Reach:
    """A launch the planner's nearest fix replaced (auto_fix): the fix and, from the asked plan's own numbers, the
    limit that made the asked launch fail (its Mamba slots or its KV tokens); where the fixed cap is what binds, that
    limit is named as the binding one."""
    why = str(reason) if reason else "auto_fix: launched with the planner's nearest working settings"
    if not asked_plan:
        return replace(reach, fix=why)
    slots, ratio = _int(asked_plan.get("max_mamba_cache_size")), _int(asked_plan.get("mamba_ratio"))
    kv = _int(asked_plan.get("kv_tokens"))
    need = max(1, reach.holds or 1)
    failed: Limit
    if slots is not None and ratio and slots // ratio < need:  # a plan out of memory states K <= 0: none left
        k = max(0, slots)
        failed, detail = "mamba", f"asked: {k:,} Mamba slots / {ratio} per request = {k // ratio} requests"
    elif kv is not None and length and kv // length < need:
        n = max(0, kv)
        failed, detail = "kv", f"asked: {n:,} KV tokens / {length:,} = {n // length} requests"
    else:
        return replace(reach, fix=why)
    return replace(reach, binds=failed if reach.binds == "engine_cap" else reach.binds, fix=f"{why}; {detail}")
