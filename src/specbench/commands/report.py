"""`specbench report STORE [STORE ...]` and `specbench export STORE --format csv|json|jsonl`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from specbench.errors import UserError

if TYPE_CHECKING:
    from rich.table import Table

    from specbench.report.build import Written

# The report package (matplotlib, jinja2) and rich are imported inside the commands: only `report` pays for plots.


def _summary(written: Written) -> Table:
    """The fastest configuration per TP and concurrency, as a short rich table."""
    from rich.table import Table

    from specbench.report.tables import fmt

    t = Table(title="fastest per TP and concurrency", title_justify="left")
    best = written.report.tables.best
    ar_won = any(b.is_baseline for b in best)
    cols = ("TP", "c", "fastest", "out tok/s", "speedup vs AR") + (("best speculative",) if ar_won else ())
    for col in cols:
        t.add_column(col, justify="left" if col in ("fastest", "best speculative") else "right")
    for b in best:
        t.add_row(fmt(b.tp), fmt(b.concurrency), b.series, fmt(b.output_throughput), b.speedup_text,
                  *((b.best_spec_text or "–",) if ar_won else ()))
    return t


def report_command(
    stores: list[Path] = typer.Argument(..., help="Results store(s) of `specbench run`; several are compared."),
    out: Optional[Path] = typer.Option(None, "--out", help="Report folder (default: <first store dir>/report)."),
) -> None:
    """Write report.md, report.html (self-contained) and PNG plots from one or more results stores."""
    from rich.console import Console

    from specbench.report.build import report_paths

    written = report_paths(stores, out)
    console = Console(stderr=False, soft_wrap=True)
    summary = written.report.tables.summary
    style = {"complete": "green", "partial": "yellow"}.get(summary.state, "red")
    console.print(f"[{style}]{summary.headline}[/{style}]")
    if written.report.tables.best:
        console.print(_summary(written))
    n_fail = len(written.report.tables.failures)
    if n_fail:
        console.print(f"[red]{n_fail} failure(s)[/red]: see the Failures section; logs in {written.out_dir / 'logs'}")
    console.print(f"report: {written.html}")
    console.print(f"        {written.markdown}")
    if written.pngs:
        console.print(f"plots:  {', '.join(p.name for p in written.pngs)} in {written.out_dir}")


def export_command(
    store: Path = typer.Argument(..., help="Results store of `specbench run`."),
    format: str = typer.Option("csv", "--format", "-f", help="csv or json (per cell), jsonl (per request)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output file (default: stdout)."),
) -> None:
    """Export every cell with flattened metrics as CSV or JSON."""
    from specbench.report.compare import load_stores
    from specbench.report.export import FORMATS, export

    if format.lower() not in FORMATS:
        raise UserError(f"--format {format!r}: use one of {', '.join(FORMATS)}")
    text = export(load_stores([store]), format)
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{out}: cannot write ({exc.strerror})") from None
    print(f"wrote {out}", file=sys.stderr)


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
    app.command("export")(export_command)
