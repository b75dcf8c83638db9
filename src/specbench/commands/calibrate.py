"""`specbench calibrate STORE... [--out FILE]`: fit the step-cost model's constants to recorded stores."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from specbench.errors import UserError


def register(app: typer.Typer) -> None:
    app.command("calibrate", help="Fit the step-cost model's per-step overheads and efficiencies to results stores "
                                  "(AR plus simulated or measured acceptance) and write a calibration file for "
                                  "`specbench predict --calibration`.")(calibrate_cmd)


def calibrate_cmd(
    stores: list[Path] = typer.Argument(..., help="results stores of `specbench run`"),
    out: Optional[Path] = typer.Option(None, "--out", help="calibration file to write (default: print it)"),
) -> None:
    from specbench.predict.api import calibrate

    for s in stores:
        if not s.is_file():
            raise UserError(f"{s}: no such results store")
    cal = calibrate([str(s) for s in stores])
    text = json.dumps(cal.to_json(), indent=1) + "\n"
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    for c in cal.classes:
        rms = "-" if c.step_rel_rms != c.step_rel_rms else f"{100 * c.step_rel_rms:.1f} %"
        sys.stderr.write(f"{c.key.text()}: {c.n_step} cells, step residual RMS {rms}\n")
    sys.stderr.write(f"wrote {out}\n")
