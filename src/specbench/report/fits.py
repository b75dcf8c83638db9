"""The fastest setup that fits, from results stores (issue 34 item 3; decide/fits.py builds and ranks the rows):
per section (model · GPU) and closed-loop workload, one row per launched server with the planner's limits of that
launch (servers.plan_json, stored at preflight: plan/reach.py reads them), its done cells' throughput at the
concurrency it reaches, and the step-cost model's prediction there where no cell ran at or below it.

A done cell ran min(its concurrency, what the launch holds, the server's own `running_cap` where the store has it)
requests at once. The predictor (specbench/predict/) is fed the stored settings, the launch command and the matrix's
[plan] table (meta.matrix_text), the speculative cells at the accept length they measured (the mean over the
server's label in that store, as `specbench predict --acceptance-from` takes it), else their simulated one.
`fit_rows` never raises on a store the model cannot read: its rows then carry why they have no prediction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypedDict

from specbench.decide.fits import FitRow, Measured, Predictor, Setup, build, row_at, workload_of
from specbench.errors import UserError
from specbench.load import speedup as speedups
from specbench.plan.reach import reach_of
from specbench.predict.calibration import Calibration
from specbench.predict.matrix import Predicted
from specbench.report.sections import cell_section
from specbench.stored.records import CellRecord, LoadedStore, ServerRecord


def _interval(cell: CellRecord) -> tuple[float, float] | None:
    v = cell.metrics.get("output_throughput_ci95")
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
        return float(v[0]), float(v[1])
    return None


def _warnings(cell: CellRecord) -> tuple[str, ...]:
    out = []
    for key in ("client_warning", "saturation_reason", "cap_check_reason", "dataset_warning"):
        v = cell.metrics.get(key)
        if isinstance(v, str) and v:
            out.append(v)
    return tuple(out)


def _length(cells: Sequence[CellRecord]) -> int | None:
    """Prompt + output tokens of one request: the client's settings, else the mean over the measured requests."""
    c = cells[0].client
    p, o = c.get("prompt_tokens"), c.get("output_tokens")
    if isinstance(p, int) and isinstance(o, int) and not isinstance(p, bool) and not isinstance(o, bool):
        return p + o
    reqs = [r for cell in cells for r in cell.requests if r.ok and r.prompt_tokens and r.output_tokens]
    if not reqs:
        return None
    return round(sum((r.prompt_tokens or 0) + (r.output_tokens or 0) for r in reqs) / len(reqs))


def _measured(cell: CellRecord, holds: int | None) -> Measured | None:
    tok = cell.metric("output_throughput")
    c = cell.concurrency
    if cell.status != "done" or tok is None or tok <= 0 or c is None or c < 1:
        return None
    caps = [v for v in (holds, cell.metric("running_cap")) if v is not None and v >= 1]
    running = min([c, *[int(v) for v in caps]])
    return Measured(cell.cell_id, c, running, tok, _interval(cell), _warnings(cell))


class LaunchRow(TypedDict):
    """A stored cell as the predictor reads a dry-run row (the keys of matrix/preflight.py::dry_run it reads); the
    server settings and client axes as the store holds them."""

    cell: str
    label: str
    server: dict[str, object]
    client: dict[str, object]
    command: list[str]
    max_running_requests_planned: int | None


def _setups(store: LoadedStore) -> tuple[list[Setup], dict[str, LaunchRow]]:
    """The store's setups, and per representative cell id the dry-run-like row the predictor reads."""
    by_key: dict[tuple[str, Any], list[CellRecord]] = {}
    for cell in store.cells:
        if cell.server_id is None or speedups.is_rate_cell(cell.client):
            continue
        w = workload_of(cell_section(store, cell), cell.client)
        by_key.setdefault((cell.server_id, w), []).append(cell)
    setups: list[Setup] = []
    rows: dict[str, LaunchRow] = {}
    for (sid, w), cells in by_key.items():
        server = store.server(sid)
        asked = max((c.concurrency or 0) for c in cells) or None
        length = w.length if w.length is not None else _length(cells)
        plan = dict(server.plan) if server is not None and isinstance(server.plan, Mapping) else None
        reach = reach_of(plan, length, asked)
        if server is not None and server.verdict == "fixed":
            fix = (server.settings or {}).get("fix")
            reach = replace(reach, fix=f"auto_fix {fix}" if fix else "auto_fix: launched with the planner's nearest "
                                                                    "working settings")
        measured = tuple(m for c in cells if (m := _measured(c, reach.holds)) is not None)
        top = max(cells, key=lambda c: c.concurrency or 0)
        tp = top.tp or (server.tp if server is not None else None) or 1
        setups.append(Setup(w, int(tp), top.label, sid, top.cell_id, reach,
                            server.verdict if server is not None else None, measured, store.label))
        rows[top.cell_id] = _row(top, server, reach.engine_cap)
    return setups, rows


def _row(cell: CellRecord, server: ServerRecord | None, cap: int | None) -> LaunchRow:
    """A stored cell as the predictor reads a dry-run row (predict/matrix.py::predict_rows)."""
    settings: dict[str, object] = dict(server.settings) if server is not None and server.settings else dict(cell.server)
    settings.setdefault("tp", cell.tp)
    if cell.algorithm and "algorithm" not in settings:
        settings["algorithm"] = cell.algorithm
    return {"cell": cell.cell_id, "label": cell.label, "server": settings, "client": dict(cell.client),
            "command": list(server.command) if server is not None else [], "max_running_requests_planned": cap}


def _accepts(store: LoadedStore) -> dict[str, float]:
    """label -> the accept length its done cells measured (predict/observe.py), for predicting it elsewhere."""
    from specbench.predict.observe import observations

    per: dict[str, list[float]] = {}
    try:
        obs = observations(store)
    except (UserError, ValueError, ArithmeticError):
        return {}
    for o in obs:
        if o.accept_len is not None and math.isfinite(o.accept_len):
            per.setdefault(o.label, []).append(o.accept_len)
    return {k: sum(v) / len(v) for k, v in per.items()}


def _predictor(store: LoadedStore, rows: Mapping[str, LaunchRow], cal: Calibration) -> Predictor:
    """The step-cost model for this store's launches: its [plan] table and engine release, its measured accept
    lengths, a launch moved to the asked concurrency (decide/fits.py::row_at)."""
    from specbench.predict.cells import PlanKeys
    from specbench.predict.matrix import predict_rows
    from specbench.predict.observe import plan_table

    try:
        table = plan_table(store)
    except UserError:
        table = PlanKeys()
    if store.engine_version:
        table = dataclasses.replace(table, engine_version=store.engine_version)
    engine = store.engine or "unknown"
    accepts: list[dict[str, float]] = []  # read once, on the first prediction (most rows are measured)

    def predict(setup: Setup, at: int) -> Predicted | None:
        row = rows.get(setup.cell_id)
        if row is None:
            return None
        if not accepts:
            accepts.append(_accepts(store))
        return predict_rows([row_at(row, at)], table, engine, cal, None, accepts[0])[0]
    return predict


def fit_rows(stores: Sequence[LoadedStore], calibration: Calibration | None = None,
             predict: bool = True) -> tuple[FitRow, ...]:
    """The table over every store (a workload seen in two stores ranks their rows together). `calibration`: the
    predictor's constants (default: the shipped ones); `predict=False`: measured rows only."""
    cal = calibration
    if predict and cal is None:
        from specbench.predict.calibration import shipped
        try:
            cal = shipped()
        except UserError:
            cal = None
    setups: list[Setup] = []
    predictors: dict[str, Predictor] = {}
    for store in stores:
        s, rows = _setups(store)
        setups += s
        if predict and cal is not None:
            predictors[store.label] = _predictor(store, rows, cal)

    def predict_any(setup: Setup, at: int) -> Predicted | None:
        p = predictors.get(setup.store)
        return p(setup, at) if p is not None else None
    return build(setups, predict_any if predictors else None)
