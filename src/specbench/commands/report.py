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


def _summary(written: Written) -> list[Table]:
    """The answer per workload and concurrency (report/decisions.py), one short rich table per section and lead."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from specbench.report.decision_tables import answer_tables

    out = []
    for dt in answer_tables(written.report.tables.questions):
        t = Table(title=escape(dt.title), title_justify="left")
        for i, col in enumerate(dt.header):
            t.add_column(col, justify="left" if i in dt.text_cols else "right", overflow="fold")
        for row in dt.rows:  # plain text: a label's "[...]" is the user's, never rich markup
            t.add_row(*(Text(c) for c in row))
        out.append(t)
    return out


def report_command(
    stores: list[Path] = typer.Argument(..., help="Results store(s) of `specbench run`; several are compared."),
    out: Optional[Path] = typer.Option(None, "--out", help="Report folder (default: <first store dir>/report)."),
) -> None:
    """Write report.md, report.html (self-contained) and PNG plots from one or more results stores."""
    from rich.console import Console
    from rich.markup import escape

    from specbench.report.build import report_paths

    written = report_paths(stores, out)
    console = Console(soft_wrap=True) if sys.stdout.isatty() else Console(width=200, soft_wrap=True)
    summary = written.report.tables.summary
    style = {"complete": "green", "partial": "yellow"}.get(summary.state, "red")
    console.print(f"[{style}]{escape(summary.headline)}[/{style}]")
    for table in _summary(written):
        console.print(table)
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
