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
    stores: list[Path] = typer.Argument(..., help="results stores of `specbench run` (with --quick: one matrix)"),
    out: Optional[Path] = typer.Option(None, "--out", help="calibration file to write (default: print it; with "
                                       "--quick: runs/<matrix>.calibration.json)"),
    quick: bool = typer.Option(False, "--quick", help="plan and run the smallest calibration matrix for this "
                               "matrix's GPU, engine release and model (AR and one speculative configuration at "
                               "two concurrencies, two prompt lengths, two simulated accept lengths), then fit it"),
    store: Optional[Path] = typer.Option(None, "--store", help="with --quick: the results store to run into "
                                         "(default runs/<matrix>-quick.sqlite)"),
    dry: bool = typer.Option(False, "--dry-run", help="with --quick: print the calibration matrix and how long it "
                             "will take; run nothing"),
) -> None:
    from specbench.predict.api import calibrate

    if quick:
        from specbench.commands.calibrate_quick import quick as run_quick

        if len(stores) != 1:
            raise UserError("--quick takes one matrix file")
        run_quick(stores[0], out, store, dry)
        return
    if store is not None or dry:
        raise UserError("--store and --dry-run go with --quick")
    _check_stores(stores, out)
    for s in stores:
        if not s.is_file():
            raise UserError(f"{s}: no such results store")
    unique = {s.resolve(): s for s in reversed(stores)}  # a store named twice (or through a link) counts once
    cal = calibrate([str(unique[r]) for r in dict.fromkeys(s.resolve() for s in stores)])
    text = json.dumps(cal.to_json(), indent=1) + "\n"
    if out is None:
        sys.stdout.write(text)
        for line in thin_warnings(cal):
            sys.stderr.write(f"warning: {line}\n")
        return
    from specbench.commands.calibrate_quick import check_out

    check_out(out, tuple(stores))
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    for c in cal.classes:
        rms = "-" if c.step_rel_rms != c.step_rel_rms else f"{100 * c.step_rel_rms:.1f} %"
        sys.stderr.write(f"{c.key.text()}: {c.n_step} cells, step residual RMS {rms}\n")
    for line in thin_warnings(cal):
        sys.stderr.write(f"warning: {line}\n")
    sys.stderr.write(f"wrote {out}\n")


def _check_stores(stores: list[Path], out: Path | None) -> None:
    seen: dict[Path, Path] = {}
    for s in stores:
        r = s.resolve()
        if r in seen:
            sys.stderr.write(f"warning: {s} is {seen[r]} again: counted once\n")
        seen.setdefault(r, s)


def thin_warnings(cal: object) -> list[str]:
    """What a calibration cannot pin: a class with fewer cells than step constants (the rest stay at the prior
    over all classes), a class without an AR cell (no baseline: its speedups borrow the AR step of other classes)."""
    from specbench.predict.model import Params

    n_const = len(Params().step_vector())
    out = []
    coverages = getattr(cal, "coverages", {})
    for c in getattr(cal, "classes", ()):
        if c.key.model:
            continue
        if c.n_step < n_const:
            out.append(f"{c.key.text()}: {c.n_step} cells for {n_const} step constants: the others stay at the fit "
                       "over every class (measure more concurrencies and prompt lengths: `calibrate --quick`)")
        cov = coverages.get(c.key)
        if cov is not None and "ar" not in cov.methods:
            out.append(f"{c.key.text()}: no AR cell: its AR step, and so its speedups, come from other classes")
    return out
