"""A matrix's dry-run rows -> their predictions (what `specbench predict`, `run --dry-run` and `run --order predicted`
share): the [plan] table, the calibration (a file, else the shipped ones), the accept lengths. The rows come from
the runner's dry run (commands/predict.py::plan_rows): this layer sits below matrix/ and does not import it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from specbench.contracts_dryrun import DryRunRow, PredictedRow
from specbench.errors import UserError
from specbench.predict import calibration as cal_io
from specbench.predict.cells import PlanKeys
from specbench.predict.matrix import Predicted, predict_rows


def plan_table_of(spec: Any) -> PlanKeys:
    """The matrix's [plan] table as the predictor reads it (matrix/schema.py::PlanSettings)."""
    p = spec.plan
    return PlanKeys(p.model_config_, p.draft_config, p.gpu, p.engine_version)


def load_calibration(path: Path | None) -> cal_io.Calibration:
    """A user's calibration first (its classes win), the shipped ones behind it for every class it lacks, and their
    out-of-sample error where it has none of its own (a one-store `calibrate --quick`)."""
    if path is None:
        return cal_io.shipped()
    own = cal_io.read(path)
    merged = cal_io.merge([own, cal_io.shipped()])
    return replace(merged, source=own.source)


def accept_from_store(path: Path) -> dict[str, float]:
    """label -> the accept length measured in a store (sum(output) / sum(verify steps) over its done cells)."""
    from specbench.predict.observe import observations

    per: dict[str, list[float]] = {}
    for o in observations(str(path)):
        if o.accept_len is not None:
            per.setdefault(o.label, []).append(o.accept_len)
    if not per:
        raise UserError(f"{path}: no done speculative cell with request rows to take accept lengths from")
    return {k: sum(v) / len(v) for k, v in per.items()}


def predict_spec(spec: Any, rows: Sequence[Mapping[str, Any]], calibration: cal_io.Calibration,
                 accept_len: float | None = None, measured: Mapping[str, float] | None = None) -> list[Predicted]:
    if accept_len is not None and not (math.isfinite(accept_len) and accept_len >= 1):  # nan fails both tests
        raise UserError(f"--accept-len must be a number >= 1 (tokens per verify step), got {accept_len:g}")
    if measured is not None:
        spec_labels = {str(r["label"]) for r in rows if str((r.get("server") or {}).get("algorithm") or "ar").lower()
                       not in ("ar", "")}
        if spec_labels and not spec_labels & set(measured):
            raise UserError(f"--acceptance-from: none of the store's labels ({', '.join(sorted(measured))}) is a "
                            f"speculative configuration of this matrix ({', '.join(sorted(spec_labels))})")
    return predict_rows(rows, plan_table_of(spec), spec.engine, calibration, accept_len, measured)


def server_order(rows: Sequence[Mapping[str, Any]], preds: Sequence[Predicted]) -> tuple[str, ...]:
    """Server ids, most promising first within the matrix: AR servers (the baseline every speedup needs) first,
    then by each server's best predicted speedup, unpredicted ones last; the runner keeps phases in order."""
    best: dict[str, float] = {}
    is_ar: dict[str, bool] = {}
    for row, p in zip(rows, preds):
        sid = str(row["server_id"])
        is_ar[sid] = str((row.get("server") or {}).get("algorithm") or "ar").lower() == "ar"
        if p.speedup is not None:
            best[sid] = max(best.get(sid, 0.0), p.speedup)
    order = list(dict.fromkeys(str(r["server_id"]) for r in rows))
    return tuple(sorted(order, key=lambda s: (0 if is_ar.get(s) else 1, -best.get(s, -1.0))))


def with_predictions(spec: Any, rows: Sequence[DryRunRow]) -> list[PredictedRow]:
    """The dry run's rows, each with `predicted` (Predicted.as_dict: speedup, its interval, tok/s, TPOT ...) from the
    shipped calibrations and the matrix's simulated accept lengths; a cell the model cannot predict carries its
    reason in `predicted.error`, and a matrix it cannot read at all gets the reason in every row."""
    try:
        preds = [p.as_dict() for p in predict_spec(spec, rows, cal_io.shipped())]
    except UserError as exc:
        preds = [{"error": str(exc)} for _ in rows]
    return [cast(PredictedRow, {**r, "predicted": p}) for r, p in zip(rows, preds)]  # a row's own key replaced


def predicted_text(row: Mapping[str, Any]) -> str:
    """' predicted=1.42x [0.94-1.88] (extrapolated)' for a dry-run line (the state when not calibrated), '' when the
    cell has no prediction."""
    p = row.get("predicted") or {}
    sp = p.get("speedup")
    if sp is None:
        return ""
    lo, hi = p.get("speedup_lo"), p.get("speedup_hi")
    iv = f" [{lo:.2f}-{hi:.2f}]" if lo is not None and hi is not None else ""
    state = p.get("calibration_state") or ""
    return f" predicted={sp:.2f}x{iv}" + (f" ({state})" if state and state != "calibrated" else "")


def shipped_or_none() -> cal_io.Calibration | None:
    try:
        return cal_io.shipped()
    except UserError:
        return None

