"""The fastest setup that fits for a matrix before anything runs (issue 34 item 3): the dry run's rows (planned:
each launch's limits, `plan_limits`) -> decide/fits.py's rows, each launch predicted by the step-cost model at the
concurrency it reaches (predict/plan_matrix.py::predict_spec, the same calibration, accept lengths and [plan] table
as `specbench predict`). What `specbench predict` prints under its cell table and carries in `--json` as `fits`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specbench.decide.fits import FitRow, Setup, build, row_at, setups_from_dry_run
from specbench.errors import UserError
from specbench.matrix.adapters import command_model
from specbench.matrix.schema import MatrixSpec
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
