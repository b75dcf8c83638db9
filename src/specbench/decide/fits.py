"""The fastest setup that fits (issue 34 item 3): for each workload, one row per launch (TP size x configuration)
with the requests it runs at once there, the limit that binds it (plan/reach.py: engine cap, Mamba slots, KV tokens
at the workload's length, the matrix's concurrency), its throughput at that concurrency, per GPU (/ TP) and per
request, and the row with the highest throughput per GPU among those that fit named "fastest per GPU that fits".

The throughput at the reachable concurrency R, first of:
- measured: a done cell that ran R requests at once (min(its concurrency, what the launch holds), so a cell asked
  above the cap counts at the cap: the engine runs the cap and queues the rest);
- measured below: the done cell at the largest concurrency below R, marked (a lower bound of what R gives), with the
  step-cost model's prediction at R beside it where one can be made;
- predicted: the step-cost model at R (predict/matrix.py), with its interval and calibration state (calibrated /
  extrapolated / uncalibrated, predict/trust.py; only with no calibration at all is it the bare roofline: a ceiling,
  shown as "<=", with no interval);
- none, with why.

Two sides build the rows: the matrix before anything runs (matrix/fits.py::setups_from_dry_run, the dry run's rows:
planned + predicted) and a results store (report/fits.py: servers.plan_json and the done cells). Pure functions; the
caller hands in the predictor (`Predictor`), so this module never reads a file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypedDict, TypeVar, cast

from specbench.decide.verdict import TIE_MARGIN
from specbench.load import speedup as speedups
from specbench.plan.reach import LIMIT_TEXT, Limit, Reach
from specbench.predict.matrix import Predicted

Basis = Literal["measured", "measured_below", "predicted", "none"]


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


class WorkloadJson(TypedDict):
    section: str
    prompt_tokens: int | None
    output_tokens: int | None
    dataset: str | None
    text: str


@dataclass(frozen=True, order=True)
class Workload:
    """What a user asks the answer for: the model and GPU (the report's section), the request shape and dataset, and
    any other workload axis of the cell (load/results.py::workload_extras)."""

    section: str                  # "model · GPU"
    prompt_tokens: int | None
    output_tokens: int | None
    dataset: str | None
    extras: tuple[Any, ...] = ()

    @property
    def length(self) -> int | None:
        """Tokens one request holds at its end: prompt + output (None when either is unknown)."""
        if self.prompt_tokens is None or self.output_tokens is None:
            return None
        return self.prompt_tokens + self.output_tokens

    def text(self) -> str:
        p = "?" if self.prompt_tokens is None else f"{self.prompt_tokens:,}"
        o = "?" if self.output_tokens is None else f"{self.output_tokens:,}"
        data = f", {self.dataset}" if self.dataset else ""
        extra = "".join(f", {e}" for e in self.extras if e not in (None, ""))
        return f"{self.section}: {p} prompt + {o} output tokens{data}{extra}"

    def as_dict(self) -> WorkloadJson:
        return {"section": self.section, "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "dataset": self.dataset, "text": self.text()}


def workload_of(section: str, client: Mapping[str, Any]) -> Workload:
    """A cell's workload: its client settings less concurrency (load/speedup.py::baseline_key, the key a speculative
    cell is compared with its AR cell on), in the given section."""
    key = speedups.baseline_key(None, None, client)
    extras = tuple(_axis_text(e) for e in key[6:])
    return Workload(section, _int(client.get("prompt_tokens")), _int(client.get("output_tokens")),
                    None if client.get("dataset") is None else str(client.get("dataset")), extras)


def _axis_text(axis: Any) -> str:
    """One workload axis (load/results.py::workload_extras: a (key, JSON) pair) as `key=value`: prompt_len=data."""
    if isinstance(axis, tuple) and len(axis) == 2:
        key, value = axis
        try:
            v = json.loads(value)
        except (TypeError, ValueError):
            return f"{key}={value}"
        return f"{key}={v if isinstance(v, str) else value}"  # a text without its quotes; a number or list as JSON
    return str(axis)


@dataclass(frozen=True)
class Measured:
    """One done closed-loop cell of a launch at a workload."""

    cell_id: str
    concurrency: int              # asked
    running: int                  # requests it ran at once: min(asked, what the launch holds / the server's cap)
    tok_s: float
    interval: tuple[float, float] | None = None   # the pooled throughput's 95 % interval (repeats), else None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Setup:
    """One launch (TP size x configuration) at one workload: what a row is built from. `cell_id` names one of its
    cells (the caller's predictor finds the launch by it)."""

    workload: Workload
    tp: int
    label: str
    server_id: str
    cell_id: str
    reach: Reach
    verdict: str | None = None
    measured: tuple[Measured, ...] = ()
    store: str = ""


@dataclass(frozen=True)
class Throughput:
    """The throughput a row is ranked by, and where it comes from."""

    basis: Basis
    tok_s: float | None = None
    at: int | None = None                         # the running requests it is measured / predicted at
    interval: tuple[float, float] | None = None
    calibration: str = ""                         # predicted: calibrated | extrapolated | uncalibrated
    source: str = ""                              # the cell id, or the prediction's constants
    note: str = ""                                # the marker (measured below), or why there is none
    predicted_at_reach: Predicted | None = None   # measured below: the model's number at the reachable concurrency
    warnings: tuple[str, ...] = ()                # the measured cell's integrity warnings

    @property
    def ceiling(self) -> bool:
        """A prediction without an interval (no calibration at all: the bare roofline), an upper bound."""
        return self.basis == "predicted" and self.calibration == "uncalibrated" and self.interval is None


class FitRowJson(TypedDict):
    """One row of the fits table as JSON (`specbench predict --json` "fits"), in this key order."""

    workload: WorkloadJson
    tp: int
    label: str
    server_id: str
    store: str | None
    verdict: str | None
    engine_cap: int | None
    mamba_requests: int | None
    mamba_slots: int | None
    mamba_ratio: int | None
    kv_requests: int | None
    kv_tokens: int | None
    request_tokens: int | None
    matrix_concurrency: int | None
    holds: int | None
    reachable: int | None
    binds: Limit | None
    limits_text: str
    fix: str | None
    plan_reason: str | None
    basis: Basis
    at_concurrency: int | None
    tok_s: float | None
    tok_s_ci: list[float | None] | None
    tok_s_per_gpu: float | None
    tok_s_per_gpu_ci: list[float | None] | None
    tok_s_per_request: float | None
    calibration_state: str | None
    ceiling: bool
    source: str | None
    note: str | None
    predicted_at_reachable: float | None
    warnings: list[str]
    best: bool
    near_best: bool
    open: bool


@dataclass(frozen=True)
class FitRow:
    """One row of the table: a launch at a workload, its reach, its throughput there, and whether it is the
    fastest per GPU that fits (`best`) or within the tie margin of it (`near_best`)."""

    setup: Setup
    throughput: Throughput
    best: bool = False
    near_best: bool = False
    open: bool = False    # measured below its reach, or predicted: its prediction does not rule out the best per GPU


    @property
    def workload(self) -> Workload:
        return self.setup.workload

    @property
    def per_gpu(self) -> float | None:
        t = self.throughput.tok_s
        return None if t is None else t / max(1, self.setup.tp)

    @property
    def per_request(self) -> float | None:
        t, at = self.throughput.tok_s, self.throughput.at
        return None if t is None or not at else t / at

    @property
    def eligible(self) -> bool:
        """Fits (reaches at least one request) and has a throughput to rank by."""
        return self.setup.reach.fits and self.per_gpu is not None and self.per_gpu > 0

    def as_dict(self) -> FitRowJson:
        s, r, t = self.setup, self.setup.reach, self.throughput

        def rd(x: float | None, n: int = 1) -> float | None:
            return None if x is None or not math.isfinite(x) else round(x, n)
        iv = [rd(t.interval[0]), rd(t.interval[1])] if t.interval else None
        tp = max(1, s.tp)
        p = t.predicted_at_reach
        return {
            "workload": s.workload.as_dict(), "tp": s.tp, "label": s.label, "server_id": s.server_id,
            "store": s.store or None, "verdict": s.verdict,
            "engine_cap": r.engine_cap, "mamba_requests": r.mamba, "mamba_slots": r.mamba_slots,
            "mamba_ratio": r.mamba_ratio, "kv_requests": r.kv, "kv_tokens": r.kv_tokens, "request_tokens": r.length,
            "matrix_concurrency": r.asked, "holds": r.holds, "reachable": r.reachable, "binds": r.binds,
            "limits_text": r.text(), "fix": r.fix, "plan_reason": r.reason,
            "basis": t.basis, "at_concurrency": t.at, "tok_s": rd(t.tok_s), "tok_s_ci": iv,
            "tok_s_per_gpu": rd(self.per_gpu), "tok_s_per_gpu_ci": [rd(t.interval[0] / tp), rd(t.interval[1] / tp)]
            if t.interval else None, "tok_s_per_request": rd(self.per_request, 2),
            "calibration_state": t.calibration or None, "ceiling": t.ceiling, "source": t.source or None,
            "note": t.note or None,
            "predicted_at_reachable": rd(p.tok_s) if p is not None and p.tok_s is not None else None,
            "warnings": list(t.warnings), "best": self.best, "near_best": self.near_best, "open": self.open,
        }


# (setup, concurrency) -> the step-cost model's prediction of that launch at that many requests, None when the
# caller has no model for it
Predictor = Callable[[Setup, int], "Predicted | None"]


def _predicted(setup: Setup, at: int, predict: Predictor | None) -> tuple[Predicted | None, str]:
    if predict is None:
        return None, "no prediction asked"
    try:
        p = predict(setup, at)
    except (ValueError, ArithmeticError) as exc:  # a shape the model cannot read: no prediction, said why
        return None, f"not predicted: {exc}"
    if p is None:
        return None, "not predicted"
    if p.tok_s is None:
        return None, f"not predicted: {p.error}" if p.error else "not predicted"
    return p, ""


def _from_prediction(p: Predicted, at: int) -> Throughput:
    iv = (p.tok_s_lo, p.tok_s_hi) if p.tok_s_lo is not None and p.tok_s_hi is not None else None
    state = p.calibration_state
    note = ("the bare roofline (no calibration): a ceiling, no interval" if iv is None and state == "uncalibrated"
            else "; ".join(p.outside))
    return Throughput("predicted", p.tok_s, p.batch or at, iv, state, p.source, note)


def throughput_of(setup: Setup, predict: Predictor | None) -> Throughput:
    """The throughput at the launch's reachable concurrency: measured, else measured below (marked), else
    predicted, else none with why (module docstring)."""
    r = setup.reach.reachable
    if r is None:
        return Throughput("none", note=setup.reach.reason or "reachable concurrency unknown")
    if r < 1:
        return Throughput("none", note=setup.reach.reason or "runs no request at once")
    at = [m for m in setup.measured if m.running == r]
    if at:
        m = min(at, key=lambda m: (m.concurrency != r, m.concurrency))
        queued = f"asked {m.concurrency}, ran {r}: the rest queued" if m.concurrency != r else ""
        return Throughput("measured", m.tok_s, r, m.interval, source=m.cell_id, note=queued, warnings=m.warnings)
    below = [m for m in setup.measured if m.running < r]
    if below:
        m = max(below, key=lambda m: (m.running, -m.concurrency))
        p, _ = _predicted(setup, r, predict)
        note = f"measured at {m.running} running, below the {r} it reaches"
        if p is not None and p.tok_s is not None:
            ceiling = "<= " if p.calibration_state == "uncalibrated" and p.tok_s_lo is None else ""
            note += f" (predicted at {r}: {ceiling}{p.tok_s:,.1f} tok/s, {p.calibration_state})"
        return Throughput("measured_below", m.tok_s, m.running, m.interval, source=m.cell_id, note=note,
                          predicted_at_reach=p, warnings=m.warnings)
    p, why = _predicted(setup, r, predict)
    if p is not None:
        return _from_prediction(p, r)
    if predict is None:
        return Throughput("none", note=f"no done cell at or below {r}, no prediction")
    return Throughput("none", note=f"no done cell at or below {r}; {why}" if setup.measured else why)


def rank(rows: Sequence[FitRow], margin: float = TIE_MARGIN) -> tuple[FitRow, ...]:
    """The rows with `best` set on the one per workload with the highest throughput per GPU among those that fit
    (ties: the fewer GPUs, then the first), `near_best` on the others within `margin` of it, and `open` on the
    others measured only below their reach, or predicted, whose prediction at the reach (its interval's top; an
    uncalibrated one is a ceiling already) comes within `margin` of the best or passes it: the table cannot rule
    them out."""
    best: dict[Workload, float] = {}
    winner: dict[Workload, int] = {}
    for i, row in enumerate(rows):
        if not row.eligible:
            continue
        v = row.per_gpu or 0.0
        w = row.workload
        j = winner.get(w)
        if j is None or v > best[w] or (v == best[w] and row.setup.tp < rows[j].setup.tp):
            best[w], winner[w] = v, i
    out = []
    for i, row in enumerate(rows):
        w = row.workload
        is_best = winner.get(w) == i
        near = (not is_best and row.eligible and w in best
                and (row.per_gpu or 0.0) >= best[w] * (1 - margin))
        top = _prediction_top(row)
        still_open = (not is_best and not near and top is not None and w in best
                      and top / max(1, row.setup.tp) >= best[w] * (1 - margin))
        out.append(replace(row, best=is_best, near_best=near, open=still_open))
    return tuple(out)


def _prediction_top(row: FitRow) -> float | None:
    """The most the step-cost model allows this row at its reach: the top of its prediction's interval (an
    uncalibrated prediction is a ceiling already); for a row measured below its reach, of the prediction there;
    None for a row measured at its reach or not predicted."""
    t = row.throughput
    p = t.predicted_at_reach if t.basis == "measured_below" else None
    if p is not None:
        return p.tok_s_hi if p.tok_s_hi is not None else p.tok_s
    if t.basis == "predicted" and t.tok_s is not None:
        return t.interval[1] if t.interval is not None else t.tok_s
    return None


def build(setups: Sequence[Setup], predict: Predictor | None = None) -> tuple[FitRow, ...]:
    """The table: one row per setup (workloads in first-seen order, then TP, then AR first and the rest in the order
    given), each with its throughput, ranked."""
    order: dict[Workload, int] = {}
    for s in setups:
        order.setdefault(s.workload, len(order))
    rows = [(i, FitRow(s, throughput_of(s, predict))) for i, s in enumerate(setups)]
    rows.sort(key=lambda ir: (order[ir[1].workload], ir[1].setup.tp, ir[1].setup.label.lower() != "ar", ir[0]))
    return rank([r for _, r in rows])


def best_rows(rows: Sequence[FitRow]) -> dict[Workload, FitRow]:
    return {r.workload: r for r in rows if r.best}


def binds_text(reach: Reach) -> str:
    """The binding limit in words, marked where the planner's fix lowered the cap to it ('Mamba slots
    (auto_fix)')."""
    if not reach.planned:
        return "does not start" if reach.holds == 0 else "unknown (no plan)"
    name = LIMIT_TEXT.get(reach.binds or "", "–")
    return f"{name} (auto_fix)" if reach.fix and reach.binds in ("engine_cap", "mamba") else name


# ----------------------------------------------------------------------------- the matrix, before anything runs


RowT = TypeVar("RowT", bound=Mapping[str, Any])


def row_at(row: RowT, concurrency: int) -> RowT:
    """A launch's row (a dry run's, contracts_dryrun.py::DryRunRow, or a stored launch's) moved to another
    concurrency, of the same type: what the predictor reads to predict the launch at its reachable concurrency."""
    moved = {**dict(row), "cell": f"{row.get('cell')}@c{concurrency}",
             "client": {**dict(row.get("client") or {}), "concurrency": concurrency}}
    return cast(RowT, moved)  # the same keys, two of them new values
