"""`specbench predict MATRIX.toml [--calibration FILE] [--accept-len L | --acceptance-from STORE] [--json]`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from specbench.contracts_dryrun import DryRunRow
from specbench.errors import UserError

# The predictor, the planner and rich are imported inside the command: `specbench --help` does not pay for them.


def _x(v: Any, digits: int = 2, suffix: str = "") -> str:
    return "-" if v is None else f"{v:.{digits}f}{suffix}"


def plan_rows(spec: Any) -> list[DryRunRow]:
    """The dry run's rows for predicting (matrix/preflight.py::dry_run: the nearest-fix search only where a launch
    fails in a matrix that auto-fixes)."""
    from specbench.matrix.preflight import dry_run

    return dry_run(spec)


def register(app: typer.Typer) -> None:
    app.command("predict", help="Predict tok/s, TPOT and the speedup over AR of every cell of a matrix, before any "
                                "run: a roofline step-cost model with constants calibrated from recorded stores "
                                "(`specbench calibrate`).")(predict_cmd)


def predict_cmd(
    matrix: Path = typer.Argument(..., help="the matrix TOML file"),
    calibration: Optional[Path] = typer.Option(None, "--calibration", help="a calibration file of `specbench "
                                               "calibrate` (default: the calibrations shipped with specbench)"),
    accept_len: Optional[float] = typer.Option(None, "--accept-len", help="mean accept length (tokens per verify "
                                               "step, >= 1) for every speculative cell"),
    acceptance_from: Optional[Path] = typer.Option(None, "--acceptance-from", help="take each configuration's "
                                                   "accept length from a results store (by label)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object (docs/contracts.md)"),
) -> None:
    from specbench.matrix.toml_load import load_matrix
    from specbench.predict.plan_matrix import accept_from_store, load_calibration, predict_spec

    if accept_len is not None and acceptance_from is not None:
        raise UserError("give --accept-len or --acceptance-from, not both")
    spec, _ = load_matrix(matrix)
    cal = load_calibration(calibration)
    measured = accept_from_store(acceptance_from) if acceptance_from is not None else None
    from specbench.matrix.fits import matrix_fits

    rows = plan_rows(spec)
    preds = predict_spec(spec, rows, cal, accept_len, measured)
    fits = matrix_fits(spec, rows, cal, accept_len, measured)
    if as_json:
        doc = {"matrix": str(matrix), "calibration": cal.source, "cells": [p.as_dict() for p in preds],
               "fits": [r.as_dict() for r in fits]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(f"{spec.name}: predicted (calibration: {cal.source})"), box=box.SIMPLE_HEAD,
              pad_edge=False)
    for col in ("tp", "cell", "c", "in+out", "batch", "accept", "tok/s", "TPOT ms", "TTFT ms", "speedup", "interval",
                "constants"):
        t.add_column(col, justify="left" if col in ("cell", "constants") else "right", no_wrap=True)
    for p in preds:
        iv = f"{p.speedup_lo:.2f}-{p.speedup_hi:.2f}x" if p.speedup_lo is not None and p.speedup_hi is not None else "-"
        ceiling = "<= " if p.calibration_state and p.tok_s_lo is None else ""  # the bare roofline: a ceiling
        t.add_row(str(p.tp), escape(p.label), str(p.concurrency), escape(p.load or "-"), str(p.batch or "-"),
                  _x(p.accept_len),
                  ceiling + _x(p.tok_s, 1), _x(p.tpot_ms), _x(p.ttft_ms, 1), _x(p.speedup, 2, "x"), iv,
                  p.calibration_state or "-")
    console = Console() if sys.stdout.isatty() else Console(width=200, soft_wrap=True)
    console.print(t)
    for src in dict.fromkeys(p.source for p in preds if p.source):
        console.print(f"  constants: {src}", highlight=False, markup=False)
    errors: dict[str, list[str]] = {}
    for p in preds:
        if p.error:
            errors.setdefault(p.error, []).append(p.label)
    for msg, labels in errors.items():
        names = ", ".join(dict.fromkeys(labels))
        console.print(f"  not predicted ({len(labels)} cells: {names}): {msg}", highlight=False, markup=False)
    outside: dict[str, list[str]] = {}
    for p in preds:
        for why in p.outside:
            outside.setdefault(why, []).append(p.label)
    for why, labels in outside.items():
        names = ", ".join(dict.fromkeys(labels))
        console.print(f"  extrapolated ({len(labels)} cells: {names}): {why}", highlight=False, markup=False)
    if outside or any(p.calibration_state == "uncalibrated" for p in preds):
        console.print("  intervals: 95 % on the log scale, from the calibration's leave-one-store-out error, widened "
                      "for each distance above; `specbench calibrate --quick MATRIX` measures this GPU, release and "
                      "model in minutes and narrows them", highlight=False, markup=False)
    from specbench.report.fits_render import fits_rich

    console.print()
    for part in fits_rich(fits):
        console.print(part, highlight=False)
