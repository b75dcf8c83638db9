"""`specbench calibrate --quick MATRIX`: plan the smallest calibration matrix for the user's GPU, engine release and
model (predict/quick.py), say how long it will take, run it (matrix/runner.py), fit it (predict/api.py::calibrate)
and write the calibration that `specbench predict --calibration` (and `run --dry-run`) then use."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from specbench.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _doc(matrix: Path) -> tuple[dict[str, Any], str]:
    from specbench.matrix.toml_load import load_matrix

    _, text = load_matrix(matrix)  # the user's matrix is valid first: its errors name its own lines
    return tomllib.loads(text), text


def _quick_spec(matrix: Path) -> tuple[Any, str, Any, float]:
    import tomli_w

    from specbench.matrix.toml_load import parse_matrix
    from specbench.predict.quick import quick_matrix

    doc, _ = _doc(matrix)
    refusal = None
    for simulate in (True, False):
        plan = quick_matrix(doc, simulate)
        text = (MARK + " " + matrix.name + "` (predict/quick.py)\n"
                + tomli_w.dumps(plan.doc))
        try:
            spec = parse_matrix(text, f"{matrix} (quick calibration)", matrix.parent)
            est = _estimate(spec, plan)  # builds every launch: an engine's refusal to simulate is raised here
        except UserError as exc:
            if not simulate or "simulated_accept_len" not in str(exc):
                raise
            refusal = str(exc)
            continue
        if refusal:  # the engine cannot simulate acceptance: the configuration runs at the dataset's own
            plan = replace(plan, notes=plan.notes + (f"no simulated acceptance here ({refusal}): {plan.spec_label} "
                                                     "runs once, at the acceptance the matrix's dataset gives",))
        return spec, text, plan, est
    raise AssertionError("unreachable")


def _estimate(spec: Any, plan: Any) -> float:
    """Seconds the quick matrix takes: boots plus each cell's predicted requests (the shipped calibration)."""
    from specbench.commands.predict import plan_rows
    from specbench.predict.plan_matrix import predict_spec, shipped_or_none
    from specbench.predict.quick import estimate_s

    cal = shipped_or_none()
    rows = plan_rows(spec)
    cell_s: dict[tuple[str, int, int], float] = {}
    if cal is not None:
        for row, p in zip(rows, predict_spec(spec, rows, cal)):
            if p.tok_s and p.batch:
                kind = "ar" if p.label == "ar" else "spec"
                prompt = int((row.get("client") or {}).get("prompt_tokens") or 0)
                one = p.batch * plan.output_tokens / p.tok_s
                cell_s[(kind, p.concurrency, prompt)] = max(cell_s.get((kind, p.concurrency, prompt), 0.0), one)
    return estimate_s(plan, cell_s)


def check_out(out: Path, protected: tuple[Path, ...]) -> None:
    """Never write a calibration over the store, the matrix, or a file that is not a calibration."""
    from specbench.predict.calibration import FORMAT

    for p in protected:
        if out.exists() and p.exists() and out.resolve() == p.resolve():
            raise UserError(f"--out {out} is {p}: give the calibration its own file")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder: give a file name (e.g. {out}/calibration.json)")
    if out.exists():
        try:
            doc = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            doc = None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise UserError(f"--out {out} exists and is not a specbench calibration: refusing to overwrite it")


def quick(matrix: Path, out: Path | None, store: Path | None, dry: bool) -> None:
    from specbench.predict.quick import ACCEPT_LENGTHS, BOOT_S, FIRST_BOOT_S

    spec, text, plan, est = _quick_spec(matrix)
    store = store or Path("runs") / (matrix.stem + "-quick.sqlite")
    out = out or store.with_name(matrix.stem + ".calibration.json")
    sims = f" at simulated accept lengths {' and '.join(f'{a:g}' for a in ACCEPT_LENGTHS)}" if plan.simulated else ""
    spec_txt = f" + {plan.spec_label}{sims}" if plan.spec_label else ""
    say = sys.stderr.write
    say(f"quick calibration of {matrix}: ar{spec_txt}; c = {', '.join(map(str, plan.concurrencies))} x prompt "
        f"{', '.join(map(str, plan.prompts))} tokens, {plan.output_tokens} out: {plan.servers} boots, {plan.cells} "
        f"cells, about {est / 60:.0f} min (a first boot of {FIRST_BOOT_S:.0f} s, {BOOT_S:.0f} s each after it, and "
        "the cells' predicted requests; measured on an H100: tests/data/h100-context-sglang-0.5.15.post1)\n")
    for n in plan.notes:
        say(f"  note: {n}\n")
    if dry:
        sys.stdout.write(text)
        return
    check_out(out, (store, matrix))
    _run_and_write(spec, text, matrix, store, out)


MARK = "# written by `specbench calibrate --quick"


def _check_quick_toml(path: Path, matrix: Path) -> None:
    """The quick matrix is written beside the store: never over the user's matrix or any file it did not write."""
    if path.exists() and matrix.exists() and path.resolve() == matrix.resolve():
        raise UserError(f"--store {path.with_suffix('.sqlite')} would put the quick matrix over {matrix}: give the "
                        "store another name")
    if path.exists():
        try:
            head = path.read_text(encoding="utf-8")[:len(MARK)]
        except (OSError, UnicodeDecodeError):
            head = ""
        if head != MARK:
            raise UserError(f"{path} exists and is not a quick matrix specbench wrote: refusing to overwrite it "
                            "(give --store another name)")


def _run_and_write(spec: Any, text: str, matrix: Path, store: Path, out: Path) -> None:
    from rich.console import Console

    from specbench.matrix.runner import RunOptions, run_matrix
    from specbench.predict.api import calibrate

    store.parent.mkdir(parents=True, exist_ok=True)
    quick_toml = store.with_suffix(".toml")
    _check_quick_toml(quick_toml, matrix)
    quick_toml.write_text(text, encoding="utf-8")
    t0 = time.monotonic()
    report = run_matrix(spec, text, str(quick_toml), RunOptions(store_path=store, progress=sys.stderr.isatty()),
                        console=Console(stderr=True, soft_wrap=True))
    ran_s = time.monotonic() - t0
    for msg in report.messages:
        sys.stderr.write(f"specbench: {msg}\n")
    if report.interrupted:
        raise UserError(f"interrupted after {ran_s:.0f} s: the cells done so far are in {store}; run the same "
                        "command again to finish them")
    cal = calibrate([str(store)])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cal.to_json(), indent=1) + "\n", encoding="utf-8")
    for c in cal.classes:
        rms = "-" if c.step_rel_rms != c.step_rel_rms else f"{100 * c.step_rel_rms:.1f} %"
        sys.stderr.write(f"{c.key.text()}: {c.n_step} cells, step residual RMS {rms}\n")
    sys.stderr.write(f"ran {report.done} cells ({report.failed} failed) in {ran_s:.0f} s; wrote {out}\n"
                     f"use it: specbench predict {matrix} --calibration {out}\n")
