"""`specbench run MATRIX`: run (or resume) a benchmark matrix; `--dry-run` shows cells, verdicts, commands.

This module is the command: its options, the checks before anything boots, the run and its exit status; what it
prints afterwards is run_summary.py, the dry run's listing run_dry.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from specbench.commands.run_dry import print_dry
from specbench.commands.run_summary import concurrency_cell, print_answers, summary_rows, summary_table

if TYPE_CHECKING:
    from rich.console import Console

# The matrix package (runner, HTTP clients, adapters) and rich are imported inside the functions: `specbench --help`
# and the other commands do not pay for them.


def round_lines(report: Any) -> list[str]:
    """What each round of repeat-until-decided did and why (matrix/rounds.py RoundInfo)."""
    out = []
    for info in report.rounds:
        if not info.reasons:
            continue
        out.append(f"round {info.round}: one more repeat for {len(info.reasons)} cell(s) of {info.questions} open "
                   f"question(s), {info.added} added")
        for cid, why in info.reasons.items():
            out.append(f"  {info.labels.get(cid, cid)}: {why}")
    return out


def _warn_long_cells(spec: Any, err: Console) -> None:
    """Before anything boots: each cell expected to run for more than LONG_CELL_S, in one line; each server whose
    cells send random-token prompts to a real drafter (load/prompt_checks.py), once."""
    from specbench.load.prompt_checks import random_prompts_warning
    from specbench.matrix.expansion import expand
    from specbench.matrix.preflight import duration_warning

    said: set[tuple[str, str]] = set()
    for c in expand(spec)[1]:
        why = duration_warning(c.client)
        if why:
            err.print(f"specbench: warning: cell {c.cell_id} ({c.label}): {why}", highlight=False, markup=False)
        why = random_prompts_warning(c.client, c.server)
        if why and (c.server_id, why) not in said:
            said.add((c.server_id, why))
            err.print(f"specbench: warning: {c.label} tp={c.tp}: {why}", highlight=False, markup=False)


@contextmanager
def _damage_is_one_line(store_path: Path) -> Iterator[None]:
    """A store damaged where the run reads or writes it (a cell's JSON, a text that no longer decodes, a page
    SQLite calls malformed) ends in one line naming the file and the damage (matrix/store.py::damage_error)."""
    import sqlite3

    from specbench.matrix.store import StoreDamaged, damage_error

    try:
        yield
    except (sqlite3.DatabaseError, StoreDamaged, UnicodeDecodeError) as exc:
        one_line = damage_error(store_path, exc)
        if one_line is None:
            raise
        raise one_line from None


def _gpus(text: Optional[str], dry: bool) -> Optional[tuple[str, ...]]:
    """--gpus resolved (matrix/gpus.py), said on stderr; a dry run also says which GPUs another process fills."""
    if text is None:
        return None
    import os

    from specbench.matrix.gpus import resolve, usable

    choice = resolve(text, os.environ)
    free = usable(choice.ids, choice.listing)
    for line in (*choice.warnings, *free.unknown, *(f"{s}; a run skips it" for s in free.skipped if dry)):
        sys.stderr.write(f"specbench: warning: {line}\n")
    if dry:  # a run says it once the GPUs another process fills are left out (matrix/packing.py)
        sys.stderr.write(f"specbench: {choice.using}\n")
    return choice.ids


def _executor(name: str, gpus: Optional[str], address: Optional[str]) -> str:
    from specbench.matrix.ray_exec import check_executor

    return check_executor(name, gpus, address)


def _order(name: str, spec: Any) -> Optional[tuple[str, ...]]:
    """--order: None keeps the matrix's order; predicted: server ids by predict/plan_matrix.py::server_order."""
    from specbench.errors import UserError

    if name == "matrix":
        return None
    if name != "predicted":
        raise UserError(f"--order {name!r}: expected matrix or predicted")
    from specbench.commands.predict import plan_rows
    from specbench.predict.plan_matrix import predict_spec, server_order, shipped_or_none

    rows = plan_rows(spec)
    cal = shipped_or_none()
    return server_order(rows, predict_spec(spec, rows, cal)) if cal is not None else None


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        matrix: Path = typer.Argument(..., help="the matrix TOML file"),
        store: Optional[Path] = typer.Option(None, "--store", help="results store (SQLite); default runs/<matrix>.sqlite"),
        retry_failed: bool = typer.Option(False, "--retry-failed", help="re-run cells that failed before"),
        dry: bool = typer.Option(False, "--dry-run", help="print cells, planner verdicts and exact commands; launch nothing"),
        as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
        no_progress: bool = typer.Option(False, "--no-progress", help="no progress bars"),
        gpus: Optional[str] = typer.Option(None, "--gpus", help="pack server tuples onto these GPUs, several servers "
                                           "at once: 0-7, 0,1,4 or all (CUDA_VISIBLE_DEVICES, else nvidia-smi)"),
        executor: str = typer.Option("local", "--executor", help="local (this machine) or ray (a Ray cluster; "
                                     "needs `pip install specbench-llm[ray]`)"),
        address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: RAY_ADDRESS, "
                                              "else a local Ray instance)"),
        repeats: Optional[int] = typer.Option(None, "--repeats", min=1, help="run each cell's load N times (overrides"
                                              " the matrix's `repeats`, a {min, max} range too)"),
        order: str = typer.Option("matrix", "--order", help="matrix (as written) or predicted (AR first, then the "
                                  "servers with the highest predicted speedup: `specbench predict`)"),
        new_matrix: bool = typer.Option(False, "--new-matrix", help="run this matrix into a store that holds another "
                                        "matrix's results (another name, engine or [plan] table)"),
    ) -> None:
        """Run a benchmark matrix (resumable: finished cells are kept; failed ones re-run with --retry-failed)."""
        from rich.console import Console

        from specbench.matrix.expansion import expand
        from specbench.matrix.preflight import dry_run
        from specbench.matrix.runner import RunOptions, default_store_path, run_matrix
        from specbench.matrix.toml_load import load_matrix

        spec, text = load_matrix(matrix)
        for note in spec.remote_paths:  # said before anything boots, in a dry run as in a run
            sys.stderr.write(f"warning: {matrix}: {note}\n")
        if repeats is not None:
            spec = spec.model_copy(update={"client": spec.client.model_copy(update={"repeats": repeats})})
        console = Console() if sys.stdout.isatty() else Console(width=200, soft_wrap=True)
        run_executor = _executor(executor, gpus, address)  # checked in a dry run too
        run_gpus = _gpus(gpus, dry)
        if dry:
            from specbench.predict.plan_matrix import with_predictions
            from specbench.redact import redact_obj

            # commands and env as they would run, their secrets masked; each cell with its predicted speedup
            rows = redact_obj(with_predictions(spec, dry_run(spec)))
            if as_json:
                sys.stdout.write(json.dumps(rows, indent=2) + "\n")
            else:
                print_dry(rows, console, spec.phases)
            return
        store_path = store or default_store_path(matrix)
        opts = RunOptions(store_path=store_path, retry_failed=retry_failed,
                          progress=not no_progress and not as_json and sys.stderr.isatty(),
                          gpus=run_gpus, executor=run_executor, ray_address=address,
                          order=_order(order, spec), new_matrix=new_matrix)
        err = Console(stderr=True, soft_wrap=True)
        _warn_long_cells(spec, err)
        with _damage_is_one_line(store_path):
            report = run_matrix(spec, text, str(matrix), opts, console=err)
        for msg in report.messages:
            err.print(f"specbench: {msg}", highlight=False, markup=False)
        for line in round_lines(report):  # on stderr: stdout stays the table (or the JSON)
            err.print(line, highlight=False, markup=False)
        with _damage_is_one_line(store_path):
            rows = summary_rows(store_path, {c.cell_id for c in expand(spec)[1]})
        if as_json:
            sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        else:
            console.print(summary_table(rows, f"{spec.name}: {store_path}"))
            for r in rows:
                for warning in (r.get("stream_warning"), r.get("client_warning")):
                    if warning:
                        console.print(f"  note: {r['label']} tp={r['tp']} c={concurrency_cell(r)}: {warning}", highlight=False,
                                      markup=False)
                if r["status"] in ("failed", "partial", "skipped") and r["reason"]:
                    first = str(r["reason"]).strip().splitlines()[0]
                    console.print(f"  {r['status']}: {r['label']} tp={r['tp']} c={concurrency_cell(r)}: "
                                  f"{first[:300]}", highlight=False, markup=False)
            print_answers(store_path, console)
            rounds = [i for i in report.rounds if i.reasons]
            more = (f"; {len(rounds)} round(s) of repeat-until-decided added {sum(i.added for i in rounds)} repeats"
                    if rounds else "")
            console.print(f"ran {report.ran} cells ({report.done} done, {report.partial} partial, {report.failed} failed), "
                          f"{report.skipped} skipped by the planner, {report.kept} kept from earlier runs{more}; "
                          f"store: {store_path}", highlight=False)
        if report.interrupted:
            err.print(f"specbench: interrupted; finished cells are kept in {store_path}; run again to resume",
                      highlight=False, markup=False)
            raise typer.Exit(130)
        if report.failed or report.partial:
            raise typer.Exit(1)
