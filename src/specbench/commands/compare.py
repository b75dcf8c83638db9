"""`specbench compare A.db B.db [--json] [--margin 0.03] [--out FILE.md]`: did B (a new release, another drafter,
a flag) help against A?

The work is report/runs_match.py (which cell is which) and report/runs_compare.py (the verdicts); this module
reads the arguments, prints, writes the markdown and sets the exit status:
0, or 1 when any matched pair is a decided regression (or ran in A and failed in B): a CI gate. A user's mistake
(a missing store, a file that is not SQLite, the same store twice, a bad margin, an --out that is not ours) is one
line and exit status 2, as everywhere (cli.py).

`--out` never writes over a file specbench compare did not write: an existing file must start with its marker line
(report/runs_render.py::MARKER; report/build.py keeps a report folder the same way, by its manifest), and is never
one of the stores. The file is written whole to a temporary name beside it, then renamed over it.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from specbench.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

    from specbench.report.runs_compare import RunsComparison

STYLE = {"improvement": "green", "regression": "red", "failed": "red", "tie": "cyan", "undecided": "yellow"}


def _same_file(x: Path, y: Path) -> bool:
    try:
        return x.exists() and y.exists() and os.path.samefile(x, y)
    except OSError:
        return False


def _check_stores(a: Path, b: Path) -> None:
    if _same_file(a, b):
        raise UserError(f"{a} and {b} are the same store: give two different results stores")


def _store_files(store: Path) -> tuple[Path, ...]:
    """The store and the files SQLite keeps beside it."""
    return (store, *(store.with_name(store.name + s) for s in ("-wal", "-shm", "-journal")))


def check_out(out: Path, stores: tuple[Path, ...]) -> None:
    """Refuse an --out that is a store, a link, a folder, or a file specbench compare did not write."""
    from specbench.report.runs_render import MARKER

    if out.is_symlink():
        raise UserError(f"{out}: a symbolic link; give --out a new file or one specbench compare wrote")
    if not out.exists():
        if not out.parent.is_dir():
            raise UserError(f"{out}: its folder {out.parent} does not exist")
        return
    if not out.is_file():
        raise UserError(f"{out}: not a file; give --out a markdown file name")
    for store in stores:
        if any(_same_file(out, f) for f in _store_files(store)):
            raise UserError(f"{out}: is results store {store} (or its SQLite file); give --out another file")
    try:
        with out.open("rb") as fh:
            head = fh.read(len(MARKER.encode()) + 1)
    except OSError as exc:
        raise UserError(f"{out}: cannot read ({exc.strerror or exc})") from None
    if head.decode("utf-8", errors="replace").rstrip("\r\n") != MARKER:
        raise UserError(f"{out}: exists and was not written by specbench compare; give --out a new file")


def write_out(out: Path, text: str, stores: tuple[Path, ...]) -> None:
    """Write `text` to `out` (check_out first): whole to a temporary file beside it, then renamed over it."""
    check_out(out, stores)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, out)
    except OSError as exc:
        if tmp.exists() and not tmp.is_symlink():
            tmp.unlink()
        raise UserError(f"{out}: cannot write ({exc.strerror or exc})") from None


def _margin(value: float) -> float:
    if not math.isfinite(value) or not 0 < value < 1:
        raise UserError(f"--margin {value}: give the tie margin as a fraction above 0 and below 1 (0.03 is 3%)")
    return value


def _print(rc: RunsComparison, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    from specbench.report import runs_render as render

    for line in render.headlines(rc):
        console.print(f"[bold]{escape(line)}[/bold]" if line == rc.summary else escape(line))
    if rc.results:
        t = Table(title="Matched pairs (B against A)", title_justify="left")
        header, rows = render.pair_table(rc, compact=True)
        for col in header:
            t.add_column(col, justify="left" if col in ("config", "workload", "verdict", "note") else "right")
        at = header.index("verdict")
        for r, row in zip(rc.results, rows):
            cells = [escape(x) for x in row]
            style = STYLE.get(r.outcome)
            cells[at] = f"[{style}]{cells[at]}[/{style}]" if style else cells[at]
            t.add_row(*cells)
        console.print(t)
    groups = render.unmatched_groups(rc)
    if groups:
        u = Table(title="Unmatched cells", title_justify="left")
        for col in render.UNMATCHED_HEADER:
            u.add_column(col)
        for g in groups:
            u.add_row(*(escape(x) for x in render.unmatched_row(g)))
        console.print(u)
    console.print(escape(render.explanation(rc)))


def compare_command(
    a: Path = typer.Argument(..., help="Results store A: the reference (the old release, the old drafter)."),
    b: Path = typer.Argument(..., help="Results store B: the change, compared against A."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as one JSON object (docs/contracts.md)."),
    margin: float = typer.Option(0.03, "--margin", help="Tie margin: B and A tie when the whole interval of B vs A "
                                                        "lies within this fraction of 1 (0.03 = 3%)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write the comparison as markdown to this file "
                                                           "(never over a file specbench compare did not write)."),
) -> None:
    """Compare two runs, B against A: cells matched on label, server flags, model, GPU, engine release and workload;
    each pair a verdict (improvement / regression / tie / undecided). Exit status 1 on any regression."""
    from rich.console import Console

    from specbench.report.runs_compare import compare_runs, to_json
    from specbench.report.runs_render import render_markdown
    from specbench.stored.read import load_store

    m = _margin(margin)
    _check_stores(a, b)
    if out is not None:
        check_out(out, (a, b))  # before the work: a refused --out costs nothing
    rc = compare_runs(load_store(a), load_store(b), m)
    if json_out:
        sys.stdout.write(json.dumps(to_json(rc), indent=1) + "\n")
    else:
        console = Console(soft_wrap=True) if sys.stdout.isatty() else Console(width=200, soft_wrap=True)
        _print(rc, console)
    if out is not None:
        write_out(out, render_markdown(rc), (a, b))
        print(f"wrote {out}", file=sys.stderr)
    raise typer.Exit(rc.exit_status)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
